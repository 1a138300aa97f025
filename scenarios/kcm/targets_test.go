package kcm_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/scenarios/kcm"
)

// TestJobTargetFile runs the Job controller from its target file
// (targets/job-gate-off.yaml: builtins, a kubelet stand-in, the generic
// count oracle, no Go code) against the real apiserver: without faults the
// Job's two Pods run and succeed and nothing is violated; under the input a
// campaign found in 72 s from an empty corpus (a restart right after its
// first Pod create, onto an apiserver 0.3 s behind) the count oracle finds
// the known restart duplicate: 3 live Pods for a Job of parallelism 2.
func TestJobTargetFile(t *testing.T) {
	tg, err := target.Load("targets/job-gate-off.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := tg.Scenario()
	if err != nil {
		t.Fatal(err)
	}
	b, err := fuzz.ReadCorpusEntry("targets/testdata/restart-duplicate.input")
	if err != nil {
		t.Fatal(err)
	}
	env := target.StartEnv(t, tg)
	for _, c := range []struct {
		name  string
		sched fuzz.Schedule
		dup   bool
	}{
		{"no fault", fuzz.Schedule{Knobs: map[string]int{"finish": 0}}, false},
		{"restart onto a lagging apiserver", s.Decode(b), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := env.Run(context.Background(), c.sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", c.sched, err)
			}
			succeeded := 0
			for _, r := range res.Trace.Requests {
				// The Job controller removes a finished Pod's tracking
				// finalizer: the stand-in's Succeeded reached it.
				if r.Client == target.ControllerManagerClient && r.Verb == "patch" && r.Resource == "pods" && r.Code == 200 {
					succeeded++
				}
			}
			if succeeded < 2 {
				t.Errorf("schedule %s: the Job controller finished %d Pods, want 2 or more\n%s", c.sched, succeeded, res.Report())
			}
			var dup []string
			for _, v := range res.Violations {
				if v.Oracle == "count" && strings.Contains(v.Message, "had 3 live Pods at once") && strings.Contains(v.Message, "never had more than 2 per Job") {
					dup = append(dup, v.Message)
				}
			}
			if got := len(dup) > 0; got != c.dup || (!c.dup && len(res.Violations) > 0) {
				t.Errorf("schedule %s: duplicate %v, want %v; violations %v", c.sched, got, c.dup, res.Violations)
			}
		})
	}
}

// TestFalseAlarms: executions of targets/job-gate-off.yaml whose
// events are only delayed as much as the apiserver delayed them in the
// no-fault reference runs raise no violation of the count, crash or storm
// oracle (0 in 200, README.md). It runs only with STALEFUZZ_FALSE_ALARMS=N
// (make false-alarms-targets: 200).
func TestFalseAlarms(t *testing.T) {
	target.CheckFalseAlarms(t, "targets/job-gate-off.yaml", 0)
}

// TestFalseAlarmsNodeLifecycle: executions of the node lifecycle scenario,
// with LeaseGate off and on, whose events are only delayed as much as the
// apiserver delayed them in the no-fault reference runs raise no violation
// of live-node-unknown or dead-node-missed (README.md); the gate-on known
// finding (die=2, no fault needed) is counted apart. It runs only with
// STALEFUZZ_FALSE_ALARMS=N, N executions for each gate value (make
// false-alarms-targets: 200).
func TestFalseAlarmsNodeLifecycle(t *testing.T) {
	for _, gate := range []bool{false, true} {
		t.Run(fmt.Sprintf("gate=%v", gate), func(t *testing.T) {
			measureFalseAlarms(t, kcm.NodeLifecycle(gate), fmt.Sprintf("the node lifecycle scenario, %s=%v", kcm.LeaseGate, gate))
		})
	}
}

// TestFalseAlarmsNodeZones: the same for the two-zone scenario (NodeZones),
// every knob setting: node loss, return and churn under ordinary latency
// raise no violation. STALEFUZZ_FALSE_ALARMS=N runs it.
func TestFalseAlarmsNodeZones(t *testing.T) {
	measureFalseAlarms(t, kcm.NodeZones(), "the node zones scenario")
}

