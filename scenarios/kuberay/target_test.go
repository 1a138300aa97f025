package kuberay_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
	"github.com/stalefuzz/stalefuzz/scenarios/internal/suite"
)

// FuzzKubeRay searches faults a real cluster produces for the operator, as
// `stalefuzz fuzz target.yaml` does.
func FuzzKubeRay(f *testing.F) { target.Fuzz(f, "target.yaml") }

// env starts an Env for target.yaml, building the operator first if it is
// not cached (about 3 minutes, once).
func env(t *testing.T) *fuzz.Env {
	t.Helper()
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return envOf(t, tg)
}

// envOf starts an Env for tg, stopped when the test ends.
func envOf(t *testing.T, tg *target.Target) *fuzz.Env { return target.StartEnv(t, tg) }

// TestKubeRay runs the operator without faults for each value of the knob
// action (at=500ms): a head and two workers, then nothing more (3 Pods
// created), a scale to 3 (4) or a scale to 1 (3, one deleted), and no
// violation.
func TestKubeRay(t *testing.T) {
	e := env(t)
	for i, c := range []struct {
		name             string
		created, deleted int
	}{{"nothing", 3, 0}, {"scale to 3", 4, 0}, {"scale to 1", 3, 1}} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"action": i, "at": 0}}
			res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			created, deleted := pods(res)
			if created != c.created || deleted != c.deleted || len(res.Violations) > 0 {
				t.Errorf("schedule %s: %d Pods created and %d deleted, violations %v; want %d and %d and none\n%s", sched, created, deleted, res.Violations, c.created, c.deleted, summary(sched, res))
			}
		})
	}
}

