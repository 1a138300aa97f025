package prometheusoperator_test

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

// FuzzPrometheusOperator searches faults a real cluster produces for the
// operator, as `stalefuzz fuzz target.yaml` does.
func FuzzPrometheusOperator(f *testing.F) { target.Fuzz(f, "target.yaml") }

// writes counts the operator's successful writes of one resource (from
// the trace) by verb.
func writes(res *fuzz.Result, resource string) map[string]int {
	n := map[string]int{}
	for _, r := range res.Trace.Requests {
		if r.DryRun || r.Client != "prometheus-operator" || r.Resource != resource || r.Subresource != "" || r.Code/100 != 2 {
			continue
		}
		switch r.Verb {
		case "create", "update", "patch", "delete":
			n[r.Verb]++
		}
	}
	return n
}

// deleteFoundNothing reports whether the workload's delete of what (kind
// and name, as its log line names them) found nothing to delete.
func deleteFoundNothing(res *fuzz.Result, what string) bool {
	for _, l := range res.Logs.Lines {
		if l.Client == "workload" && strings.HasPrefix(l.Text, "delete "+what+": not found") {
			return true
		}
	}
	return false
}

// summary is what one run did: the operator's StatefulSet writes, then
// res.Report, with its phase times.
func summary(sched fuzz.Schedule, res *fuzz.Result) string {
	return fmt.Sprintf("schedule %s: settled %v, phases %s; statefulset writes: %v\n%s\n%s", sched, res.Settled, res.Phases, writes(res, "statefulsets"), ownerWrites(res), res.Report())
}

// ownerWrites lists every client's writes of StatefulSets, Prometheuses
// and Alertmanagers (not their status), in order: who made, changed and
// deleted them, which the report's timeline may cut.
func ownerWrites(res *fuzz.Result) string {
	var b strings.Builder
	for _, r := range res.Trace.Requests {
		switch r.Resource {
		case "statefulsets", "prometheuses", "alertmanagers":
		default:
			continue
		}
		if r.DryRun || r.Subresource != "" || r.Verb == "get" || r.Verb == "list" || r.Verb == "watch" {
			continue
		}
		fmt.Fprintf(&b, "  t+%.3fs %s %s %s/%s -> %d\n", r.Start.Sub(res.Mark).Seconds(), r.Client, r.Verb, r.Resource, r.Name, r.Code)
	}
	return b.String()
}

// TestPrometheusOperator runs the operator without faults for the scale
// and the edit and each removal (the default scope): it creates the two
// StatefulSets, then the Prometheus's again after a person deletes it, or
// the Alertmanager's again after the Alertmanager is recreated (at least 3
// creates); no violation, and the run settles. On a loaded machine (load
// average 10, 2 of 4 runs) a recreated Alertmanager's StatefulSet was made
// twice: kube-controller-manager's garbage collector deleted the first one
// made after the recreation 90 ms after its create, and the operator made
// it again, with no violation.
func TestPrometheusOperator(t *testing.T) {
	_, e := target.LoadEnv(t, "target.yaml")
	for _, c := range []struct {
		name           string
		action, remove int
		creates        int
	}{
		{"scale, StatefulSet deleted", 1, 0, 3},
		{"scale, Alertmanager recreated", 1, 1, 3},
		{"edit, StatefulSet deleted", 2, 0, 3},
		{"edit, Alertmanager recreated", 2, 1, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"scope": 0, "action": c.action, "remove": c.remove}}
			// A run that never settled is judged by nothing (as in a
			// campaign): run again, up to three runs. Under hack/loaded.sh 2
			// (2026-11-28) the recreated Alertmanager's StatefulSet made
			// twice, as above, left 1 run of 4 still settling after the 2 s
			// budget; a violation or a missing create fails at once.
			//
			// The person's delete at t+0.4 s needs the StatefulSet made by
			// then. Beside hack/loaded.sh 2 (2026-12-04, a whole .ci/run)
			// the operator made it only after the step, whose delete found
			// nothing, and 2 creates were all the run had: that run did not
			// test the re-creation, so it runs again (up to 8 runs).
			missed := 0
			for run := 1; ; run++ {
				res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
				if err != nil {
					t.Fatalf("schedule %s: %v", sched, err)
				}
				w := writes(res, "statefulsets")
				if c.remove == 0 && deleteFoundNothing(res, "StatefulSet prometheus-prom") && len(res.Violations) == 0 && missed < 7 {
					missed++
					t.Logf("schedule %s, run %d: the person's delete came before the operator made the StatefulSet (%d StatefulSet creates): running it again", sched, run, w["create"])
					continue
				}
				if w["create"] < c.creates || len(res.Violations) > 0 || (!res.Settled && run-missed == 3) {
					t.Fatalf("schedule %s, run %d: %d StatefulSet creates, violations %v, settled %v; want at least %d, none and settled\n%s", sched, run, w["create"], res.Violations, res.Settled, c.creates, summary(sched, res))
				}
				if res.Settled {
					break
				}
				t.Logf("schedule %s, run %d never settled (not judged): running it again\n%s", sched, run, summary(sched, res))
			}
		})
	}
}

