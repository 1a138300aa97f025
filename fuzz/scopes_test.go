package fuzz

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// scopesScenario has one client watch Nodes (cluster-scoped), Leases in
// kube-node-lease and ConfigMaps in the execution's namespace; its workload
// creates one of each and updates them 200 ms later.
func scopesScenario(scopes map[string]string) Scenario {
	return Scenario{
		Name:      "scopes",
		Clients:   []string{"watcher"},
		Resources: []string{"configmaps", "nodes", "leases"},
		Scopes:    scopes,
		Start: func(ctx context.Context, x *Exec) error {
			cs, err := clientsetOf(x, "watcher")
			if err != nil {
				return err
			}
			factories := []informers.SharedInformerFactory{
				informers.NewSharedInformerFactory(cs, 0),
				informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("kube-node-lease")),
				informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(x.Namespace)),
			}
			synced := []cache.InformerSynced{
				factories[0].Core().V1().Nodes().Informer().HasSynced,
				factories[1].Coordination().V1().Leases().Informer().HasSynced,
				factories[2].Core().V1().ConfigMaps().Informer().HasSynced,
			}
			x.Go("informers", func(ctx context.Context) error {
				for _, f := range factories {
					f.Start(ctx.Done())
				}
				<-ctx.Done()
				for _, f := range factories {
					f.Shutdown()
				}
				return nil
			})
			if !cache.WaitForCacheSync(ctx.Done(), synced...) {
				return fmt.Errorf("informers of %s never synced", x.Namespace)
			}
			return nil
		},
		Drive: func(ctx context.Context, x *Exec) error {
			objs := []client.Object{
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}},
				&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: "node-a"}},
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: "c"}},
			}
			for _, o := range objs {
				if err := x.Direct.Create(ctx, o); err != nil {
					return fmt.Errorf("unable to create %T %s: %w", o, o.GetName(), err)
				}
			}
			x.After(200*time.Millisecond, "label them", func(ctx context.Context) error {
				for _, o := range objs {
					patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"touched":"yes"}}}`))
					if err := x.Direct.Patch(ctx, o, patch); err != nil {
						return fmt.Errorf("unable to label %T %s: %w", o, o.GetName(), err)
					}
				}
				return nil
			})
			return nil
		},
	}
}

// TestScopesFaultAndSweepObjectsOutsideTheNamespace: a lag step on a
// cluster-scoped resource, or on one declared to live in a named namespace,
// acts there; the sweep removes what the execution created there and
// nothing that was there before the Env; a cluster-scoped resource not
// declared in Scopes is refused, naming the fix.
func TestScopesFaultAndSweepObjectsOutsideTheNamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	// An Env first, for a control plane (Main shares it) in which a Node
	// and a Lease exist before the scenario's Env begins.
	plain, err := NewEnv(Scenario{Name: "plain", Start: noop, Drive: noop})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Stop() })
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	before := "before-" + hex.EncodeToString(b)
	preexisting := []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: before}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: before}},
	}
	for _, o := range preexisting {
		if err := plain.direct.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = plain.direct.Delete(context.Background(), o) })
	}

	_, err = NewEnv(scopesScenario(map[string]string{"leases": "kube-node-lease"}))
	if err == nil || !strings.Contains(err.Error(), `resource "nodes" (nodes) is cluster-scoped`) || !strings.Contains(err.Error(), "fuzz.Cluster") {
		t.Fatalf("nodes not declared cluster-scoped: got %v, want an error naming nodes and fuzz.Cluster", err)
	}

	env, err := NewEnv(scopesScenario(map[string]string{"nodes": Cluster, "leases": "kube-node-lease"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	drop := func(resource string) Step {
		return Step{Client: "watcher", Resource: resource, Types: []string{"MODIFIED"}, Start: 0, Length: time.Second, Action: proxy.Drop}
	}
	res, err := env.Run(ctx, Schedule{Steps: []Step{drop("nodes"), drop("leases"), drop("configmaps")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ resource, namespace, name string }{
		{"nodes", "", "node-a"},
		{"leases", "kube-node-lease", "node-a"},
		{"configmaps", res.Namespace, "c"},
	} {
		var fates []string
		for _, ev := range res.Trace.Events {
			if ev.Client == "watcher" && ev.Resource == want.resource && ev.Namespace == want.namespace && ev.Name == want.name && ev.Type == "MODIFIED" {
				fates = append(fates, string(ev.Fate))
			}
		}
		if len(fates) == 0 || fates[0] != string(trace.Dropped) {
			t.Errorf("%s %s/%s: the MODIFIED events' fates %v, want dropped by its step", want.resource, want.namespace, want.name, fates)
		}
	}

	if res.SweepErr != nil {
		t.Fatalf("sweep: %v", res.SweepErr)
	}
	left, err := env.ScopedObjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("after the execution, of the scoped resources: %v left, want nothing", left)
	}
	for _, o := range preexisting {
		if err := env.direct.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("%T %s, there before the Env: %v, want it kept", o, client.ObjectKeyFromObject(o), err)
		}
	}
	var node corev1.Node
	if err := env.direct.Get(ctx, client.ObjectKey{Name: "node-a"}, &node); !apierrors.IsNotFound(err) {
		t.Errorf("node node-a, the execution's: %v, want it gone", err)
	}
}

// TestScopesRestartOntoALaggingAPIServer: a controller restarted onto an
// apiserver that has not seen its write lists a resource of Scopes that
// lives in another namespace (Leases in kube-node-lease, which its manager's
// cache covers) from before that write too, not only the execution's
// namespace. (A cluster-scoped list is the whole collection, which a rule
// for the execution's namespace matches already.)
func TestScopesRestartOntoALaggingAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	s := Scenario{
		Name:      "scopesrestart",
		Clients:   []string{"ctl"},
		Resources: []string{"leases"},
		Scopes:    map[string]string{"leases": "kube-node-lease"},
		Start: func(ctx context.Context, x *Exec) error {
			return x.StartManager(ctx, "ctl", func(mgr manager.Manager) error {
				return addLabeller(mgr, func() *coordinationv1.Lease { return &coordinationv1.Lease{} })
			})
		},
		Drive: func(ctx context.Context, x *Exec) error {
			return x.Direct.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: "node-r"}})
		},
	}
	env := testEnv(t, s)
	res, err := env.Run(context.Background(), Schedule{Steps: []Step{{
		Client: "ctl", Resource: "leases", Action: proxy.Freeze, Length: time.Second, Lag: 300 * time.Millisecond,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Restarts) != 1 {
		t.Fatalf("restarts: %d, want 1 (after the label patch): %s", len(res.Restarts), res.Report())
	}
	var lists []string
	rewound := false
	for _, r := range res.Trace.Requests {
		if r.Client == "ctl" && r.Resource == "leases" && (r.Verb == "list" || r.Verb == "watch") && r.Start.After(res.Restarts[0].Stopped) {
			lists = append(lists, fmt.Sprintf("%s %s %q", r.Verb, r.Namespace, r.FaultKind))
			rewound = rewound || (r.FaultKind == trace.FaultRewind && r.Namespace == "kube-node-lease")
		}
	}
	if !rewound {
		t.Errorf("the restarted controller's lists and watches of leases: %v, want a list in kube-node-lease served from before its write (%q)", lists, trace.FaultRewind)
	}
}

// TestSweepKinds: the objects of a kind of Scenario.Sweep (a cluster-scoped
// one, ClusterRoles) that an execution created are gone after it, with no
// fault acting on them; one there before the Env is kept; a kind the
// apiserver does not serve is left out, not refused.
func TestSweepKinds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b)
	plain, err := NewEnv(Scenario{Name: "plain", Start: noop, Drive: noop})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Stop() })
	before := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "before-" + suffix}}
	if err := plain.direct.Create(ctx, before); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.direct.Delete(context.Background(), before) })

	mine := "execution-" + suffix
	s := Scenario{
		Name:  "sweep-kinds",
		Start: noop,
		Drive: func(ctx context.Context, x *Exec) error {
			return x.Direct.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: mine}})
		},
		Sweep: []schema.GroupVersionKind{
			rbacv1.SchemeGroupVersion.WithKind("ClusterRole"),
			{Group: "example.com", Version: "v1", Kind: "NotServed"},
		},
	}
	env, err := NewEnv(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	res, err := env.Run(ctx, Schedule{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SweepErr != nil {
		t.Fatalf("sweep: %v", res.SweepErr)
	}
	var cr rbacv1.ClusterRole
	if err := env.direct.Get(ctx, client.ObjectKey{Name: mine}, &cr); !apierrors.IsNotFound(err) {
		t.Errorf("clusterrole %s, the execution's: %v, want it gone", mine, err)
	}
	if err := env.direct.Get(ctx, client.ObjectKeyFromObject(before), &cr); err != nil {
		t.Errorf("clusterrole %s, there before the Env: %v, want it kept", before.Name, err)
	}
}