// pods counts the Pods the operator created and deleted (from the trace:
// the namespace is swept after the run).
func pods(res *fuzz.Result) (created, deleted int) {
	for _, r := range res.Trace.Requests {
		if r.DryRun || r.Resource != "pods" || r.Subresource != "" {
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

// summary is what one run did: the Pods created and deleted, then
// res.Report (schedule, violations, timeline, the controllers' last lines,
// the audit of writes per client, verb and resource), with its phase times.
func summary(sched fuzz.Schedule, res *fuzz.Result) string {
	created, deleted := pods(res)
	return fmt.Sprintf("schedule %s: settled %v, phases %s; pods created: %d, deleted: %d\n%s", sched, res.Settled, res.Phases, created, deleted, res.Report())
}

// TestKubeRayTwoHeads is finding 1's regression row (README.md): restarted
// right after its head Pod create (its second write, after the head
// Service) onto an apiserver that has not seen it, the operator creates a
// second head Pod; from then on every reconcile of the RayCluster stops at
// "2 head pods found … Please delete extra head pods" (raycluster_controller.go:754-764),
// before the worker groups, until a person deletes one. The input is the
// one a 10-minute campaign found after 13 executions. Its controls, two
// fixes: with ENABLE_DETERMINISTIC_HEAD_POD_NAME=true (off by default) the
// same schedule makes no second head; nor with fix/recheck-live-pods.patch,
// which lists the head Pods from the apiserver (a consistent read) before
// creating one: judged in a run where the restarted operator's cache lacked
// the head Pod and that List found it (up to 3 runs).
//
// Its fix case builds the patched operator: make test-volume runs it, make
// test does not (suite.VolumeOnly).
func TestKubeRayTwoHeads(t *testing.T) {
	for _, c := range []struct {
		name, deterministic string
		patch               string
		twoHeads            bool
	}{
		// The default: generated head Pod names.
		{"default", "", "", true},
		// ENABLE_DETERMINISTIC_HEAD_POD_NAME=true (kuberay#3013, #3028):
		// the second head's create meets 409 AlreadyExists.
		{"deterministic head Pod name", "true", "", false},
		{"live re-check before creating (fix)", "", "fix/recheck-live-pods.patch", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.patch != "" {
				suite.VolumeOnly(t, "the fix's control (the operator built with "+c.patch+")")
			}
			tg, err := target.Load("target.yaml")
			if err != nil {
				t.Fatal(err)
			}
			tg.Controllers[0].Env = map[string]string{"ENABLE_DETERMINISTIC_HEAD_POD_NAME": c.deterministic}
			if c.patch != "" {
				tg.Controllers[0].Patches = append(tg.Controllers[0].Patches, target.SourcePatch{File: c.patch})
			}
			e := envOf(t, tg)
			sched, err := tg.Input("testdata/two-heads.input")
			if err != nil {
				t.Fatal(err)
			}
			// The patched operator is judged in a run that took its path: the
			// restarted instance's cache had no head Pod, the apiserver had one.
			rechecked := func(res *fuzz.Result) bool {
				return logged(res, "Found 0 head Pods in the cache but some in the API server")
			}
			res, runs, err := e.RunUntil(context.Background(), sched, 3, func(res *fuzz.Result) bool { return c.patch == "" || rechecked(res) }, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			if c.patch != "" {
				if !rechecked(res) {
					t.Errorf("schedule %s, %d run(s): the patched operator never found the head Pod its cache lacked\n%s", sched, runs, summary(sched, res))
				}
				for _, v := range res.Violations {
					t.Errorf("schedule %s: with the fix: [%s] %s", sched, v.Oracle, v.Message)
				}
			}
			heads, stays := false, false
			for _, v := range res.Violations {
				heads = heads || v.Oracle == "count" && strings.Count(v.Message, "raycluster-head") == 2
				stays = stays || v.Oracle == "end-state" && strings.Contains(v.Message, "raycluster-head-*#1: present; no no-fault reference run has it")
			}
			stuck := false
			for _, l := range res.Logs.Lines {
				stuck = stuck || strings.Contains(l.Text, "head pods found") && strings.Contains(l.Text, "Please delete extra head pods")
			}
			if heads != c.twoHeads || stuck != c.twoHeads || stays != c.twoHeads {
				t.Errorf("schedule %s: two live head Pods %v, the second still there at the end %v, the operator refusing to go on %v; want %v\n%s", sched, heads, stays, stuck, c.twoHeads, summary(sched, res))
			}
		})
	}
}

// logged says whether a line of the controllers' logs in res contains text.
func logged(res *fuzz.Result, text string) bool {
	for _, l := range res.Logs.Lines {
		if strings.Contains(l.Text, text) {
			return true
		}
	}
	return false
}

// lostHeadCreate is finding 3's schedule (README.md): no action, the
// answer to the operator's first Pod create (its head Pod) lost after the
// apiserver applied it, and every watch of the operator 31 ms late.
const lostHeadCreate = "action=0; at=0; lose the answer to kuberay's 1st create pods; latency 31ms on every watch of kuberay"

// TestKubeRayLostHeadCreate is finding 3's regression row: the apiserver
// creates the head Pod (generateName) and the operator is answered 504
// Timeout, as the apiserver's request timeout answers while etcd commits
// slowly. createHeadPod records its scale expectation only after a create
// that succeeded (raycluster_controller.go:1344-1349 at v1.6.2), so the
// reconcile requeued by the error lists no head Pod from its cache (the
// first one's ADDED event not there yet) and creates a second one: two live
// head Pods, and every later reconcile stops at "2 head pods found …
// Please delete extra head pods" (:754-763), the scale never carried out.
// 18/20 replays. Its controls, two fixes: the one upstream already has
// behind a flag, ENABLE_DETERMINISTIC_HEAD_POD_NAME=true, with which the
// second create meets 409 AlreadyExists and no second head is made (0/20);
// and fix/expect-unacknowledged-head.patch, which names the head Pod
// client-side (still random) and records the expectation when the create's
// answer may have been lost, so that the requeued reconcile waits for the
// cache ("NotSatisfiedHeadExpectations") instead of creating: judged in a
// run where that wait happened (up to 8 runs).
//
// Its fix case builds the patched operator: make test-volume runs it, make
// test does not (suite.VolumeOnly).
func TestKubeRayLostHeadCreate(t *testing.T) {
	const windowTries = 8
	for _, c := range []struct {
		name, deterministic string
		patch               string
		twoHeads, refused   bool
		tries               int
	}{
		{"default", "", "", true, false, windowTries},
		{"deterministic head Pod name", "true", "", false, true, windowTries},
		{"expectation for an unacknowledged create (fix)", "", "fix/expect-unacknowledged-head.patch", false, false, windowTries},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.patch != "" {
				suite.VolumeOnly(t, "the fix's control (the operator built with "+c.patch+")")
			}
			tg, err := target.Load("target.yaml")
			if err != nil {
				t.Fatal(err)
			}
			// Lost answers are in the composed space, not the target's.
			tg.Faults.Space = "composed"
			tg.Controllers[0].Env = map[string]string{"ENABLE_DETERMINISTIC_HEAD_POD_NAME": c.deterministic}
			if c.patch != "" {
				tg.Controllers[0].Patches = append(tg.Controllers[0].Patches, target.SourcePatch{File: c.patch})
			}
			// The Env first: it prepares the (patched) operator, which
			// Scenario needs built (on a fresh machine it is not yet).
			e := envOf(t, tg)
			sc, err := tg.Scenario()
			if err != nil {
				t.Fatal(err)
			}
			sched, err := sc.ParseSchedule(lostHeadCreate)
			if err != nil {
				t.Fatal(err)
			}
			twoHeads := func(res *fuzz.Result) bool {
				for _, v := range res.Violations {
					if v.Oracle == "count" && strings.Count(v.Message, "raycluster-head") == 2 {
						return true
					}
				}
				return false
			}
			waited := func(res *fuzz.Result) bool {
				for _, l := range res.Logs.Lines {
					if strings.Contains(l.Text, "NotSatisfiedHeadExpectations") {
						return true
					}
				}
				return false
			}
			// The window (the requeued reconcile before the Pod's event)
			// opens in about 9 runs of 10 on a quiet machine, fewer on a
			// loaded one (3 runs of 3 missed it beside hack/loaded.sh 2):
			// each case runs until a run shows what it judges, up to
			// windowTries runs.
			secondRefused := func(res *fuzz.Result) bool {
				for _, r := range res.Trace.Requests {
					if r.Client == "kuberay" && r.Verb == "create" && r.Resource == "pods" && r.Subresource == "" && r.Code == 409 {
						return true
					}
				}
				return false
			}
			until := twoHeads
			switch {
			case c.patch != "":
				until = waited
			case c.refused:
				until = secondRefused
			}
			res, runs, err := e.RunUntil(context.Background(), sched, c.tries, until, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			t.Logf("schedule %s: judged at run %d of up to %d", sched, runs, c.tries)
			if c.patch != "" && !waited(res) {
				t.Errorf("schedule %s, %d run(s): the patched operator never waited for its unacknowledged head Pod (no NotSatisfiedHeadExpectations in its log)\n%s", sched, runs, summary(sched, res))
			}
			lost, refused := false, false
			for _, r := range res.Trace.Requests {
				if r.Client != "kuberay" || r.Verb != "create" || r.Resource != "pods" || r.Subresource != "" {
					continue
				}
				lost = lost || r.FaultKind == trace.FaultLose && r.Code == 201
				refused = refused || r.Code == 409
			}
			stuck := false
			for _, l := range res.Logs.Lines {
				stuck = stuck || strings.Contains(l.Text, "head pods found") && strings.Contains(l.Text, "Please delete extra head pods")
			}
			if !lost || twoHeads(res) != c.twoHeads || stuck != c.twoHeads || refused != c.refused {
				t.Errorf("schedule %s, %d run(s): head create applied and its answer lost %v, two live head Pods %v, the operator refusing to go on %v, a second create refused with 409 %v; want true, %v, %v, %v\n%s",
					sched, runs, lost, twoHeads(res), stuck, refused, c.twoHeads, c.twoHeads, c.refused, summary(sched, res))
			}
			if c.patch != "" {
				for _, v := range res.Violations {
					t.Errorf("schedule %s: with the fix: [%s] %s", sched, v.Oracle, v.Message)
				}
			}
		})
	}
}

// TestKubeRayDuplicate is the finding's regression row: restarted right
// after its second Pod create (the first worker) onto an apiserver that has
// not seen that create, the operator's in-memory scale expectations are
// gone and its list lacks the worker, so it creates the two workers again:
// 4 live Pods for one RayCluster, where the no-fault runs never have more
// than 3 (the count oracle, its limit learned); it then deletes one at
// random. The same restart onto an up-to-date apiserver duplicates nothing,
// nor does it onto the lagging one with fix/recheck-live-pods.patch, which
// lists the group's Pods from the apiserver (a consistent read) before
// creating workers: judged in a run where that List found the worker the
// restarted operator's cache lacked (up to 3 runs). See README.md.
//
// Its fix case builds the patched operator: make test-volume runs it, make
// test does not (suite.VolumeOnly).
func TestKubeRayDuplicate(t *testing.T) {
	release := env(t)
	restart := func(lag time.Duration) fuzz.Step {
		return fuzz.Step{Client: "kuberay", Resource: "pods", Verbs: []string{"create"}, After: 1, Action: proxy.Freeze, Length: time.Second, Lag: lag}
	}
	for _, c := range []struct {
		name  string
		step  fuzz.Step
		patch string
		dup   bool
	}{
		{"lagging apiserver", restart(400 * time.Millisecond), "", true},
		{"up-to-date apiserver", restart(0), "", false},
		{"lagging apiserver, live re-check before creating (fix)", restart(400 * time.Millisecond), "fix/recheck-live-pods.patch", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.patch != "" {
				suite.VolumeOnly(t, "the fix's control (the operator built with "+c.patch+")")
			}
			e := release
			if c.patch != "" {
				tg, err := target.Load("target.yaml")
				if err != nil {
					t.Fatal(err)
				}
				tg.Controllers[0].Patches = append(tg.Controllers[0].Patches, target.SourcePatch{File: c.patch})
				e = envOf(t, tg)
			}
			sched := fuzz.Schedule{Knobs: map[string]int{"action": 0, "at": 0}, Steps: []fuzz.Step{c.step}}
			// The patched operator is judged in a run that took its path.
			rechecked := func(res *fuzz.Result) bool { return logged(res, "the API server has worker Pods the cache lacks") }
			res, runs, err := e.RunUntil(context.Background(), sched, 3, func(res *fuzz.Result) bool { return c.patch == "" || rechecked(res) }, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			if c.patch != "" {
				if !rechecked(res) {
					t.Errorf("schedule %s, %d run(s): the patched operator never found the worker Pod its cache lacked\n%s", sched, runs, summary(sched, res))
				}
				for _, v := range res.Violations {
					t.Errorf("schedule %s: with the fix: [%s] %s", sched, v.Oracle, v.Message)
				}
			}
			var dup []string
			for _, v := range res.Violations {
				if v.Oracle == "count" && strings.Contains(v.Message, "had 4 live Pods at once") && strings.Contains(v.Message, "never had more than 3 per RayCluster") {
					dup = append(dup, v.Message)
				}
			}
			if got := len(dup) > 0; got != c.dup {
				t.Errorf("schedule %s: duplicate workers %v, want %v\n%s", sched, got, c.dup, summary(sched, res))
			}
		})
	}
}

// TestFalseAlarms: executions whose events are only delayed as much as the
// apiserver delayed them in the no-fault reference runs raise no violation
// of the count, end-state, lost-update, crash or storm oracle. It runs only with
// STALEFUZZ_FALSE_ALARMS=N (make false-alarms-targets: 200): each knob
// setting's two reference runs and N executions take minutes.
func TestFalseAlarms(t *testing.T) {
	target.CheckFalseAlarms(t, "target.yaml", 0)
}

// truthPattern is one row of the truth table: a fault a real cluster
// produces, anchored to a write or an event where the engine allows.
type truthPattern struct {
	name string
	step *fuzz.Step // nil: no fault
}

// onDefaults says whether a cluster on Kubernetes 1.37's defaults
// (WatchList, consistent lists) can produce the step: everything but a list
// served from an apiserver that lags (a relist or restart with a Lag), as
// the README's table of faults has it.
func onDefaults(st *fuzz.Step) string {
	switch {
	case st == nil:
		return "—"
	case st.Action == proxy.Drop:
		return "no: no apiserver drops an event"
	case st.Lag > 0:
		return "no: WatchList's initial list is a consistent read; needs WatchList off, or an informer that lists with resourceVersion=0"
	}
	return "yes"
}

// truthPatterns are the table's rows. The restarts right after the head
// Pod's create and the first worker's are the committed inputs'
// (testdata/two-heads.input, testdata/duplicate.input: 0.3 s behind), and
// the same with Lag 0 or before the answer.
func truthPatterns(t *testing.T) []truthPattern {
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := target.Prepare(context.Background(), tg, os.Stderr); err != nil {
		t.Fatal(err)
	}
	decoded := func(path string) fuzz.Step {
		sched, err := tg.Input(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(sched.Steps) != 1 || !sched.Steps[0].IsRestart() {
			t.Fatalf("%s: %s, want one restart", path, sched)
		}
		return sched.Steps[0]
	}
	head, worker := decoded("testdata/two-heads.input"), decoded("testdata/duplicate.input")
	with := func(st fuzz.Step, f func(*fuzz.Step)) *fuzz.Step { f(&st); return &st }
	current := func(st *fuzz.Step) { st.Lag = 0 }
	const window = 2100 * time.Millisecond // the target's MaxLagEnd
	late := func(resource string, d time.Duration) *fuzz.Step {
		return &fuzz.Step{Client: "kuberay", Resource: resource, Action: proxy.Delay, Delay: d, Length: window}
	}
	watch := func(a proxy.Action, lag time.Duration) *fuzz.Step {
		return &fuzz.Step{Client: "kuberay", Resource: "pods", Action: a, After: 1, Lag: lag, Length: window}
	}
	return []truthPattern{
		{"no fault", nil},
		{"Pod events 0.3 s late", late("pods", 300*time.Millisecond)},
		{"Pod events 1 s late", late("pods", time.Second)},
		{"RayCluster events 1 s late", late("rayclusters", time.Second)},
		{"Pod watch broken at its 2nd event (re-watch from its last resourceVersion)", watch(proxy.Break, 0)},
		{"Pod watch broken at its 2nd event, re-watch meets 410 Gone: relist", watch(proxy.Expire, 0)},
		{"Pod watch broken at its 2nd event, relist after 410 Gone from an apiserver 0.3 s behind", watch(proxy.Expire, 300*time.Millisecond)},
		{"restart right after the head Pod's create", with(head, current)},
		{"restart right after the head Pod's create, onto an apiserver 0.3 s behind", &head},
		{"restart before the answer to the head Pod's create", with(head, func(st *fuzz.Step) { st.Action, st.Lag = proxy.Cut, 0 })},
		{"restart right after the 1st worker's create", with(worker, current)},
		{"restart right after the 1st worker's create, onto an apiserver 0.3 s behind", &worker},
	}
}

// truthOracles are the oracles a cell names, in this order; any other
// follows them.
var truthOracles = []string{"count", "end-state", "lost-update", "crash", "storm"}

// truthCell runs p under action (at its first time) until runs executions
// were judged (at most twice as many attempts), and says which oracles fired
// in how many of them; harness errors are counted apart, never as findings,
// and a fault that did not fire in every judged run says so.
func truthCell(t *testing.T, e *fuzz.Env, p truthPattern, action, runs int) string {
	sched := fuzz.Schedule{Knobs: map[string]int{"action": action, "at": 0}}
	if p.step != nil {
		sched.Steps = []fuzz.Step{*p.step}
	}
	fired := map[string]int{}
	judged, harness, faulted := 0, 0, 0
	reported := false
	for attempt := 0; judged < runs && attempt < 2*runs; attempt++ {
		res, err := e.Run(context.Background(), sched)
		if err != nil {
			harness++
			t.Logf("schedule %s: %v", sched, err)
			continue
		}
		judged++
		if faultFired(res, p.step) {
			faulted++
		}
		seen := map[string]bool{}
		for _, v := range res.Violations {
			if !seen[v.Oracle] {
				seen[v.Oracle] = true
				fired[v.Oracle]++
			}
		}
		if len(res.Violations) > 0 && !reported {
			reported = true // one report a cell: the others are alike
			t.Logf("%s\n%s", sched, res.Report())
		}
	}
	var parts []string
	order := slices.Clone(truthOracles)
	for _, o := range slices.Sorted(maps.Keys(fired)) {
		if !slices.Contains(order, o) {
			order = append(order, o)
		}
	}
	for _, o := range order {
		if n := fired[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", o, n, judged))
		}
	}
	cell := strings.Join(parts, ", ")
	if cell == "" {
		cell = fmt.Sprintf("— 0/%d", judged)
	}
	if p.step != nil && faulted < judged {
		cell += fmt.Sprintf(" (fault fired in %d/%d)", faulted, judged)
	}
	if harness > 0 {
		cell += fmt.Sprintf("; harness errors %d", harness)
	}
	return cell
}

// faultFired says whether the run's fault happened: a restart restarted the
// operator, a relist met 410 Gone. A break or a delay is taken as fired.
func faultFired(res *fuzz.Result, st *fuzz.Step) bool {
	switch {
	case st == nil:
		return true
	case st.IsRestart():
		return len(res.Restarts) > 0
	case st.Action == proxy.Expire:
		for _, r := range res.Trace.Requests {
			if r.FaultKind == trace.FaultExpire {
				return true
			}
		}
		return false
	}
	return true
}

// TestTruthTable writes KubeRay's truth table (issue 17): each realistic
// fault pattern under each action, with ENABLE_DETERMINISTIC_HEAD_POD_NAME
// off (the default) and on, STALEFUZZ_TRUTH_TABLE_RUNS times (3) each, to
// the file STALEFUZZ_TRUTH_TABLE names (make truth-table-kuberay). Skipped
// without it: one control plane per setting and about 250 executions.
func TestTruthTable(t *testing.T) {
	out := os.Getenv("STALEFUZZ_TRUTH_TABLE")
	if out == "" {
		t.Skip("STALEFUZZ_TRUTH_TABLE=FILE writes the truth table (make truth-table-kuberay)")
	}
	runs := 3
	if v := os.Getenv("STALEFUZZ_TRUTH_TABLE_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("STALEFUZZ_TRUTH_TABLE_RUNS=%q: want a positive number", v)
		}
		runs = n
	}
	began := time.Now()
	ps := truthPatterns(t)
	actions := []string{"nothing", "scale to 3", "scale to 1"}
	settings := []string{"off", "on"}
	cells := map[[3]int]string{} // pattern, action, setting
	for d, setting := range settings {
		t.Run("ENABLE_DETERMINISTIC_HEAD_POD_NAME "+setting, func(t *testing.T) {
			tg, err := target.Load("target.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if setting == "on" {
				tg.Controllers[0].Env = map[string]string{"ENABLE_DETERMINISTIC_HEAD_POD_NAME": "true"}
			}
			e := envOf(t, tg)
			for i, p := range ps {
				for a := range actions {
					cells[[3]int{i, a, d}] = truthCell(t, e, p, a, runs)
					t.Logf("%s | %s | %s: %s", p.name, actions[a], setting, cells[[3]int{i, a, d}])
				}
			}
		})
	}
	if t.Failed() {
		t.FailNow()
	}
	md := truthMarkdown(ps, actions, settings, cells, runs, time.Since(began))
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// truthMarkdown is the table as scenarios/kuberay/truth-table.md holds it.
func truthMarkdown(ps []truthPattern, actions, settings []string, cells map[[3]int]string, runs int, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# KubeRay ray-operator v1.6.2: truth table\n\n")
	fmt.Fprintf(&b, "Written by `make truth-table-kuberay` (`TestTruthTable`, %d runs a cell, %.0f min in all on a loaded 2-core machine). "+
		"Each cell: the oracles that fired and in how many of the judged runs; `—` none. "+
		"Harness errors (an execution that could not be judged) are counted apart and are never findings. "+
		"The workload is target.yaml's: a RayCluster with a head and two workers, then the action at t+0.5 s (the knob `at` at its first value). "+
		"Columns: the action, then ENABLE_DETERMINISTIC_HEAD_POD_NAME off (the default) or on.\n\n", runs, took.Minutes())
	b.WriteString("| pattern | on 1.37's defaults |")
	for _, a := range actions {
		for _, s := range settings {
			fmt.Fprintf(&b, " %s, %s |", a, s)
		}
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(actions)*len(settings)) + "\n")
	for i, p := range ps {
		yes, _, _ := strings.Cut(onDefaults(p.step), ":")
		fmt.Fprintf(&b, "| %s | %s |", p.name, yes)
		for a := range actions {
			for d := range settings {
				fmt.Fprintf(&b, " %s |", cells[[3]int{i, a, d}])
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## The patterns\n\n| pattern | schedule step, as the engine prints it | what in a real cluster causes it | on 1.37's defaults (WatchList, consistent lists) |\n|---|---|---|---|\n")
	for _, p := range ps {
		step, cause := "no fault", "—"
		if p.step != nil {
			step, cause = p.step.String(), p.step.Cause()
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", p.name, step, cause, onDefaults(p.step))
	}
	return b.String()
}