func measureFalseAlarms(t *testing.T, s fuzz.Scenario, what string) {
	n, _ := strconv.Atoi(os.Getenv("STALEFUZZ_FALSE_ALARMS"))
	if n <= 0 {
		t.Skip("STALEFUZZ_FALSE_ALARMS=N runs it")
	}
	env, err := fuzz.NewEnv(s)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	}()
	f, err := env.MeasureFalseAlarms(context.Background(), fuzz.FalseAlarmsOptions{Executions: n, Progress: func(done int, f fuzz.FalseAlarms, res *fuzz.Result, a *fuzz.Alarm) {
		if a != nil {
			for _, v := range a.Violations {
				t.Logf("execution %d: schedule %s: [%s] %s", done, a.Schedule, v.Oracle, v.Message)
			}
			t.Logf("execution %d: %s: %s", done, a.Verdict, a.Why)
		}
		if done%10 == 0 || done == n {
			t.Logf("%d/%d executions: %s", done, n, f)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("false alarms of %s: %s", what, f)
	if len(f.ByOracle) > 0 || f.RaceExecutions() > 0 {
		t.Errorf("false alarms or findings under ordinary latency: %s", f)
	}
	if f.Executions < n*3/4 {
		t.Errorf("only %d of %d executions could be judged: %s", f.Executions, n, f)
	}
}

// TestSchedulerTargetFile runs targets/deployment-scheduled.yaml (the
// Deployment and ReplicaSet controllers, kube-scheduler and the kubelet
// stand-in) against the real apiserver: without faults kube-scheduler binds
// both Pods to the builtins' Node, the stand-in runs them, the Deployment
// becomes kstatus Current (the workload's wait for it ends) and the run
// settles with no violation; with a nodeSelector no Node matches,
// kube-scheduler binds nothing, the stand-in runs nothing, the workload's
// wait for the Deployment to be Current times out, and the run never
// settles, naming the Deployment that is not Current.
func TestSchedulerTargetFile(t *testing.T) {
	tg, err := target.Load("targets/deployment-scheduled.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := target.StartEnv(t, tg)
	for _, c := range []struct {
		host     int
		bindings int
		current  bool
	}{{0, 2, true}, {1, 0, false}} {
		t.Run(tg.Knobs[0].Values[c.host], func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"host": c.host}}
			res, err := env.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			bindings := 0
			for _, r := range res.Trace.Requests {
				if r.Client == target.SchedulerClient && r.Verb == "create" && r.Resource == "pods" && r.Subresource == "binding" && r.Code == 201 {
					bindings++
				}
			}
			if bindings != c.bindings {
				t.Errorf("schedule %s: kube-scheduler bound %d Pods, want %d\n%s", sched, bindings, c.bindings, res.Report())
			}
			waited := true // the workload's wait for kstatus Current ended in time
			for _, l := range res.Logs.Lines {
				if l.Client == "workload" && strings.Contains(l.Text, "wait for Deployment web kstatus Current") {
					waited = false
				}
			}
			if waited != c.current {
				t.Errorf("schedule %s: the workload's wait for the Deployment to be Current ended in time: %v, want %v", sched, waited, c.current)
			}
			notCurrent := strings.Join(res.NotCurrent, "; ")
			if c.current && (!res.Settled || len(res.Violations) > 0) {
				t.Errorf("schedule %s: settled %v (not Current: %s), violations %v, want a settled run with none\n%s", sched, res.Settled, notCurrent, res.Violations, res.Report())
			}
			if !c.current && (res.Settled || !strings.Contains(notCurrent, "Deployment") || !strings.Contains(notCurrent, "web")) {
				t.Errorf("schedule %s: settled %v, not Current: %q; want an unsettled run naming Deployment web\n%s", sched, res.Settled, notCurrent, res.Report())
			}
		})
	}
}

// TestPodFatesTargetFile runs targets/job-pod-fates.yaml against the real
// apiserver: the kubelet stand-in's Pod lifecycle (Pending, then a fate)
// writes the statuses a kubelet writes, and kube-controller-manager's Job
// controller acts on them as in a cluster. Job work (restartPolicy Never,
// backoffLimit 0) ignores an eviction's DisruptionTarget condition, and is
// failed by its podFailurePolicy on exit code 137 (OOMKilled) only. Job
// retry (restartPolicy OnFailure, backoffLimit 0) counts a container
// restarted in place against its limit: it completes only when its Pod
// succeeds without a restart. A wait that gives up in every run (each fate
// has one) is the workflow: the Jobs' end state is judged.
func TestPodFatesTargetFile(t *testing.T) {
	tg, err := target.Load("targets/job-pod-fates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := target.StartEnv(t, tg)
	for i, c := range []struct {
		workFailed    bool // by its podFailurePolicy
		retryComplete bool
	}{
		{false, true},  // succeeded
		{false, false}, // evicted: ignored by work's policy; retry's Pod Failed
		{true, false},  // oomKilled: exit code 137; retry's container restarted
		{false, false}, // failed: work fails by backoffLimit; retry's container restarted
	} {
		t.Run(tg.Knobs[0].Values[i], func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"fate": i}}
			res, err := env.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			created := map[string]int{}
			for _, r := range res.Trace.Requests {
				if r.Client == target.ControllerManagerClient && r.Verb == "create" && r.Resource == "pods" && r.Code == 201 {
					job, _, _ := strings.Cut(r.Name, "-")
					created[job]++
				}
			}
			waited := map[string]bool{"work": true, "retry": true} // the wait ended in time
			for _, l := range res.Logs.Lines {
				for job := range waited {
					if l.Client == "workload" && strings.Contains(l.Text, "wait for Job "+job+" ") && strings.Contains(l.Text, "timed out") {
						waited[job] = false
					}
				}
			}
			if created["work"] != 1 || created["retry"] != 1 {
				t.Errorf("schedule %s: the Job controller created %d Pods for work and %d for retry, want 1 each\n%s", sched, created["work"], created["retry"], res.Report())
			}
			if waited["work"] != c.workFailed || waited["retry"] != c.retryComplete {
				t.Errorf("schedule %s: work failed by its podFailurePolicy %v, retry complete %v; want %v and %v\n%s", sched, waited["work"], waited["retry"], c.workFailed, c.retryComplete, res.Report())
			}
			// Every fate has a wait that gives up by design, in the
			// no-fault reference runs too: the workflow as written, so
			// the Jobs' end state is judged, not set aside as diverged.
			rep := res.Report()
			if !strings.Contains(rep, "workload waits gave up as in both no-fault reference runs") || strings.Contains(rep, "end state not judged") {
				t.Errorf("schedule %s: the Jobs' end state was not judged, though the same waits gave up in the no-fault reference runs\n%s", sched, rep)
			}
			if len(res.Violations) > 0 {
				t.Errorf("schedule %s: violations in a run without faults\n%s", sched, rep)
			}
		})
	}
}

