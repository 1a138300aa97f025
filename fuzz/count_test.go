package fuzz

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stalefuzz/stalefuzz/proxy"
)

// TestCountLearnedFromReferenceRuns: a controller that gives each parent
// ConfigMap one child (generated name) when its cache shows none creates a
// second after a restart onto an apiserver that has not seen the first; the
// count oracle, its limit learned from two no-fault runs (one child per
// parent), names the parent and both children. Without the fault, nothing.
func TestCountLearnedFromReferenceRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	s := childScenario()
	s.Counts = []Count{{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")}}
	env := testEnv(t, s)
	for _, c := range []struct {
		sched Schedule
		want  bool
	}{{Schedule{}, false}, {childRestart, true}} {
		res, err := env.Run(context.Background(), c.sched, Retries(3))
		if err != nil {
			t.Fatalf("schedule %s: %v", c.sched, err)
		}
		var got []string
		for _, v := range res.Violations {
			if v.Oracle == "count" {
				got = append(got, v.Subject+": "+v.Message)
			}
		}
		if (len(got) > 0) != c.want {
			t.Errorf("schedule %s: count violations %q, want some: %v\n%s", c.sched, got, c.want, res.Report())
			continue
		}
		if c.want && (!strings.Contains(got[0], "ConfigMap of ConfigMap p") || !strings.Contains(got[0], "had 2 live ConfigMaps at once") || !strings.Contains(got[0], "never had more than 1")) {
			t.Errorf("schedule %s: count violation %q does not name the parent, the two children and the learned limit", c.sched, got[0])
		}
	}
	if got := len(env.learnedRefs); got != 1 {
		t.Errorf("reference settings learned: %d, want 1 (the one knob setting, run twice once)", got)
	}
}

// TestEndStateLearnedFromReferenceRuns: the same duplicate child stays to
// the end, which the end-state oracle names (an object no no-fault
// reference run has: the parent's second generated child); without the
// fault the end state matches the reference runs, generated names, uids
// and timestamps notwithstanding.
func TestEndStateLearnedFromReferenceRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	s := childScenario()
	s.EndStates = []EndState{{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")}}
	env := testEnv(t, s)
	for _, c := range []struct {
		sched Schedule
		want  string
	}{{Schedule{}, ""}, {childRestart, "ConfigMap ConfigMap p/p-*#1: present; no no-fault reference run has it"}} {
		res, err := env.Run(context.Background(), c.sched, Retries(3))
		if err != nil {
			t.Fatalf("schedule %s: %v", c.sched, err)
		}
		var got []string
		for _, v := range res.Violations {
			got = append(got, v.Oracle+": "+v.Message)
			// Its subject is the object, as a known finding's Subject names it.
			if v.Oracle == "end-state" && !strings.HasPrefix(c.want, v.Subject+": ") {
				t.Errorf("schedule %s: end-state subject %q, want the object %q begins with", c.sched, v.Subject, c.want)
			}
		}
		if c.want == "" && len(got) > 0 || c.want != "" && (len(got) != 1 || !strings.Contains(got[0], "end-state: "+c.want)) {
			t.Errorf("schedule %s: violations %q, want %q", c.sched, got, c.want)
		}
	}
}

// TestEndStateNotJudgedWhenDiverged: a run whose workload went on without
// what it waited for (Exec.Diverged) ran another workflow than the
// reference runs, so its end state is shown in the report and not judged;
// every other oracle still judges it. The duplicate child of
// TestEndStateLearnedFromReferenceRuns is not a violation when the fault
// run's wait gave up and the reference runs' did not (knob "diverge": 1),
// nor the other way round (2), nor when one reference run's did and the
// other's not (4); it is one when neither did (0), and when the same wait
// gave up in the fault run and in both reference runs (3): a wait that
// gives up every run is the workflow as written, judged.
func TestEndStateNotJudgedWhenDiverged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	s := childScenario()
	s.EndStates = []EndState{{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")}}
	s.Knobs = []Knob{{Name: "diverge", Values: 5}}
	drive := s.Drive
	var mu sync.Mutex
	refRuns := 0 // no-fault runs of diverge=4
	s.Drive = func(ctx context.Context, x *Exec) error {
		faulted := len(x.Schedule.Steps) > 0
		k := x.Knob("diverge")
		gaveUp := k == 1 && faulted || k == 2 && !faulted || k == 3
		if k == 4 && !faulted {
			mu.Lock()
			refRuns++
			gaveUp = refRuns == 1
			mu.Unlock()
		}
		if gaveUp {
			x.Diverged("the wait for the parent's child gave up")
			x.Diverged("the wait for the parent's child gave up") // counted once
		}
		return drive(ctx, x)
	}
	env := testEnv(t, s)
	const dup = "ConfigMap ConfigMap p/p-*#1: present; no no-fault reference run has it"
	const wait = "the wait for the parent's child gave up"
	for _, c := range []struct {
		diverge int
		judged  bool
		why     string
	}{
		{0, true, ""},
		{1, false, "this run's workflow diverged (" + wait + ")"},
		{2, false, "this run's workflow diverged (" + wait + " in both no-fault reference runs, not in this one)"},
		{3, true, ""},
		{4, false, "the no-fault reference runs' workflow diverged (" + wait + " in one reference run only)"},
	} {
		sched := childRestart
		sched.Knobs = map[string]int{"diverge": c.diverge}
		res, err := env.Run(context.Background(), sched, Retries(3))
		if err != nil {
			t.Fatalf("schedule %s: %v", sched, err)
		}
		judged := slices.ContainsFunc(res.Violations, func(v Violation) bool { return v.Oracle == "end-state" && strings.Contains(v.Message, dup) })
		if judged != c.judged || !c.judged && len(res.Violations) > 0 {
			t.Errorf("schedule %s: violations %v; want the duplicate child judged %v", sched, res.Violations, c.judged)
		}
		if (res.Diverged != "") != (c.diverge == 1 || c.diverge == 3) {
			t.Errorf("schedule %s: Result.Diverged %q", sched, res.Diverged)
		}
		rep := res.Report()
		if c.diverge == 3 {
			if want := "workload waits gave up as in both no-fault reference runs (" + wait + "): the workflow as written, its end state judged"; !strings.Contains(rep, want) {
				t.Errorf("schedule %s: the report does not say the end state was judged though a wait gave up (want %q):\n%s", sched, want, rep)
			}
		}
		if c.judged {
			continue
		}
		if want := "end state not judged, as " + c.why; !strings.Contains(rep, want) || !strings.Contains(rep, "it differed from the reference runs': "+dup) {
			t.Errorf("schedule %s: the report does not show the unjudged end state (want %q and the duplicate child):\n%s", sched, want, rep)
		}
	}
}

// childRestart restarts the child-making controller right after its first
// create, onto an apiserver 0.4 s behind: it makes a second child.
var childRestart = Schedule{Steps: []Step{{Client: "ctl", Resource: "configmaps", Verbs: []string{"create"}, Action: proxy.Freeze, Length: time.Second, Lag: 400 * time.Millisecond}}}

// childScenario is a controller that gives each parent ConfigMap (label
// role=parent) one child ConfigMap with a generated name when its cache
// shows none.
func childScenario() Scenario {
	return Scenario{
		Name:      "children",
		Clients:   []string{"ctl"},
		Resources: []string{"configmaps"},
		Start: func(ctx context.Context, x *Exec) error {
			return x.StartManager(ctx, "ctl", func(mgr manager.Manager) error {
				c := mgr.GetClient()
				parents := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()["role"] == "parent" })
				return builder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}, builder.WithPredicates(parents)).Named("children").
					Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
						var parent corev1.ConfigMap
						if err := c.Get(ctx, req.NamespacedName, &parent); err != nil {
							return reconcile.Result{}, client.IgnoreNotFound(err)
						}
						var children corev1.ConfigMapList
						if err := c.List(ctx, &children, client.InNamespace(req.Namespace), client.MatchingLabels{"parent": req.Name}); err != nil {
							return reconcile.Result{}, err
						}
						if len(children.Items) > 0 {
							return reconcile.Result{}, nil
						}
						child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, GenerateName: req.Name + "-", Labels: map[string]string{"parent": req.Name}}}
						if err := controllerutil.SetControllerReference(&parent, child, c.Scheme()); err != nil {
							return reconcile.Result{}, err
						}
						return reconcile.Result{}, c.Create(ctx, child)
					}))
			})
		},
		Drive: func(ctx context.Context, x *Exec) error {
			return x.Direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: "p", Labels: map[string]string{"role": "parent"}}})
		},
	}
}
