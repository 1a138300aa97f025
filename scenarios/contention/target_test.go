package contention_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
	"github.com/stalefuzz/stalefuzz/scenarios/contention"
)

// FuzzContentionTarget searches target.yaml as `stalefuzz fuzz` does.
func FuzzContentionTarget(f *testing.F) { target.Fuzz(f, "target.yaml") }

// TestTargetFile runs target.yaml, the controller as a process judged by the
// generic oracles alone, against the real apiserver. Restarted right after
// its plan write onto an apiserver 0.5 s behind, the blind write (with or
// without the read-your-writes cache, which remembers writes in the
// process's memory only) replans from the stale list and is reported in
// one of two ways: as a lost update of status.plan.id (any field: the path
// is not named), when the new plan is written before the held event of the
// first is released to the process; or, when the event was released just
// before the write (so the writer counts as having been sent it, and the
// audit cannot call the write blind), as stuck: its later blind patches,
// diffed against a stale cache, leave the Rollout unfinished. The
// optimistic write keeps the plan and converges; without faults nothing is
// reported.
func TestTargetFile(t *testing.T) {
	_, env := target.LoadEnv(t, "target.yaml")
	const blind, optimistic, blindRYW = 0, 1, 2 // knob write
	restart := []fuzz.Step{{Client: "rollouts", Action: proxy.Freeze, Length: contention.RealisticBounds.MaxLength, Lag: 500 * time.Millisecond}}
	for _, c := range []struct {
		name  string
		write int
		steps []fuzz.Step
		lost  bool
	}{
		{"blind, no fault", blind, nil, false},
		{"blind, restarted onto an apiserver 0.5s behind", blind, restart, true},
		{"blind with read-your-writes, the same restart", blindRYW, restart, true},
		{"optimistic, the same restart", optimistic, restart, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"write": c.write}, Steps: c.steps}
			var res *fuzz.Result
			var err error
			for range 3 { // the blind loss reproduced in 20/20 runs (README)
				if res, err = env.Run(context.Background(), sched, fuzz.Retries(3)); err != nil {
					t.Fatalf("schedule %s: %v", sched, err)
				}
				if len(res.Violations) > 0 == c.lost {
					break
				}
			}
			lost := false
			for _, v := range res.Violations {
				switch {
				case v.Oracle == "lost-update" && strings.Contains(v.Message, contention.PlanID+"="),
					v.Oracle == "stuck" && strings.Contains(v.Message, "Rollout "+res.Namespace+"/"+contention.Object):
					lost = true
				default:
					t.Errorf("schedule %s: unexpected violation: %s: %s", sched, v.Oracle, v.Message)
				}
			}
			if lost != c.lost {
				t.Errorf("schedule %s: the plan lost (a lost update of %s, or the Rollout stuck): got %v, want %v\n%s", sched, contention.PlanID, lost, c.lost, res.Report())
			}
		})
	}
}

// TestTargetInProcess runs target.yaml's Go form with the controller
// in-process (Controller.Setup: the same Reconciler on a manager
// fuzz.Exec.StartManager makes, instead of cmd/rollouts as a process)
// against the real apiserver: restarted right after its plan write onto an
// apiserver 0.5 s behind, the blind write loses the plan (a lost update of
// status.plan.id, or the Rollout stuck, as in TestTargetFile), and the
// optimistic write keeps it with no violation.
func TestTargetInProcess(t *testing.T) {
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tg.Scheme = runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(tg.Scheme), contention.AddToScheme(tg.Scheme)); err != nil {
		t.Fatal(err)
	}
	writes := []contention.Write{contention.Blind, contention.Optimistic, contention.BlindReadYourWrites} // knob write's values
	tg.Controllers[0] = target.Controller{
		Name:    "rollouts",
		Watches: []string{"rollouts"},
		Setup: func(ctx context.Context, x *fuzz.Exec, mgr manager.Manager) error {
			r := &contention.Reconciler{Client: mgr.GetClient(), Write: writes[x.Knob("write")]}
			return r.SetupWithManager(ctx, mgr)
		},
	}
	env := target.StartEnv(t, tg)
	restart := []fuzz.Step{{Client: "rollouts", Action: proxy.Freeze, Length: contention.RealisticBounds.MaxLength, Lag: 500 * time.Millisecond}}
	for _, c := range []struct {
		write int
		lost  bool
	}{{0, true}, {1, false}} {
		t.Run(writes[c.write].String(), func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"write": c.write}, Steps: restart}
			var res *fuzz.Result
			for range 3 {
				if res, err = env.Run(context.Background(), sched, fuzz.Retries(3)); err != nil {
					t.Fatalf("schedule %s: %v", sched, err)
				}
				if len(res.Violations) > 0 == c.lost {
					break
				}
			}
			if len(res.Restarts) == 0 {
				t.Errorf("schedule %s: the in-process controller was never restarted\n%s", sched, res.Report())
			}
			lost := false
			for _, v := range res.Violations {
				lost = lost || v.Oracle == "lost-update" && strings.Contains(v.Message, contention.PlanID+"=") ||
					v.Oracle == "stuck" && strings.Contains(v.Message, "Rollout "+res.Namespace+"/"+contention.Object)
			}
			if lost != c.lost || (!c.lost && len(res.Violations) > 0) {
				t.Errorf("schedule %s: plan lost %v, want %v; violations %v\n%s", sched, lost, c.lost, res.Violations, res.Report())
			}
			if len(res.Logs.Last("rollouts", 1)) == 0 {
				t.Errorf("schedule %s: the in-process manager's log is not in the execution's", sched)
			}
		})
	}
}

