package fluxcd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/proxy"
)

// FuzzFluxTarget searches target.yaml as `stalefuzz fuzz` does.
func FuzzFluxTarget(f *testing.F) { target.Fuzz(f, "target.yaml") }

// TestTargetFile runs target.yaml, source-controller as a process judged by
// the generic oracles alone (kstatus convergence, crash, storm), against the
// real apiserver, with its git fixture served by stalefuzz. Every MODIFIED
// event of the GitRepository from t+0.5 s to t+0.9 s (the user's edit of
// spec.interval and source-controller's own writes then) silently dropped
// (no relist, which no real apiserver does) leaves it unconverged, its status patches meeting 409 after 409 against a cache that
// never catches up: the Go scenario's finding, named by the convergence
// oracle alone. A 410 relist in the same window, what a real informer
// meets, converges, and so does the run without faults. The window is
// timed from the mark: on a busy machine source-controller's writes can
// fall later, and a blind status patch after the window makes an event
// that brings the cache back, so the dropped case is judged on the first
// of up to 3 runs that is stuck (as a known bug's corpus entry is,
// fuzz.KnownBugRuns).
func TestTargetFile(t *testing.T) {
	_, env := target.LoadEnv(t, "target.yaml")
	at := func(action proxy.Action) []fuzz.Step {
		return []fuzz.Step{{Client: "source-controller", Resource: "gitrepositories", Types: []string{"MODIFIED"}, Action: action, Start: 500 * time.Millisecond, Length: 400 * time.Millisecond}}
	}
	for _, c := range []struct {
		name  string
		steps []fuzz.Step
		stuck bool
	}{
		{"no fault", nil, false},
		{"events dropped from t+0.5s, no relist", at(proxy.Drop), true},
		{"a 410 relist from t+0.5s", at(proxy.Expire), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"edit": 0}, Steps: c.steps}
			isStuck := func(res *fuzz.Result) bool {
				for _, v := range res.Violations {
					if (v.Oracle == "stuck" || v.Oracle == "convergence") && strings.Contains(v.Message, "GitRepository "+res.Namespace+"/podinfo") {
						return true
					}
				}
				return false
			}
			runs := 1
			if c.stuck {
				runs = 3
			}
			res, _, err := env.RunUntil(context.Background(), sched, runs, isStuck, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			stuck := isStuck(res)
			for _, v := range res.Violations {
				if !((v.Oracle == "stuck" || v.Oracle == "convergence") && strings.Contains(v.Message, "GitRepository "+res.Namespace+"/podinfo")) {
					t.Errorf("schedule %s: unexpected violation: %s: %s", sched, v.Oracle, v.Message)
				}
			}
			if stuck != c.stuck {
				t.Errorf("schedule %s: GitRepository stuck: got %v, want %v\n%s", sched, stuck, c.stuck, res.Report())
			}
		})
	}
}

// TestFalseAlarms: executions of target.yaml whose events are only delayed
// as much as the apiserver delayed them in the no-fault reference runs
// raise no violation of the convergence, crash or storm oracle (0 in 199,
// README.md). It runs only with STALEFUZZ_FALSE_ALARMS=N (make
// false-alarms-targets: 200).
func TestFalseAlarms(t *testing.T) {
	target.CheckFalseAlarms(t, "target.yaml", 0)
}
