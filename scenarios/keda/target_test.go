package keda_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
	"github.com/stalefuzz/stalefuzz/scenarios/internal/suite"
)

// FuzzKEDA searches faults a real cluster produces for the operator, as
// `stalefuzz fuzz target.yaml` does.
func FuzzKEDA(f *testing.F) { target.Fuzz(f, "target.yaml") }

// patched loads target.yaml with the operator built with patch (a file of
// fix/) applied to its module, and starts an Env for it.
func patched(t *testing.T, patch string) (*target.Target, *fuzz.Env) {
	t.Helper()
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tg.Controllers[0].Patches = append(tg.Controllers[0].Patches, target.SourcePatch{File: patch})
	return tg, target.StartEnv(t, tg)
}

// env starts an Env for target.yaml, building the operator first if it is
// not cached.
func env(t *testing.T) *fuzz.Env {
	t.Helper()
	_, env := target.LoadEnv(t, "target.yaml")
	return env
}

// knobs is one knob setting by value index: strategy (default, accurate),
// grow (idle, work), paused (false, true), finish (0s: its only value).
func knobs(strategy, grow, paused, finish int) map[string]int {
	return map[string]int{"strategy": strategy, "grow": grow, "paused": paused, "finish": finish}
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
// apiserver delayed them in the no-fault reference runs raise no violation
// of the count, end-state, crash or storm oracle beyond the known findings
// (target.yaml's oracles.known), which are counted apart. It runs only with
// STALEFUZZ_FALSE_ALARMS=N (make false-alarms-targets). Measured: no false
// alarm in 97 judged executions, 2 with only known findings (README.md,
// "False alarms"). On a loaded machine those delays reach a few hundred
// milliseconds, enough for finding 1: before the findings were declared
// known, 43 of 187 executions failed on them.
func TestFalseAlarms(t *testing.T) {
	target.CheckFalseAlarms(t, "target.yaml", 0)
}

// TestKEDALateJobEvents is the finding's regression row. Its saved input
// (testdata/late-jobs.input) holds every event of the operator's Job watch
// until t+1.49 s (a slow apiserver, network or client), longer than the
// ScaledJob's 1 s pollingInterval: the first poll creates two Jobs for the
// queue of two, the next counts the running Jobs from the informer cache
// (scale_jobs.go getRunningJobCount), finds none and creates two more: 4
// live Jobs, above maxReplicaCount (3), where no no-fault run has more
// than 2. Its controls: the same events held only until t+0.5 s, inside
// one pollingInterval (testdata/late-jobs-short.input), duplicate nothing;
// nor does the operator with fix/expect-created-jobs.patch, which counts
// the Jobs it created as running until the cache shows them, judged in a
// run whose poll came before the cache showed them. Each is given up to
// three runs to show what it shows.
//
// Its fix case builds the patched operator: make test-volume runs it, make
// test does not (suite.VolumeOnly).
func TestKEDALateJobEvents(t *testing.T) {
	tg, e := target.LoadEnv(t, "target.yaml")
	for _, c := range []struct {
		name, input, patch string
		dup                bool
	}{
		{"held past a pollingInterval", "testdata/late-jobs.input", "", true},
		{"held within a pollingInterval", "testdata/late-jobs-short.input", "", false},
		{"held past a pollingInterval, created Jobs expected (fix)", "testdata/late-jobs.input", "fix/expect-created-jobs.patch", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.patch != "" {
				suite.VolumeOnly(t, "the fix's control (the operator built with "+c.patch+")")
			}
			tg, e := tg, e
			if c.patch != "" {
				tg, e = patched(t, c.patch)
			}
			sched, err := tg.Input(c.input)
			if err != nil {
				t.Fatal(err)
			}
			duplicated := func(res *fuzz.Result) bool {
				for _, v := range res.Violations {
					if v.Oracle == "count" && strings.Contains(v.Message, "ScaledJob worker") && strings.Contains(v.Message, "had 4 live Jobs at once") {
						return true
					}
				}
				return false
			}
			as := func(res *fuzz.Result) bool {
				ok := duplicated(res) == c.dup && jobs(res) == map[bool]int{true: 4, false: 2}[c.dup]
				if c.patch != "" {
					ok = ok && pollBeforeJobsSeen(res)
				}
				return ok
			}
			// Up to three runs: a fresh clone's .ci/run (2026-11-27) once
			// saw 4 Jobs created and no count violation in the one run it
			// then gave this row; why was not kept.
			res, runs, err := e.RunUntil(context.Background(), sched, 3, as, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			if c.patch != "" && !pollBeforeJobsSeen(res) {
				t.Errorf("schedule %s, %d run(s): no poll of the patched operator came between its first Job create and its cache showing a Job: the fix was not put to the test\n%s", sched, runs, summary(sched, res))
			}
			if !as(res) {
				t.Errorf("schedule %s: 4 live Jobs %v, %d created in the last of %d runs; want %v\n%s", sched, duplicated(res), jobs(res), runs, c.dup, summary(sched, res))
			} else {
				t.Logf("schedule %s: as expected in run %d", sched, runs)
			}
		})
	}
}

// pollBeforeJobsSeen says whether the operator polled ("Scaling Jobs",
// "Number of running Jobs" in its log) after its first Job create was
// answered and before its Job watch delivered any Job event: the poll that
// finding 1 is about, which counts Jobs from a cache that shows none of
// them.
func pollBeforeJobsSeen(res *fuzz.Result) bool {
	var created, seen time.Time
	for _, r := range res.Trace.Requests {
		if r.Client == "keda" && r.Resource == "jobs" && r.Subresource == "" && r.Verb == "create" && r.Code == 201 {
			if end := r.Start.Add(r.Latency); created.IsZero() || end.Before(created) {
				created = end
			}
		}
	}
	if created.IsZero() {
		return false
	}
	for _, ev := range res.Trace.Events {
		if ev.Client == "keda" && ev.Resource == "jobs" && ev.Fate == trace.Released && (ev.Type == "ADDED" || ev.Type == "MODIFIED") && ev.Released.After(created) {
			if seen.IsZero() || ev.Released.Before(seen) {
				seen = ev.Released
			}
		}
	}
	if seen.IsZero() {
		return false
	}
	for _, l := range res.Logs.Lines {
		if l.Client == "keda" && strings.Contains(l.Text, "Number of running Jobs") && l.At.After(created) && l.At.Before(seen) {
			return true
		}
	}
	return false
}

// TestKEDARolloutDeletesNewJobs is the second finding's regression row. Its
// saved input (testdata/rollout.input) holds the MODIFIED events of the
// operator's ScaledJob watch until t+0.8 s. The operator's own finalizer
// Update (scaledjob_controller.go ensureFinalizer) serializes defaulted spec
// fields (spec.rollout: {}), so the ScaledJob's generation goes from 1 to 2;
// the scale loop's first poll reads the ScaledJob from the informer cache,
// still at generation 1, and stamps the two Jobs it creates
// scaledjob.keda.sh/generation "1" (scale_jobs.go generateJobs). When the
// cache shows generation 2, the reconcile's default rollout strategy
// deletes both running Jobs as "owned by the previous version"
// (scaledjob_controller.go deletePreviousVersionScaleJobs) and the
// restarted scale loop creates new ones (no count violation: the
// end-state oracle sees it when a replacement is made after the t+1 s
// annotation patch, whose annotation it then carries). Its controls: the
// same schedule with spec.rollout.strategy gradual deletes nothing; nor
// does the operator with fix/finalizer-patch.patch, which adds the
// finalizer with a merge patch of the finalizers alone, so that the
// generation stays 1.
//
// Its fix case builds the patched operator: make test-volume runs it, make
// test does not (suite.VolumeOnly).
func TestKEDARolloutDeletesNewJobs(t *testing.T) {
	for _, c := range []struct {
		name, rollout, patch string
		deletes              bool
	}{
		{"default rollout strategy", "", "", true},
		{"rollout strategy gradual", "gradual", "", false},
		{"finalizer added by a merge patch (fix)", "", "fix/finalizer-patch.patch", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.patch != "" {
				suite.VolumeOnly(t, "the fix's control (the operator built with "+c.patch+")")
			}
			tg, err := target.Load("target.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if c.patch != "" {
				tg.Controllers[0].Patches = append(tg.Controllers[0].Patches, target.SourcePatch{File: c.patch})
			}
			if c.rollout != "" {
				a := tg.Workload[1].Apply
				a.Manifest = strings.Replace(a.Manifest, "pollingInterval: 1", "pollingInterval: 1\n  rollout: {strategy: "+c.rollout+"}", 1)
			}
			e := target.StartEnv(t, tg)
			sched, err := tg.Input("testdata/rollout.input")
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			deleted := 0
			for _, r := range res.Trace.Requests {
				if r.Client == "keda" && r.Resource == "jobs" && r.Verb == "delete" && r.Code/100 == 2 {
					deleted++
				}
			}
			if got := deleted > 0; got != c.deletes {
				t.Errorf("schedule %s: the operator deleted %d Jobs, want deletions %v\n%s", sched, deleted, c.deletes, summary(sched, res))
			}
			t.Logf("schedule %s: %d Jobs deleted by the operator, %d created, violations %d", sched, deleted, jobs(res), len(res.Violations))
		})
	}
}