// TestStaleSelfViewOracle: under ordinary latency alone (every watch 0.26 s
// late), the blind status patch of a reconcile that starts from a cache
// older than the previous reconcile's own plan write replaces that plan:
// with oracles.staleSelfView on, a violation naming both writes and the
// field, and the report names the write as a likely cause. The optimistic
// mode's patches from the same stale views meet 409 and store nothing: no
// violation. With the oracle off (target.yaml's default) the write is
// counted (Result.SelfViews) but not judged.
func TestStaleSelfViewOracle(t *testing.T) {
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	on := true
	tg.Oracles.StaleSelfView = &on
	env := target.StartEnv(t, tg)
	schedule := func(write string) fuzz.Schedule {
		_, sched, err := tg.EncodeText("write=" + write + "; latency 260ms on every watch of every client")
		if err != nil {
			t.Fatal(err)
		}
		return sched
	}
	stale := func(res *fuzz.Result) []fuzz.Violation {
		var out []fuzz.Violation
		for _, v := range res.Violations {
			if v.Oracle == "stale-self-view" {
				out = append(out, v)
			}
		}
		return out
	}
	blind := schedule("blind")
	res, runs, err := env.RunUntil(context.Background(), blind, 5, func(r *fuzz.Result) bool { return len(stale(r)) > 0 }, fuzz.Retries(3))
	if err != nil {
		t.Fatal(err)
	}
	vs := stale(res)
	if len(vs) == 0 {
		t.Fatalf("schedule %s: no stale-self-view violation in %d runs:\n%s", blind, runs, res.Report())
	}
	for _, want := range []string{"rollouts's patch status", "older than its own write at resourceVersion", contention.PlanID + "=", "no later write restored it"} {
		if !strings.Contains(vs[0].Message, want) {
			t.Errorf("violation %q lacks %q", vs[0].Message, want)
		}
	}
	if rep := res.Report(); !strings.Contains(rep, "a likely cause:") {
		t.Errorf("the report does not name the write as a likely cause:\n%s", rep)
	}
	t.Logf("schedule %s: found in %d of %d runs: %s", blind, 1, runs, vs[0].Message)

	optimistic := schedule("optimistic")
	for range 2 {
		res, err := env.Run(context.Background(), optimistic, fuzz.Retries(3))
		if err != nil {
			t.Fatal(err)
		}
		if vs := stale(res); len(vs) > 0 {
			t.Errorf("schedule %s: %v", optimistic, vs)
		}
	}

	// Off, as target.yaml has it: counted, not judged.
	_, off := target.LoadEnv(t, "target.yaml")
	res, _, err = off.RunUntil(context.Background(), blind, 5, func(r *fuzz.Result) bool { return r.SelfViews.Lasting > 0 }, fuzz.Retries(3))
	if err != nil {
		t.Fatal(err)
	}
	if res.SelfViews.Lasting == 0 || len(stale(res)) > 0 {
		t.Errorf("oracle off: counted %+v, violations %v; want the write counted, not judged", res.SelfViews, stale(res))
	}
}

