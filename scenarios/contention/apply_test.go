package contention_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

// TestApplyKeepsControllersFields runs, against the real apiserver, a
// workload that applies a ConfigMap, waits for an in-process controller to
// put its finalizer and label on it (a write the manifest knows nothing
// of, which also moves its resourceVersion), then applies the manifest
// again with a new value: the second apply is no harness error, sets the
// value, and leaves the controller's finalizer and label where they were
// (in the first version with the new value the controller sees),
// as kubectl apply does. An update of the manifest (the apply step before
// 2026-11-29) removed both.
func TestApplyKeepsControllersFields(t *testing.T) {
	const finalizer, label = "stalefuzz.test/keep", "marked"
	manifest := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: \"" + v + "\"}\n"
	}
	var mu sync.Mutex
	var first *corev1.ConfigMap // the controller's first view of cfg with a=2
	tg := &target.Target{
		Name:   "apply-merge",
		Scheme: runtime.NewScheme(),
		Controllers: []target.Controller{{
			Name:    "marker",
			Watches: []string{"configmaps"},
			Setup: func(ctx context.Context, x *fuzz.Exec, mgr manager.Manager) error {
				c := mgr.GetClient()
				return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(reconcile.Func(
					func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
						cm := &corev1.ConfigMap{}
						if err := c.Get(ctx, req.NamespacedName, cm); err != nil || cm.Name != "cfg" {
							return reconcile.Result{}, client.IgnoreNotFound(err)
						}
						if cm.Data["a"] == "2" {
							mu.Lock()
							if first == nil {
								first = cm.DeepCopy()
							}
							mu.Unlock()
						}
						if slices.Contains(cm.Finalizers, finalizer) {
							return reconcile.Result{}, nil
						}
						cm.Finalizers = append(cm.Finalizers, finalizer)
						if cm.Labels == nil {
							cm.Labels = map[string]string{}
						}
						cm.Labels[label] = "yes"
						return reconcile.Result{}, c.Update(ctx, cm)
					}))
			},
		}},
		Workload: []target.Step{
			{Apply: &target.Apply{Manifest: manifest("1")}},
			{Wait: &target.Wait{Object: target.Object{APIVersion: "v1", Kind: "ConfigMap", Name: "cfg"}, JSONPath: "{.metadata.labels." + label + "}", Value: "yes", Timeout: "5s"}},
			{Apply: &target.Apply{Manifest: manifest("2")}},
			{Wait: &target.Wait{Object: target.Object{APIVersion: "v1", Kind: "ConfigMap", Name: "cfg"}, JSONPath: "{.data.a}", Value: "2", Timeout: "5s"}},
		},
	}
	if err := clientgoscheme.AddToScheme(tg.Scheme); err != nil {
		t.Fatal(err)
	}
	env := target.StartEnv(t, tg)
	res, err := env.Run(context.Background(), fuzz.Schedule{}, fuzz.Retries(3))
	if err != nil {
		t.Fatalf("the workload (apply, the controller's write, apply again): %v", err)
	}
	for _, l := range res.Logs.Lines {
		if strings.Contains(l.Text, "timed out") {
			t.Errorf("a wait of the workload timed out: %s\n%s", l.Text, res.Report())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if first == nil {
		t.Fatalf("the controller never saw cfg with a=2\n%s", res.Report())
	}
	if !slices.Contains(first.Finalizers, finalizer) || first.Labels[label] != "yes" {
		t.Errorf("after the second apply cfg has finalizers %q and labels %v: the controller's finalizer %s and label %s=yes were removed", first.Finalizers, first.Labels, finalizer, label)
	}
}