// TestNodeStepsTargetFile: a target file's node steps against the real
// apiserver and kube-controller-manager's node lifecycle controller. The
// Node whose kubelet stopped is marked Unknown and comes back Ready; the
// Node that joined mid-run has its not-ready taint removed; a live Node is
// never marked; every Node is gone once the execution ends.
func TestNodeStepsTargetFile(t *testing.T) {
	tg, err := target.Load("targets/node-steps.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := target.StartEnv(t, tg)
	res, err := env.Run(context.Background(), fuzz.Schedule{}, fuzz.Retries(3))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Violations) > 0 {
		t.Errorf("violations in a run without faults:\n%s", res.Report())
	}
	ready := map[string][]string{} // node → the Ready statuses kube-controller-manager wrote
	taintsOf := map[string][]string{}
	for _, r := range res.Trace.Requests {
		if r.Client != target.ControllerManagerClient || r.Resource != "nodes" || r.Code != 200 || r.Write == nil {
			continue
		}
		for k, v := range r.Write.Set {
			if r.Subresource == "status" && strings.HasPrefix(k, "status.conditions") && strings.Contains(v, `"type":"Ready"`) {
				ready[r.Name] = append(ready[r.Name], v)
			}
			if k == "spec.taints" {
				taintsOf[r.Name] = append(taintsOf[r.Name], v)
			}
		}
	}
	if w := ready["n1"]; len(w) == 0 || !strings.Contains(strings.Join(w, " "), `"status":"Unknown"`) {
		t.Errorf("node n1, its kubelet stopped at t+0.2 s: kube-controller-manager never marked it Unknown (its status writes: %v)\n%s", w, res.Report())
	}
	if w := ready["n2"]; len(w) > 0 {
		t.Errorf("node n2, live throughout: kube-controller-manager wrote its Ready condition %v", w)
	}
	if len(taintsOf["n4"]) == 0 {
		t.Errorf("node n4, joined at t+0.5 s: kube-controller-manager never wrote its taints (the not-ready taint every new Node gets)\n%s", res.Report())
	}
	left, err := env.ScopedObjects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(left["nodes"])+len(left["leases"]) > 0 {
		t.Errorf("nodes and leases the execution made still there after it: %v", left)
	}
}

// TestJobBackoffTargetFile runs targets/job-backoff.yaml, a target whose
// budget (40 s) lets an execution outlast go test -fuzz's 10 s, against the
// real apiserver and Job controller, without faults: the first Pod fails,
// and its replacement is created only after the Job controller's 10 s
// back-off (a constant of its code), then succeeds, and the Job completes;
// nothing is violated. With the 8 s budget of other targets the run would
// end before that replacement Pod.
func TestJobBackoffTargetFile(t *testing.T) {
	tg, err := target.Load("targets/job-backoff.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := target.StartEnv(t, tg)
	res, err := env.Run(context.Background(), fuzz.Schedule{Knobs: map[string]int{"second": 0}}, fuzz.Retries(3))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Violations) > 0 {
		t.Errorf("violations in a run without faults:\n%s", res.Report())
	}
	var creates []time.Duration // after the mark
	complete := false
	for _, r := range res.Trace.Requests {
		if r.Client != target.ControllerManagerClient || r.Code >= 300 {
			continue
		}
		if r.Resource == "pods" && r.Verb == "create" {
			creates = append(creates, r.Start.Sub(res.Mark))
		}
		if r.Resource == "jobs" && r.Subresource == "status" && r.Write != nil && r.Write.Set["status.completionTime"] != "" && r.Write.Set["status.completionTime"] != "null" {
			complete = true // a Job's completionTime is set when it is Complete
		}
	}
	if len(creates) != 2 || creates[1]-creates[0] < 9*time.Second {
		t.Fatalf("want two Pod creates, the second after the 10 s back-off; got them at %v\n%s", creates, res.Report())
	}
	if !complete {
		t.Errorf("the Job controller never wrote the Job's completionTime (Complete)\n%s", res.Report())
	}
	t.Logf("Pods created at t+%v; the execution took %v", creates, res.Elapsed.Round(100*time.Millisecond))
}