// TestComposedFaults runs, against the real apiserver, a Composed schedule
// with two faults at once: the controller's watch relists at its first
// MODIFIED event while the answer to its first write is lost after the
// apiserver applied it. Both fire in the one execution, the trace records
// each (the lost answer with the apiserver's 2xx), and the execution is
// judged, not a harness error.
func TestComposedFaults(t *testing.T) {
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tg.Faults.Space = "composed"
	env := target.StartEnv(t, tg)
	_, sched, err := tg.EncodeText("write=optimistic; t+0.00s–2.10s break the watch (410 on re-watch: relist) at MODIFIED rollouts for rollouts; t+0.00s–2.10s lose the answer to rollouts's 1st patch")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sched.Steps); n != 2 || !sched.Steps[1].IsAnswer() {
		t.Fatalf("decoded %s: want a relist and a lost answer", sched)
	}
	res, err := env.Run(context.Background(), sched, fuzz.Retries(3))
	if err != nil {
		t.Fatalf("schedule %s: %v", sched, err)
	}
	var lost, expired bool
	for _, r := range res.Trace.Requests {
		switch r.FaultKind {
		case trace.FaultLose:
			lost = true
			if r.Code/100 != 2 || !r.Unanswered() {
				t.Errorf("lost answer recorded as %d, unanswered %v: want the apiserver's success, never seen by the client", r.Code, r.Unanswered())
			}
		case trace.FaultExpire:
			expired = true
		}
	}
	if !lost || !expired {
		t.Fatalf("schedule %s: lost answer %v, relist %v: want both in one execution\n%s", sched, lost, expired, res.Report())
	}
	t.Logf("schedule %s: %d violations", sched, len(res.Violations))
}

