package argorollouts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

// TestDeadlineTargetFile runs targets/deadline.yaml without faults, with
// and without progressDeadlineAbort, and checks that each run reached the
// timer the target exists for: the bad build's ReplicaSet created, the
// Rollout marked Degraded by the controller itself at least 4 s later
// (its progress deadline, 5 s, whole seconds), aborted only when
// progressDeadlineAbort is set, then Healthy on the fixed version, with
// every wait met and no violation.
func TestDeadlineTargetFile(t *testing.T) {
	tg, err := target.Load("targets/deadline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := target.StartEnv(t, tg)
	for _, c := range []struct {
		name  string
		abort int
	}{{"degraded", 0}, {"abort", 1}} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"on-deadline": c.abort}}
			res := cleanRun(t, env, sched)
			// The controller's writes: its ReplicaSet creates (the first
			// version's, the bad build's, the fix's), then its first
			// Degraded and its aborts.
			var creates []time.Time
			var degraded time.Time
			aborted, healthy := false, false
			for _, r := range res.Trace.Requests {
				if r.Client != "argo-rollouts" || r.Code >= 300 || r.DryRun {
					continue
				}
				if r.Resource == "replicasets" && r.Verb == "create" {
					creates = append(creates, r.Start)
				}
				if r.Resource != "rollouts" || r.Write == nil {
					continue
				}
				switch phase := strings.Trim(r.Write.Set["status.phase"], `"`); {
				case phase == "Degraded" && degraded.IsZero():
					degraded = r.Start
				case phase == "Healthy" && !degraded.IsZero():
					healthy = true
				}
				aborted = aborted || r.Write.Set["status.abort"] == "true"
			}
			if len(creates) < 3 {
				t.Fatalf("%d ReplicaSets created by the controller, want 3 (versions 1, 2 and 3)", len(creates))
			}
			if degraded.IsZero() {
				t.Fatalf("the controller never marked the Rollout Degraded: its progress deadline not reached")
			}
			if d := degraded.Sub(creates[1]); d < 4*time.Second {
				t.Errorf("the Rollout marked Degraded %v after the bad build's ReplicaSet was created, want at least its 5 s deadline (whole seconds)", d)
			}
			if aborted != (c.abort == 1) {
				t.Errorf("the controller set status.abort: %v, want %v (progressDeadlineAbort %v)", aborted, c.abort == 1, c.abort == 1)
			}
			if !healthy {
				t.Errorf("the controller never marked the Rollout Healthy after it was Degraded (the fixed version)")
			}
			t.Logf("schedule %s: %v; Degraded %v after the bad build's ReplicaSet; aborted %v", sched, res.Elapsed.Round(100*time.Millisecond), degraded.Sub(creates[1]).Round(100*time.Millisecond), aborted)
		})
	}
}
