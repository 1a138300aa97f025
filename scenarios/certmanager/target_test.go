package certmanager_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

// FuzzCertManager searches faults a real cluster produces for the
// controller, as `stalefuzz fuzz target.yaml` does.
func FuzzCertManager(f *testing.F) { target.Fuzz(f, "target.yaml") }

// env starts an Env for tg, stopped when the test ends, building the
// controller first if it is not cached.
func env(t *testing.T) (*target.Target, *fuzz.Env) {
	t.Helper()
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return tg, target.StartEnv(t, tg)
}

// writes counts the successful creates and deletes per resource.
func writes(res *fuzz.Result) map[string]int {
	n := map[string]int{}
	for _, r := range res.Trace.Requests {
		if r.DryRun || r.Subresource != "" || r.Code/100 != 2 {
			continue
		}
		if r.Verb == "create" || r.Verb == "delete" {
			n[r.Verb+" "+r.Resource]++
		}
	}
	return n
}

// summary is what one run did, then res.Report.
func summary(sched fuzz.Schedule, res *fuzz.Result) string {
	return fmt.Sprintf("schedule %s: settled %v, phases %s; writes %v\n%s", sched, res.Settled, res.Phases, writes(res), res.Report())
}

// TestCertManager runs the controller without faults in the default
// gates for each action.
func TestCertManager(t *testing.T) {
	_, e := env(t)
	for _, k := range []map[string]int{
		{"gates": 0, "edit": 0, "renew": 0, "victim": 0},
		{"gates": 0, "edit": 1, "renew": 1, "victim": 1},
	} {
		sched := fuzz.Schedule{Knobs: k}
		res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
		if err != nil {
			t.Fatalf("schedule %s: %v", sched, err)
		}
		t.Log(summary(sched, res))
	}
}
