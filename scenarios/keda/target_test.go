package keda_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

// FuzzKEDA searches faults a real cluster produces for the operator, as
// `stalefuzz fuzz target.yaml` does.
func FuzzKEDA(f *testing.F) { target.Fuzz(f, "target.yaml") }

// env starts an Env for target.yaml, building the operator first if it is
// not cached.
func env(t *testing.T) *fuzz.Env {
	t.Helper()
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return target.StartEnv(t, tg)
}

// knobs is one knob setting by value index: strategy (default, accurate),
// grow (idle, work), paused (false, true), finish (0s, 2s).
func knobs(strategy, grow, paused, finish int) map[string]int {
	return map[string]int{"strategy": strategy, "grow": grow, "paused": paused, "finish": finish}
}

// TestKEDA runs the operator without faults: two queue Pods make two Jobs;
// three more at 1 s make one more (maxReplicaCount 3), unless the
// ScaledJob was paused just before; and no violation.
func TestKEDA(t *testing.T) {
	e := env(t)
	for _, c := range []struct {
		name                         string
		strategy, grow, paused, jobs int
	}{
		{"nothing more", 0, 0, 0, 2},
		{"scale out", 0, 1, 0, 3},
		{"scale out, accurate", 1, 1, 0, 3},
		{"paused, then scale out", 0, 1, 1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: knobs(c.strategy, c.grow, c.paused, 0)}
			res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			if n := jobs(res); n != c.jobs || len(res.Violations) > 0 {
				t.Errorf("schedule %s: %d Jobs created, violations %v; want %d and none\n%s", sched, n, res.Violations, c.jobs, summary(sched, res))
			}
		})
	}
}

// jobs counts the Jobs the operator created (from the trace).
func jobs(res *fuzz.Result) (created int) {
	for _, r := range res.Trace.Requests {
		if !r.DryRun && r.Resource == "jobs" && r.Subresource == "" && r.Verb == "create" && r.Code == 201 {
			created++
		}
	}
	return created
}

// summary is what one run did: the Jobs created, then res.Report, with its
// phase times.
func summary(sched fuzz.Schedule, res *fuzz.Result) string {
	return fmt.Sprintf("schedule %s: settled %v, phases %s; jobs created: %d\n%s", sched, res.Settled, res.Phases, jobs(res), res.Report())
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
	f, err := target.MeasureFalseAlarms(context.Background(), "target.yaml", n, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("false alarms of keda: %s", f)
	if len(f.ByOracle) > 0 {
		t.Errorf("false alarms: %s", f)
	}
}