// TestFalseAlarms: executions whose events are only delayed as much as the
// apiserver delayed them in the no-fault reference runs raise no violation
// of the count, end-state, lost-update, crash or storm oracle. It runs only
// with STALEFUZZ_FALSE_ALARMS=N (make false-alarms-targets: 200).
func TestFalseAlarms(t *testing.T) {
	target.CheckFalseAlarms(t, "target.yaml", 0)
}

// recreated counts the operator's creates of StatefulSet name and says
// whether a relist after 410 Gone happened in the run.
func recreated(res *fuzz.Result, name string) (creates int, relisted bool) {
	for _, r := range res.Trace.Requests {
		if r.Client == "prometheus-operator" && r.Resource == "statefulsets" && r.Name == name && r.Verb == "create" && r.Code == 201 {
			creates++
		}
		relisted = relisted || r.FaultKind == trace.FaultExpire
	}
	return creates, relisted
}

// idleUntilRelist reports whether the operator made no write from the
// workload's delete of the StatefulSet (t+0.4 s) to its relist after 410
// (its next list or watch of statefulsets after the re-watch the 410
// answered, which comes a second or more later): no sync of its was in
// flight that could make the StatefulSet again for another reason.
func idleUntilRelist(res *fuzz.Result) bool {
	deleted := res.Mark.Add(400 * time.Millisecond)
	var expired, relist time.Time
	for _, r := range res.Trace.Requests {
		switch {
		case r.Client != "prometheus-operator" || r.Resource != "statefulsets":
		case expired.IsZero() && r.FaultKind == trace.FaultExpire:
			expired = r.Start
		case !expired.IsZero() && r.Start.After(expired) && (r.Verb == "list" || r.Verb == "watch"):
			relist = r.Start
		}
		if !relist.IsZero() {
			break
		}
	}
	if relist.IsZero() {
		return false
	}
	for _, r := range res.Trace.Requests {
		if r.Client == "prometheus-operator" && r.IsWrite() && !r.Start.Before(deleted) && r.Start.Before(relist) {
			return false
		}
	}
	return true
}

