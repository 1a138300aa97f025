package fuzz

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSettleBudgetGrowsOnlyWithProgress runs, against the real apiserver, a
// controller that is still making progress past SettleBudget (a loaded
// machine's healthy controller, its writes late) and one that retries
// without progress (409 after 409, a cache that never catches up). In a go
// test -fuzz worker neither settles and both are judged at the budget.
// Outside one the first settles, its settle budget grown by SettleSlack
// while it made progress, and the second is still judged at the budget,
// not SettleSlack times later.
func TestSettleBudgetGrowsOnlyWithProgress(t *testing.T) {
	const busy = 3500 * time.Millisecond // progress writes for this long
	settle, extended := SettleBudget, SettleBudget*SettleSlack
	if busy <= settle+DefaultQuiet || busy+time.Second >= extended {
		t.Fatalf("the test needs writes for longer than SettleBudget %v and well within %v", settle, extended)
	}
	s := Scenario{
		Name: "slowsettle", Drive: noop,
		Clients: []string{"a"}, Resources: []string{"configmaps"},
		Knobs: []Knob{{Name: "stuck", Values: 2}},
		Start: func(ctx context.Context, x *Exec) error {
			cs, err := clientsetOf(x, "a")
			if err != nil {
				return err
			}
			cms := cs.CoreV1().ConfigMaps(x.Namespace)
			cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "progress"}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			stuck := x.Knob("stuck") == 1
			x.Go("writer", func(ctx context.Context) error {
				began := time.Now()
				for i := 0; stuck || time.Since(began) < busy; i++ {
					select {
					case <-ctx.Done():
						return nil
					case <-time.After(100 * time.Millisecond):
					}
					next := cm.DeepCopy()
					next.Data = map[string]string{"n": fmt.Sprint(i)}
					// Stuck: always from the create's resourceVersion, so
					// every update after the first meets 409.
					got, err := cms.Update(ctx, next, metav1.UpdateOptions{})
					if err == nil && !stuck {
						cm = got
					}
				}
				return nil
			})
			return nil
		},
	}
	env := testEnv(t, s)
	ctx := context.Background()
	run := func(slack time.Duration, stuck int) *Result {
		t.Helper()
		env.settleSlack = slack
		res, err := env.Run(ctx, Schedule{Knobs: map[string]int{"stuck": stuck}})
		if err != nil {
			t.Fatalf("settle slack %v, stuck %d: %v", slack, stuck, err)
		}
		return res
	}

	// In a go test -fuzz worker: the budget is SettleBudget.
	if res := run(1, 0); res.Settled {
		t.Fatalf("in a fuzz worker, a controller writing for %v settled within SettleBudget %v (phases %v): the test's premise is gone", busy, settle, res.Phases)
	}
	// Outside one, a controller still making progress gets up to
	// SettleSlack times the budget.
	if res := run(SettleSlack, 0); !res.Settled {
		t.Errorf("outside a fuzz worker, a controller writing for %v, then quiet, never settled within %v (phases %v)", busy, extended, res.Phases)
	}
	// One retrying without progress is judged at the budget all the same.
	res := run(SettleSlack, 1)
	if res.Settled {
		t.Fatalf("a controller retrying without progress settled (phases %v)", res.Phases)
	}
	if w := writesSince(res.Trace, res.Mark); w.conflicts < minFailedRetries {
		t.Fatalf("the stuck writer met %d conflicts, want at least %d: %s", w.conflicts, minFailedRetries, w)
	}
	if res.Phases.Settle >= extended/2 {
		t.Errorf("a controller retrying without progress kept settling for %v, want it judged at SettleBudget %v, not waited for up to %v", res.Phases.Settle, settle, extended)
	}
}
