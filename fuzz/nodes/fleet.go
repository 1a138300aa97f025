package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Region is the topology.kubernetes.io/region label of every Node a Fleet
// makes.
const Region = "region-1"

// Node is one Node of a fleet.
type Node struct {
	Name string
	// Zone is its topology.kubernetes.io/zone label. Zero: no zone labels
	// (the node lifecycle controller puts such nodes in one zone, "").
	Zone string
}

// State is what a Fleet did to one Node.
type State struct {
	Node
	// Joined is when Join created it; zero if it never joined.
	Joined time.Time
	// Stopped is when its kubelet last stopped (Stop), zero if never;
	// Resumed when it last came back (Resume), zero if never.
	Stopped, Resumed time.Time
	// Left is when Leave deleted it; zero if it is still there.
	Left time.Time
}

// Alive says its kubelet is renewing its Lease: joined, not stopped since
// it last resumed, not left.
func (s State) Alive() bool {
	return !s.Joined.IsZero() && s.Left.IsZero() && (s.Stopped.IsZero() || s.Resumed.After(s.Stopped))
}

// Present says the Node is there: joined and not left.
func (s State) Present() bool { return !s.Joined.IsZero() && s.Left.IsZero() }

// Fleet is the kubelets of a set of Nodes (see the package doc).
type Fleet struct {
	// Client writes the Nodes and Leases. Required.
	Client client.Client
	// Renewal is how often a live kubelet renews its Lease. Zero: 100 ms.
	Renewal time.Duration
	// LeaseDuration is each Lease's spec.leaseDurationSeconds, rounded up
	// to whole seconds. Zero: 1 s.
	LeaseDuration time.Duration

	mu      sync.Mutex
	states  map[string]*State
	order   []string
	renewed map[string][]time.Time
}

func (f *Fleet) renewal() time.Duration {
	if f.Renewal > 0 {
		return f.Renewal
	}
	return 100 * time.Millisecond
}

func (f *Fleet) leaseSeconds() int32 {
	d := f.LeaseDuration
	if d <= 0 {
		d = time.Second
	}
	return int32((d + time.Second - 1) / time.Second)
}

// Join creates n's Node, Ready, and its Lease, and starts renewing it.
func (f *Fleet) Join(ctx context.Context, n Node) error {
	f.mu.Lock()
	if _, dup := f.states[n.Name]; dup {
		f.mu.Unlock()
		return fmt.Errorf("unable to join node %s: it already joined this fleet (one Join per node name)", n.Name)
	}
	f.mu.Unlock()
	now := metav1.Now()
	labels := map[string]string{corev1.LabelHostname: n.Name, corev1.LabelOSStable: "linux"}
	if n.Zone != "" {
		labels[corev1.LabelTopologyZone] = n.Zone
		labels[corev1.LabelTopologyRegion] = Region
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}}},
	}
	// A Node's status is kept on create (pkg/registry/core/node/strategy.go,
	// PrepareForCreate), as the kubelet registers it.
	if err := f.Client.Create(ctx, node); err != nil {
		return fmt.Errorf("unable to create node %s: %w", n.Name, err)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: n.Name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(n.Name),
			LeaseDurationSeconds: ptr.To(f.leaseSeconds()),
			RenewTime:            ptr.To(metav1.NowMicro()),
		},
	}
	if err := f.Client.Create(ctx, lease); err != nil {
		return fmt.Errorf("unable to create lease %s/%s: %w", corev1.NamespaceNodeLease, n.Name, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.states == nil {
		f.states, f.renewed = map[string]*State{}, map[string][]time.Time{}
	}
	f.states[n.Name] = &State{Node: n, Joined: time.Now()}
	f.order = append(f.order, n.Name)
	f.renewed[n.Name] = []time.Time{time.Now()}
	return nil
}

// Stop stops name's kubelet: its Lease is no longer renewed.
func (f *Fleet) Stop(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.state(name, "stop")
	if err != nil {
		return err
	}
	if !s.Alive() {
		return fmt.Errorf("unable to stop node %s: its kubelet is not running (stopped at %s, left at %s)", name, stamp(s.Stopped), stamp(s.Left))
	}
	s.Stopped = time.Now()
	return nil
}

// Resume brings name's kubelet back: it posts the Node Ready with a fresh
// heartbeat and renews its Lease again.
func (f *Fleet) Resume(ctx context.Context, name string) error {
	f.mu.Lock()
	s, err := f.state(name, "resume")
	if err == nil && (s.Alive() || !s.Present()) {
		err = fmt.Errorf("unable to resume node %s: its kubelet was never stopped or the node left (stopped at %s, left at %s)", name, stamp(s.Stopped), stamp(s.Left))
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if err := f.renew(ctx, name); err != nil {
		return err
	}
	var node corev1.Node
	if err := f.Client.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
		return fmt.Errorf("unable to get node %s to post its Ready status: %w", name, err)
	}
	now := metav1.Now()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
		LastHeartbeatTime: now, LastTransitionTime: now}
	i := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
	if i < 0 {
		node.Status.Conditions = append(node.Status.Conditions, ready)
	} else {
		if node.Status.Conditions[i].Status == corev1.ConditionTrue {
			ready.LastTransitionTime = node.Status.Conditions[i].LastTransitionTime
		}
		node.Status.Conditions[i] = ready
	}
	// The kubelet's status update carries the resourceVersion it read: a
	// 409 means the node controller wrote in between, and it reads again.
	if err := f.Client.Status().Update(ctx, &node); err != nil {
		if apierrors.IsConflict(err) {
			return f.resumeAgain(ctx, name)
		}
		return fmt.Errorf("unable to post the Ready status of node %s: %w", name, err)
	}
	f.mu.Lock()
	s.Resumed = time.Now()
	f.renewed[name] = append(f.renewed[name], s.Resumed)
	f.mu.Unlock()
	return nil
}