// TestAnswerFalseAlarms measures, against the real apiserver, the false
// alarms of a lost answer beside ordinary latency: every execution loses
// the answer to one of the controller's writes (the trace shows it), and
// the optimistic write, which retries from a fresh read, raises no
// violation. A target outside the composed space is refused with the fix.
// STALEFUZZ_FALSE_ALARMS=N runs N executions instead of 4.
func TestAnswerFalseAlarms(t *testing.T) {
	n := 4
	if v := os.Getenv("STALEFUZZ_FALSE_ALARMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("STALEFUZZ_FALSE_ALARMS=%q: %v", v, err)
		}
	}
	if _, err := target.MeasureFalseAlarms(context.Background(), "target.yaml", target.FalseAlarmsOptions{Executions: 1, Answer: "lose"}); err == nil || !strings.Contains(err.Error(), "set faults.space: composed") {
		t.Errorf("lose answers on a realistic-latency target: got %v, want it refused with the fix", err)
	}
	_, env := target.LoadEnv(t, "testdata/composed.yaml")
	lost := 0
	f, err := env.MeasureFalseAlarms(context.Background(), fuzz.FalseAlarmsOptions{
		Executions: n, Answer: proxy.Lose,
		Only: func(k map[string]int) bool { return k["write"] == 1 }, // optimistic
		Progress: func(_ int, _ fuzz.FalseAlarms, res *fuzz.Result, _ *fuzz.Alarm) {
			if res == nil {
				return
			}
			for _, r := range res.Trace.Requests {
				if r.FaultKind == trace.FaultLose {
					lost++
					break
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("false alarms of testdata/composed.yaml, write=optimistic, a lost answer in each: %s", f)
	if len(f.ByOracle) > 0 || f.RaceExecutions() > 0 {
		t.Errorf("write=optimistic with lost answers: %s", f)
	}
	if judged := f.Executions; lost != judged || judged < n*3/4 {
		t.Errorf("%d of %d judged executions lost an answer (of %d run): want every one, and three quarters judged", lost, judged, n)
	}
}

// TestAPIServerAsShipped runs target.yaml's controller (controller-runtime
// on client-go 0.36, whose informers use WatchList) without faults against
// an apiserver with WatchList off, as 1.31 and 1.33 ship it (apiserver:
// featureGates), and against the release's default: its informer's initial
// list is a LIST of rollouts only on the former (the stale initial list the
// labels of restarts and relists name), a watch with its initial events on
// the latter.
func TestAPIServerAsShipped(t *testing.T) {
	for _, c := range []struct {
		gates map[string]bool
		lists bool
	}{{map[string]bool{"WatchList": false}, true}, {nil, false}} {
		t.Run(strconv.FormatBool(c.lists), func(t *testing.T) {
			tg, err := target.Load("target.yaml")
			if err != nil {
				t.Fatal(err)
			}
			tg.APIServer.FeatureGates = c.gates
			env := target.StartEnv(t, tg)
			sched := fuzz.Schedule{Knobs: map[string]int{"write": 1}}
			res, err := env.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			lists := 0
			for _, r := range res.Trace.Requests {
				if r.Client == "rollouts" && r.Verb == "list" && r.Resource == "rollouts" && r.Code == 200 {
					lists++
				}
			}
			if (lists > 0) != c.lists {
				t.Errorf("apiserver feature gates %v: the controller listed rollouts %d times; want a LIST only with WatchList off\n%s", c.gates, lists, res.Report())
			}
			if len(res.Violations) > 0 {
				t.Errorf("no fault: violations %v", res.Violations)
			}
		})
	}
}

// TestRequiredWait: a required wait (target.Wait.Required) that timed out
// is judged once the run has settled, against the real apiserver. The
// controller finishes the Rollout's 3 steps (status.plan.done = 3).
//   - A wait for 3 that gives up after 1 ms, before the controller got
//     there, then a wait for 5, which never comes: no violation. The first
//     is met by the time the run is judged, and the second comes after a
//     wait that gave up, so the workload had already gone on without what
//     it waited for: it is not judged.
//   - A wait for 4 within 3 s, then the wait for 5: the oracle "stuck"
//     names the wait for 4 alone, with the value the Rollout had.
//
// Either way the first wait that gave up is the run's Result.Diverged.
func TestRequiredWait(t *testing.T) {
	done := func(want, timeout string) target.Step {
		return target.Step{Wait: &target.Wait{Object: target.Object{APIVersion: "contention.stalefuzz.dev/v1", Kind: "Rollout", Name: contention.Object},
			JSONPath: "{.status.plan.done}", Value: want, Timeout: timeout, Required: true}}
	}
	for _, c := range []struct {
		name  string
		steps []target.Step
		stuck bool
	}{
		{"reached late, then not judged", []target.Step{done("3", "1ms"), done("5", "300ms")}, false},
		{"never reached", []target.Step{done("4", "3s"), done("5", "300ms")}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg, err := target.Load("target.yaml")
			if err != nil {
				t.Fatal(err)
			}
			tg.Workload = append(tg.Workload, c.steps...)
			env := target.StartEnv(t, tg)
			const optimistic = 1
			sched := fuzz.Schedule{Knobs: map[string]int{"write": optimistic}}
			res, err := env.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			gaveUp, skipped := false, false
			for _, l := range res.Logs.Lines {
				gaveUp = gaveUp || l.Client == "workload" && strings.Contains(l.Text, `{.status.plan.done} = "3": timed out after 1ms`)
				skipped = skipped || l.Client == "workload" && strings.Contains(l.Text, `= "5" not judged: the workflow went on after the wait for`)
			}
			if !skipped || !c.stuck && !gaveUp {
				t.Errorf("schedule %s: the 1 ms wait gave up %v, the wait for 5 not judged %v: the run does not show what it is for", sched, gaveUp, skipped)
			}
			// The first wait that gave up made the run diverged: its end
			// state is not judged (fuzz.Exec.Diverged).
			if first := c.steps[0].Wait.Value; !strings.Contains(res.Diverged, `{.status.plan.done} = "`+first+`" gave up after`) {
				t.Errorf("schedule %s: Result.Diverged %q, want the wait for %s named", sched, res.Diverged, first)
			}
			var stuck []string
			for _, v := range res.Violations {
				if v.Oracle == "stuck" {
					stuck = append(stuck, v.Message)
				}
			}
			if got := len(stuck) > 0; got != c.stuck {
				t.Fatalf("schedule %s: stuck %v, want %v; violations %v", sched, got, c.stuck, res.Violations)
			}
			if !c.stuck {
				return
			}
			if m := stuck[0]; !strings.Contains(m, `Rollout `+contention.Object+` {.status.plan.done} = "4": not reached`) || !strings.Contains(m, `still "3"`) || strings.Contains(m, `= "5"`) {
				t.Errorf("stuck violation %q: want the required wait for 4 alone, with the value it had", m)
			}
		})
	}
}
