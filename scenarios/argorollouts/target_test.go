package argorollouts_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
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
	toolchain(t)
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return target.StartEnv(t, tg)
}

// toolchain lets the go command fetch the toolchain Argo Rollouts' go.mod
// asks for ("go 1.26.10"): with GOTOOLCHAIN=local and an older go, neither
// its build nor the download of its CRDs' module runs.
func toolchain(t *testing.T) {
	if os.Getenv("GOTOOLCHAIN") == "" {
		t.Setenv("GOTOOLCHAIN", "auto")
	}
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

// TestArgoRolloutsLostPromote is the finding's regression row: restarted
// right after its 10th status patch of a Rollout (in the runs that
// reproduce, the one that adds the blue-green Rollout's BlueGreenPause), onto an apiserver that has not seen that patch, the
// controller lists the Rollout without its pause; meanwhile the workload has
// seen the pause and promoted (status.pauseConditions: null). The new
// process pauses the Rollout again with a status merge patch computed from
// its stale copy and sent without a resourceVersion (sync.go:789-807), and
// the promotion is gone: the Rollout ends Paused on the old version, where
// every no-fault run ends Healthy on the new one (the end-state oracle).
// The anchor is an ordinal among both Rollouts' status patches, so the input
// reproduces in about half the runs (9/20 by stalefuzz replay): up to eight
// runs must show it. Its control: the same restart onto an up-to-date
// apiserver never loses the promotion (three runs).
func TestArgoRolloutsLostPromote(t *testing.T) {
	e := env(t)
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := tg.Scenario()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, input string
		runs        int
		lost        bool
	}{
		{"lagging apiserver", "testdata/lost-promote.input", 8, true},
		{"up-to-date apiserver", "testdata/lost-promote-nolag.input", 3, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := fuzz.ReadCorpusEntry(c.input)
			if err != nil {
				t.Fatal(err)
			}
			sched := s.Decode(b)
			var last string
			for i := 0; i < c.runs; i++ {
				res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
				if err != nil {
					t.Fatalf("schedule %s: %v", sched, err)
				}
				last = summary(sched, res)
				if lostPromotion(res) {
					if !c.lost {
						t.Fatalf("schedule %s: run %d lost the promotion, want never\n%s", sched, i+1, last)
					}
					t.Logf("schedule %s: the promotion lost in run %d", sched, i+1)
					return
				}
			}
			if c.lost {
				t.Errorf("schedule %s: the promotion never lost in %d runs, want at least once\n%s", sched, c.runs, last)
			}
		})
	}
}

// lostPromotion reports whether a Rollout ended Paused where the no-fault
// runs end Healthy (the end-state oracle).
func lostPromotion(res *fuzz.Result) bool {
	for _, v := range res.Violations {
		if v.Oracle == "end-state" && strings.Contains(v.Message, `status.phase="Paused" (reference runs: "Healthy")`) {
			return true
		}
	}
	return false
}

// TestFalseAlarms: executions whose events are only delayed as much as the
// apiserver delayed them in the no-fault reference runs raise no violation.
// It runs only with STALEFUZZ_FALSE_ALARMS=N (make false-alarms-targets).
func TestFalseAlarms(t *testing.T) {
	v := os.Getenv("STALEFUZZ_FALSE_ALARMS")
	if v == "" {
		t.Skip("STALEFUZZ_FALSE_ALARMS=N runs it (make false-alarms-targets)")
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("STALEFUZZ_FALSE_ALARMS=%q: %v", v, err)
	}
	toolchain(t)
	f, err := target.MeasureFalseAlarms(context.Background(), "target.yaml", n, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("false alarms of argorollouts: %s", f)
	if len(f.ByOracle) > 0 {
		t.Errorf("false alarms: %s", f)
	}
}
