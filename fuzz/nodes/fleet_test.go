package nodes_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/fuzz/nodes"
	"github.com/stalefuzz/stalefuzz/proxy/controlplane"
)

// TestFleet runs a fleet against the real apiserver: joined nodes are Ready
// with their zone and region, their Leases renewed while their kubelets
// run and not once stopped, back with a Ready status, gone when they leave.
func TestFleet(t *testing.T) {
	env := &controlplane.Environment{}
	if err := env.Start(); err != nil {
		t.Fatalf("start the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &nodes.Fleet{Client: c, Renewal: 50 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	for _, n := range []nodes.Node{{Name: "n1", Zone: "z1"}, {Name: "n2", Zone: "z2"}} {
		if err := f.Join(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Join(ctx, nodes.Node{Name: "n1"}); err == nil {
		t.Error("a second Join of n1 succeeded")
	}
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "n1"}, &n); err != nil {
		t.Fatal(err)
	}
	if n.Labels[corev1.LabelTopologyZone] != "z1" || n.Labels[corev1.LabelTopologyRegion] != nodes.Region {
		t.Errorf("node n1's labels %v: want zone z1 and region %s", n.Labels, nodes.Region)
	}
	if !ready(&n) {
		t.Errorf("node n1 joined not Ready: %+v", n.Status.Conditions)
	}

	renewTime := func(name string) time.Time {
		t.Helper()
		var l coordinationv1.Lease
		if err := c.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: name}, &l); err != nil {
			t.Fatal(err)
		}
		return l.Spec.RenewTime.Time
	}
	first := renewTime("n1")
	time.Sleep(300 * time.Millisecond)
	if !renewTime("n1").After(first) {
		t.Error("n1's Lease was not renewed while its kubelet ran")
	}

	if err := f.Stop("n1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a renewal already under way
	stopped := renewTime("n1")
	time.Sleep(300 * time.Millisecond)
	if got := renewTime("n1"); !got.Equal(stopped) {
		t.Errorf("n1's Lease renewed at %v after its kubelet stopped (last before: %v)", got, stopped)
	}
	if s, _ := f.Get("n1"); s.Alive() || !s.Present() {
		t.Errorf("n1 after Stop: %+v, want present and not alive", s)
	}
	if gap := f.Gap("n1", first, time.Now()); gap < 300*time.Millisecond {
		t.Errorf("Gap of a stopped node's Lease: %v, want at least the 300 ms it was stopped", gap)
	}
	if gap := f.Gap("n2", first, time.Now()); gap > 300*time.Millisecond {
		t.Errorf("Gap of a live node's Lease: %v, want about its renewal (50 ms)", gap)
	}

	// Someone marks n1 Unknown, as the node lifecycle controller does.
	if err := c.Get(ctx, client.ObjectKey{Name: "n1"}, &n); err != nil {
		t.Fatal(err)
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].Status = corev1.ConditionUnknown
		}
	}
	if err := c.Status().Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
	if err := f.Resume(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "n1"}, &n); err != nil {
		t.Fatal(err)
	}
	if !ready(&n) {
		t.Errorf("node n1 back but not Ready: %+v", n.Status.Conditions)
	}
	back := renewTime("n1")
	time.Sleep(300 * time.Millisecond)
	if !renewTime("n1").After(back) {
		t.Error("n1's Lease was not renewed after its kubelet came back")
	}

	if err := f.Leave(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "n2"}, &n); !apierrors.IsNotFound(err) {
		t.Errorf("node n2 after Leave: %v, want NotFound", err)
	}
	var l coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: "n2"}, &l); !apierrors.IsNotFound(err) {
		t.Errorf("lease n2 after Leave: %v, want NotFound", err)
	}
	if err := f.Stop("n2"); err == nil {
		t.Error("Stop of a node that left succeeded")
	}
	if err := f.Resume(ctx, "n9"); err == nil {
		t.Error("Resume of a node that never joined succeeded")
	}
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: n.ObjectMeta}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
