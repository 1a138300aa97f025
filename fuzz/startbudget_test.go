package fuzz

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stalefuzz/stalefuzz/proxy"
)

// TestStartTakesTheLagBudgetItsScheduleLeaves runs, against the real
// apiserver, a scenario whose controllers take 1.5 s to start (a loaded
// machine), longer than StartBudget: with no fault the execution is judged,
// its start having taken what the schedule's lag does not need; with a hold
// that needs the whole lag budget, the start still has only StartBudget and
// the execution is a harness error in a go test -fuzz worker, so that it
// fits Budget; outside one the start may take StartSlack times as long.
func TestStartTakesTheLagBudgetItsScheduleLeaves(t *testing.T) {
	const slow = 1500 * time.Millisecond
	if slow <= StartBudget || slow >= StartBudget+lagBudget() {
		t.Fatalf("the test needs a start between StartBudget %v and StartBudget+lagBudget %v", StartBudget, StartBudget+lagBudget())
	}
	s := Scenario{
		Name: "slowstart", Drive: noop,
		Clients: []string{"a"}, Resources: []string{"configmaps"},
		Start: func(ctx context.Context, x *Exec) error {
			select {
			case <-time.After(slow):
			case <-ctx.Done():
				return ctx.Err()
			}
			// The one request of client a: a controller whose start took slow.
			cs, err := clientsetOf(x, "a")
			if err != nil {
				return err
			}
			_, err = cs.CoreV1().ConfigMaps(x.Namespace).List(ctx, metav1.ListOptions{})
			return err
		},
	}
	env := testEnv(t, s)
	ctx := context.Background()

	res, err := env.Run(ctx, Schedule{})
	if err != nil {
		t.Fatalf("no fault, a %v start: %v", slow, err)
	}
	if res.Phases.Start < slow {
		t.Errorf("start phase %v, want at least %v", res.Phases.Start, slow)
	}
	if res.Elapsed > Budget {
		t.Errorf("execution took %v, over Budget %v", res.Elapsed, Budget)
	}

	whole := Schedule{Steps: []Step{{Client: "a", Resource: "configmaps", Start: 0, Length: lagBudget() - 50*time.Millisecond, Action: proxy.Hold}}}
	if need := env.lagNeed(whole); need < lagBudget()-StartBudget/2 {
		t.Fatalf("the hold needs %v of the lag budget %v, want nearly all", need, lagBudget())
	}
	// In a go test -fuzz worker, whose inputs must each finish in 10 s.
	env.startSlack = 1
	_, err = env.Run(ctx, whole)
	if h, ok := errors.AsType[*HarnessError](err); !ok || !strings.Contains(h.Error(), "start controllers") {
		t.Fatalf("a hold over the whole lag budget with a %v start: got %v, want a harness error at the start", slow, err)
	}
	// Anywhere else (a replay, a regression run, this test), the start may
	// take StartSlack times its budget, the execution's budget growing
	// with it: the same schedule is judged.
	env.startSlack = StartSlack
	res, err = env.Run(ctx, whole)
	if err != nil {
		t.Fatalf("outside a fuzz worker, a hold over the whole lag budget with a %v start: %v", slow, err)
	}
	if res.Phases.Start < slow {
		t.Errorf("start phase %v, want at least %v", res.Phases.Start, slow)
	}
}