// resumeAgain is Resume after a 409, at most a few times.
func (f *Fleet) resumeAgain(ctx context.Context, name string) error {
	for range 5 {
		var node corev1.Node
		if err := f.Client.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
			return fmt.Errorf("unable to get node %s to post its Ready status: %w", name, err)
		}
		now := metav1.Now()
		for i := range node.Status.Conditions {
			if c := &node.Status.Conditions[i]; c.Type == corev1.NodeReady {
				if c.Status != corev1.ConditionTrue {
					c.LastTransitionTime = now
				}
				c.Status, c.Reason, c.Message, c.LastHeartbeatTime = corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status", now
			}
		}
		err := f.Client.Status().Update(ctx, &node)
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("unable to post the Ready status of node %s: %w", name, err)
		}
		f.mu.Lock()
		f.states[name].Resumed = time.Now()
		f.renewed[name] = append(f.renewed[name], f.states[name].Resumed)
		f.mu.Unlock()
		return nil
	}
	return fmt.Errorf("unable to post the Ready status of node %s: 409 Conflict five times in a row", name)
}

// Leave deletes name's Node and its Lease, its kubelet gone first.
func (f *Fleet) Leave(ctx context.Context, name string) error {
	f.mu.Lock()
	s, err := f.state(name, "remove")
	if err == nil && !s.Present() {
		err = fmt.Errorf("unable to remove node %s: it already left at %s", name, stamp(s.Left))
	}
	if err == nil {
		s.Left = time.Now()
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if err := f.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		return fmt.Errorf("unable to delete node %s: %w", name, err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name}}
	if err := f.Client.Delete(ctx, lease); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("unable to delete lease %s/%s: %w", corev1.NamespaceNodeLease, name, err)
	}
	return nil
}

// Run renews every live kubelet's Lease each Renewal until ctx is done.
func (f *Fleet) Run(ctx context.Context) error {
	tick := time.NewTicker(f.renewal())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, s := range f.States() {
			if !s.Alive() {
				continue
			}
			if err := f.renew(ctx, s.Name); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				// A Resume or Leave between States and the renewal.
				if st, _ := f.Get(s.Name); !st.Alive() {
					continue
				}
				return err
			}
		}
	}
}

// renew renews name's Lease and remembers when it was acknowledged.
func (f *Fleet) renew(ctx context.Context, name string) error {
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"renewTime": metav1.NowMicro()}})
	if err != nil {
		return err
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name}}
	if err := f.Client.Patch(ctx, lease, client.RawPatch("application/merge-patch+json", body)); err != nil {
		return fmt.Errorf("unable to renew lease %s/%s: %w", corev1.NamespaceNodeLease, name, err)
	}
	f.mu.Lock()
	f.renewed[name] = append(f.renewed[name], time.Now())
	f.mu.Unlock()
	return nil
}

// States are the fleet's nodes in the order they joined.
func (f *Fleet) States() []State {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]State, 0, len(f.order))
	for _, name := range f.order {
		out = append(out, *f.states[name])
	}
	return out
}

// Get is one node's State, false if it never joined.
func (f *Fleet) Get(name string) (State, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.states[name]
	if !ok {
		return State{}, false
	}
	return *s, true
}

// Gap is the longest time between two acknowledged renewals of name's
// Lease (its creation and its Ready posts count) from from to to, and from
// the last to to: for a node alive over that span, how long its Lease
// looked expired through no fault of a controller's (a loaded machine).
func (f *Fleet) Gap(name string, from, to time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var longest time.Duration
	prev := time.Time{}
	for _, t := range f.renewed[name] {
		if t.Before(from) {
			prev = t
			continue
		}
		if t.After(to) {
			t = to
		}
		if !prev.IsZero() {
			longest = max(longest, t.Sub(prev))
		}
		prev = t
		if !t.Before(to) {
			return longest
		}
	}
	if !prev.IsZero() && prev.Before(to) {
		longest = max(longest, to.Sub(prev))
	}
	return longest
}

func (f *Fleet) state(name, verb string) (*State, error) {
	s, ok := f.states[name]
	if !ok {
		return nil, fmt.Errorf("unable to %s node %s: it never joined this fleet (Join it first)", verb, name)
	}
	return s, nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format("15:04:05.000")
}
