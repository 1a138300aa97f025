package argorollouts_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

// FuzzArgoRollouts searches faults a real cluster produces for the
// controller, as `stalefuzz fuzz target.yaml` does.
func FuzzArgoRollouts(f *testing.F) { target.Fuzz(f, "target.yaml") }

// env starts an Env for target.yaml, building the controller first if it
// is not cached (minutes, once).
func env(t *testing.T) *fuzz.Env {
	t.Helper()
	_, env := target.LoadEnv(t, "target.yaml")
	return env
}

// TestArgoRollouts runs the controller without faults, promote and abort:
// no violation.
func TestArgoRollouts(t *testing.T) {
	e := env(t)
	for _, c := range []struct {
		name   string
		action int
	}{{"promote", 0}, {"abort", 1}} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"threads": 0, "namespaced": 0, "edit": 0, "action": c.action}}
			res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			if len(res.Violations) > 0 {
				t.Errorf("schedule %s: violations %v\n%s", sched, res.Violations, summary(sched, res))
			}
		})
	}
}

// created counts the objects of resource the run created and deleted (from
// the trace: the namespace is swept after the run).
func created(res *fuzz.Result, resource string) (created, deleted int) {
	for _, r := range res.Trace.Requests {
		if r.DryRun || r.Resource != resource || r.Subresource != "" {
			continue
		}
		if r.Verb == "create" && r.Code == 201 {
			created++
		}
		if r.Verb == "delete" && r.Code/100 == 2 {
			deleted++
		}
	}
	return created, deleted
}

// summary is what one run did: the ReplicaSets and Pods created and
// deleted, then res.Report, with its phase times.
func summary(sched fuzz.Schedule, res *fuzz.Result) string {
	rc, rd := created(res, "replicasets")
	pc, pd := created(res, "pods")
	return fmt.Sprintf("schedule %s: settled %v, phases %s; replicasets created %d, deleted %d; pods created %d, deleted %d\n%s", sched, res.Settled, res.Phases, rc, rd, pc, pd, res.Report())
}

// TestFalseAlarms: executions whose events are only delayed as much as the
// apiserver delayed them in the no-fault reference runs raise no violation.
// It runs only with STALEFUZZ_FALSE_ALARMS=N (make false-alarms-targets).
func TestFalseAlarms(t *testing.T) {
	target.CheckFalseAlarms(t, "target.yaml", 0)
}
