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
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stalefuzz/stalefuzz/proxy"
)

// TestDifferentialJudgedAsItsReferencesGaveUp: the differential oracle
// judges a run whose workload waits gave up when the same waits gave up in
// its no-lag reference run and in a second one (the workflow as written),
// and sets aside a run that gave up others, or whose reference runs
// disagree. The workload of a run with a fault step writes data.extra, so
// that a judged run differs from its reference.
func TestDifferentialJudgedAsItsReferencesGaveUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	const wait = "the wait for data.observed gave up"
	var mu sync.Mutex
	refRuns := 0 // no-fault runs of diverge=4
	s := Scenario{
		Name:         "differential-gaveup",
		Clients:      []string{"ctl"},
		Resources:    []string{"configmaps"},
		Knobs:        []Knob{{Name: "diverge", Values: 5}},
		Differential: &Differential{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		Start: func(ctx context.Context, x *Exec) error {
			return x.StartManager(ctx, "ctl", func(mgr manager.Manager) error {
				c := mgr.GetClient()
				return builder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("observer").Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
					var cm corev1.ConfigMap
					if err := c.Get(ctx, req.NamespacedName, &cm); err != nil || cm.Name != "settings" {
						return reconcile.Result{}, client.IgnoreNotFound(err)
					}
					if cm.Data["observed"] == cm.Data["desired"] {
						return reconcile.Result{}, nil
					}
					patch := client.MergeFrom(cm.DeepCopy())
					cm.Data["observed"] = cm.Data["desired"]
					return reconcile.Result{}, c.Patch(ctx, &cm, patch)
				}))
			})
		},
		Drive: func(ctx context.Context, x *Exec) error {
			faulted := len(x.Schedule.Steps) > 0
			data := map[string]string{"desired": "1"}
			if faulted {
				data["extra"] = "x"
			}
			if err := x.Direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: "settings"}, Data: data}); err != nil {
				return err
			}
			k := x.Knob("diverge")
			gaveUp := k == 1 && faulted || k == 2 && !faulted || k == 3
			if k == 4 && !faulted {
				mu.Lock()
				refRuns++
				gaveUp = refRuns == 1
				mu.Unlock()
			}
			if gaveUp {
				x.Diverged(wait)
			}
			return nil
		},
	}
	env := testEnv(t, s)
	for _, c := range []struct {
		diverge int
		judged  bool
	}{
		{0, true},  // no wait gave up
		{1, false}, // in this run only
		{2, false}, // in the reference runs only
		{3, true},  // in this run and both reference runs: the workflow
		{4, false}, // in one of the two reference runs: no reference
	} {
		sched := Schedule{Knobs: map[string]int{"diverge": c.diverge}, Steps: []Step{{Client: "ctl", Resource: "configmaps", Action: proxy.Delay, Delay: 10 * time.Millisecond, Length: 500 * time.Millisecond}}}
		res, err := env.Run(context.Background(), sched, Retries(3))
		if err != nil {
			t.Fatalf("schedule %s: %v", sched, err)
		}
		judged := slices.ContainsFunc(res.Violations, func(v Violation) bool {
			return v.Oracle == "differential" && strings.Contains(v.Message, "extra")
		})
		if judged != c.judged || !c.judged && len(res.Violations) > 0 {
			t.Errorf("schedule %s: violations %v; want the final state judged %v", sched, res.Violations, c.judged)
		}
		rep := res.Report()
		if c.diverge == 3 {
			if want := "workload waits gave up as in both no-fault reference runs (" + wait + ")"; !strings.Contains(rep, want) {
				t.Errorf("schedule %s: the report does not say the final state was judged though a wait gave up (want %q):\n%s", sched, want, rep)
			}
		}
	}
}
