package fuzz

import (
	"context"
	"fmt"
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
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// TestSlowRestartStillLags: a restart onto a lagging apiserver whose new
// instance takes longer than RestartBudget to start (as on a loaded
// machine, where a test's slack allows it) still lists from before the
// write that fired it: the lagging apiserver stays behind until the new
// instance has synced, and the trace records each time it was kept so.
// Before keepLagging, its rules ended RestartBudget after the stop and such
// a list was current: the schedule's restart silently did not happen.
func TestSlowRestartStillLags(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	const slow = RestartBudget + 600*time.Millisecond
	var mu sync.Mutex
	starts := map[string]int{} // namespace → the controller's starts in it
	s := Scenario{
		Name:      "slowrestart",
		Clients:   []string{"ctl"},
		Resources: []string{"configmaps"},
		Start: func(ctx context.Context, x *Exec) error {
			return x.StartManager(ctx, "ctl", func(mgr manager.Manager) error {
				mu.Lock()
				starts[x.Namespace]++
				again := starts[x.Namespace] > 1
				mu.Unlock()
				if again {
					// A controller slow to start again.
					time.Sleep(slow)
				}
				return addLabeller(mgr, func() *corev1.ConfigMap { return &corev1.ConfigMap{} })
			})
		},
		Drive: func(ctx context.Context, x *Exec) error {
			return x.Direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: "settings"}})
		},
	}
	env := testEnv(t, s)
	res, err := env.Run(context.Background(), Schedule{Steps: []Step{{
		Client: "ctl", Resource: "configmaps", Action: proxy.Freeze, Length: time.Second, Lag: 300 * time.Millisecond,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Restarts) != 1 {
		t.Fatalf("restarts: %d, want 1 (after the label patch): %s", len(res.Restarts), res.Report())
	}
	r := res.Restarts[0]
	if took := r.Ready.Sub(r.Stopped); took < slow {
		t.Fatalf("the restart took %v, want at least %v: the test's slow start did not happen", took, slow)
	}
	var lists []string
	rewound := false
	for _, q := range res.Trace.Requests {
		if q.Client == "ctl" && q.Resource == "configmaps" && (q.Verb == "list" || q.Verb == "watch") && q.Start.After(r.Stopped) {
			lists = append(lists, fmt.Sprintf("%s at t+%v %q", q.Verb, q.Start.Sub(res.Mark).Round(time.Millisecond), q.FaultKind))
			rewound = rewound || q.FaultKind == trace.FaultRewind
		}
	}
	if !rewound {
		t.Errorf("the restarted controller (ready %v after its stop) listed and watched configmaps %v, want a list from before its write (%q)", r.Ready.Sub(r.Stopped).Round(time.Millisecond), lists, trace.FaultRewind)
	}
	kept := 0
	for _, rs := range res.Trace.Rules {
		if rs.Added && rs.At.After(r.Stopped.Add(RestartBudget/2)) {
			kept++
		}
	}
	if kept == 0 {
		t.Errorf("the trace records no rules added after t+%v: want the lagging apiserver kept behind while the restart was under way", RestartBudget/2)
	}
}

// addLabeller adds to mgr a controller of objects of T that labels each
// seen=yes (a merge patch) unless its cache shows the label already: the
// smallest controller whose writes follow what its cache shows.
func addLabeller[T client.Object](mgr manager.Manager, newObj func() T) error {
	c := mgr.GetClient()
	return builder.ControllerManagedBy(mgr).For(newObj()).Named("labeller").Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		obj := newObj()
		if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		if obj.GetLabels()["seen"] == "yes" {
			return reconcile.Result{}, nil
		}
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		obj.SetLabels(map[string]string{"seen": "yes"})
		return reconcile.Result{}, c.Patch(ctx, obj, patch)
	}))
}