// TestKEDAPausedActiveUnknown is the third finding's regression row. Its
// saved input (testdata/paused-active-unknown.input, from a campaign) breaks
// the operator's ScaledJob watch at its first MODIFIED event (the
// operator's own finalizer update) and the re-watch meets 410: until the
// relist, about a second later, the operator's cache holds the ScaledJob as
// created, without status conditions. The scale loop's first poll creates
// the Jobs and patches the status with a JSON merge patch computed against
// that cached object (scale_handler.go handleResult), so its conditions
// list, [Ready, Active], replaces the four the reconcile had initialized:
// Fallback and Paused are gone. The reconcile after the relist finds the
// conditions not initialized and initializes all four again, Unknown
// (scaledjob_controller.go Reconcile, AreInitialized): Active True is lost.
// The pause (paused=true) then stops the scale loop, so nothing sets it
// again: the ScaledJob ends Active Unknown while its Jobs run, where the
// reference runs end Active True. Its controls: the same schedule unpaused,
// whose next poll sets Active again (False once the queue has drained, as
// in its reference runs); and the operator with
// fix/status-patch-precondition.patch, whose status patch carries the
// resourceVersion it was computed against, so that a patch from the stale
// cache meets 409 instead of dropping conditions, and whose retry reads
// the ScaledJob from the apiserver (the manager's APIReader).
//
// Its fix case builds the patched operator: make test-volume runs it, make
// test does not (suite.VolumeOnly).
func TestKEDAPausedActiveUnknown(t *testing.T) {
	tg, e := target.LoadEnv(t, "target.yaml")
	for _, c := range []struct {
		name   string
		paused int
		patch  string
		lost   bool
	}{
		{"paused", 1, "", true},
		{"not paused", 0, "", false},
		{"paused, status patch with a precondition (fix)", 1, "fix/status-patch-precondition.patch", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.patch != "" {
				suite.VolumeOnly(t, "the fix's control (the operator built with "+c.patch+")")
			}
			tg, e := tg, e
			if c.patch != "" {
				tg, e = patched(t, c.patch)
			}
			sched, err := tg.Input("testdata/paused-active-unknown.input")
			if err != nil {
				t.Fatal(err)
			}
			sched.Knobs["paused"] = c.paused
			lost := func(res *fuzz.Result) bool {
				for _, v := range res.Violations {
					if v.Oracle == "end-state" && strings.HasPrefix(v.Message, "ScaledJob worker: ") && strings.Contains(v.Message, `status.conditions[1].status="Unknown"`) {
						return true
					}
				}
				return false
			}
			if c.patch == "" {
				res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
				if err != nil {
					t.Fatalf("schedule %s: %v", sched, err)
				}
				if lost(res) != c.lost {
					t.Errorf("schedule %s: Active condition lost %v, want %v\n%s", sched, lost(res), c.lost, summary(sched, res))
				}
				return
			}
			// The fix is put to the test only where the scale loop's
			// status patch, computed against a stale cached ScaledJob, met
			// 409 (up to 3 runs, should a run's timing not give one).
			as := func(res *fuzz.Result) bool { return !lost(res) && staleStatusRefused(res) }
			res, runs, err := e.RunUntil(context.Background(), sched, 3, as, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			if !staleStatusRefused(res) {
				t.Errorf("schedule %s, %d run(s): no status patch of the patched operator met 409: the fix was not put to the test\n%s", sched, runs, summary(sched, res))
			}
			if lost(res) {
				t.Errorf("schedule %s: Active condition lost in the last of %d runs with the fix\n%s", sched, runs, summary(sched, res))
			}
		})
	}
}

// staleStatusRefused says whether a status patch of the operator's
// ScaledJob met 409 Conflict: with fix/status-patch-precondition.patch, a
// patch computed against a cached ScaledJob older than the apiserver's.
func staleStatusRefused(res *fuzz.Result) bool {
	for _, r := range res.Trace.Requests {
		if r.Client == "keda" && r.Resource == "scaledjobs" && r.Subresource == "status" && r.Verb == "patch" && r.Code == 409 {
			return true
		}
	}
	return false
}