// TestPrometheusOperatorLostStatefulSetDelete is the finding's regression
// row: a person deletes the Prometheus's StatefulSet while the operator's
// StatefulSet watch is down, and its re-watch meets 410 Gone. The relist
// hands the delete to its handler as a cache.DeletedFinalStateUnknown
// tombstone, which ResourceReconciler.OnDelete (resource_reconciler.go:488-506)
// does not unwrap: the Prometheus is not enqueued and the StatefulSet is not
// made again (the no-fault runs make it again at once), nor by the 5-minute
// resync, whose updates change nothing. Its control: the same break with a
// re-watch from the last resourceVersion delivers the DELETED event, and
// the operator makes the StatefulSet again.
func TestPrometheusOperatorLostStatefulSetDelete(t *testing.T) {
	tg, e := target.LoadEnv(t, "target.yaml")
	for _, c := range []struct {
		name, input string
		expire      bool
	}{
		// The finding: no change to the Prometheus, its StatefulSet deleted
		// at t+0.4 s, the operator's StatefulSet watch broken at that
		// DELETED event and its re-watch met by 410 Gone: a relist.
		{"relist after 410 Gone", "testdata/lost-delete.input", true},
		// The same break, re-watched from the last resourceVersion.
		{"re-watch", "testdata/rewatch.input", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sched, err := tg.Input(c.input)
			if err != nil {
				t.Fatal(err)
			}
			// The relist loses the StatefulSet in 15 of 20 runs. In the
			// others the operator was still syncing when the delete came (a
			// sync that raced the delete failed, and its retry made the
			// StatefulSet again; on a loaded machine its first rounds run
			// past t+0.4 s, and its own later syncs make it again): such a
			// run shows neither the bug nor a fix. Up to 10 runs, the first
			// that loses it passes; if none does, the last run fails when the
			// operator was idle from the delete to the relist and made the
			// StatefulSet again (the bug is gone), and if the operator was
			// never idle there (0 of 10 beside hack/loaded.sh 2 once), the
			// row cannot judge and is skipped, saying so. (Beside
			// hack/loaded.sh 2 and a campaign, one run was taken for idle and
			// failed: idle was then measured to the 410, not to the relist a
			// second later, and the operator's syncs of the Prometheus went on
			// in between.) The control makes it again: on a machine
			// loaded beyond hack/loaded.sh 2 one run was judged settled
			// before the operator did, so up to 3 runs, the first that makes
			// it again passes.
			tries := 3
			if c.expire {
				tries = 10
			}
			done := func(res *fuzz.Result) bool {
				creates, relisted := recreated(res, "prometheus-prom")
				if !c.expire {
					return creates > 1 || relisted
				}
				return relisted && creates == 1
			}
			res, runs, err := e.RunUntil(context.Background(), sched, tries, done, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			creates, relisted := recreated(res, "prometheus-prom")
			if c.expire && (!relisted || (creates > 1 && !idleUntilRelist(res))) {
				t.Skipf("schedule %s: in each of %d runs the operator was still writing between the delete (t+0.4 s) and its relist, or the relist never came, so a sync in flight could make the StatefulSet again: the machine is too loaded for this row to judge\n%s", sched, runs, summary(sched, res))
			}
			if relisted != c.expire {
				t.Fatalf("schedule %s: relisted after 410 %v, want %v\n%s", sched, relisted, c.expire, summary(sched, res))
			}
			if lost := creates == 1; lost != c.expire {
				t.Errorf("schedule %s: lost %v in %d runs, want %v: StatefulSet prometheus-prom created %d times (once, then deleted at t+0.4 s) in the last\n%s", sched, lost, runs, c.expire, creates, summary(sched, res))
			}
		})
	}
}

// TestPrometheusOperatorLostStatefulSetDeleteFixed verifies the suggested
// fix (fix/tombstone.patch: OnDelete unwraps a
// cache.DeletedFinalStateUnknown before its type switch) against the real
// apiserver: the operator built from v0.93.0 with the patch, the finding's
// input, judged only in a run where the operator was idle from the delete
// to its relist after 410 (the runs in which the release always loses the
// StatefulSet), makes the StatefulSet again. Up to 10 runs; on a machine
// so loaded that none is idle there, skipped, saying so.
//
// It builds the patched controller: make test-volume runs it, make test
// does not (suite.VolumeOnly).
func TestPrometheusOperatorLostStatefulSetDeleteFixed(t *testing.T) {
	suite.VolumeOnly(t, "the fix's control (the controller built with its patch of fix/)")
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tg.Controllers[0].Patches = append(tg.Controllers[0].Patches, target.SourcePatch{File: "fix/tombstone.patch"})
	e := target.StartEnv(t, tg)
	sched, err := tg.Input("testdata/lost-delete.input")
	if err != nil {
		t.Fatal(err)
	}
	judged := func(res *fuzz.Result) bool {
		_, relisted := recreated(res, "prometheus-prom")
		return relisted && idleUntilRelist(res)
	}
	res, runs, err := e.RunUntil(context.Background(), sched, 10, judged, fuzz.Retries(3))
	if err != nil {
		t.Fatalf("schedule %s: %v", sched, err)
	}
	if !judged(res) {
		t.Skipf("schedule %s: in none of %d runs was the operator idle from the delete to a relist after 410: the machine is too loaded for this row to judge\n%s", sched, runs, summary(sched, res))
	}
	if creates, _ := recreated(res, "prometheus-prom"); creates < 2 {
		t.Errorf("schedule %s: with the fix, StatefulSet prometheus-prom created %d times, want it made again after the relist\n%s", sched, creates, summary(sched, res))
	}
	for _, v := range res.Violations {
		t.Errorf("schedule %s: with the fix: [%s] %s", sched, v.Oracle, v.Message)
	}
}
