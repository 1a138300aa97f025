package kcm

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/nodes"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// The node lifecycle controller's timings, its defaults scaled down 50
// times (node-monitor-grace-period 50 s, node-monitor-period 5 s) so that a
// node's death and its detection fit one execution. The stand-in renews a
// live Lease every 100 ms, 5 s at that scale: twice as often as a real
// kubelet (every 10 s, a quarter of its 40 s Lease).
const (
	// NodeGrace is --node-monitor-grace-period and
	// --node-startup-grace-period.
	NodeGrace = time.Second
	// NodeMonitorPeriod is --node-monitor-period.
	NodeMonitorPeriod = 100 * time.Millisecond
	// LeaseRenewal is how often the kubelet stand-in renews a live node's
	// Lease.
	LeaseRenewal = 100 * time.Millisecond
	// NodeDies is when node-b stops renewing its Lease (knob "die" 1 or
	// 2).
	NodeDies = 200 * time.Millisecond
	// LeaseTouched is when, with knob "die" = 2, someone else writes
	// node-b's Lease without renewing it (a label), after its last renewal.
	LeaseTouched = NodeDies + 200*time.Millisecond
)

// LeaseGate is the node lifecycle controller's gate against a stale Lease
// cache, beta and on by default in 1.37: before it marks a node whose cached
// Lease looks expired, it reads the Lease from the apiserver, and if that
// differs from its cache it waits until its cache has caught up
// (pkg/controller/nodelifecycle/node_lifecycle_controller.go,
// tryUpdateNodeHealth).
const LeaseGate = "NodeControllerLeaseCircuitBreaker"

// marker is a Lease in kube-node-lease of no node, which the node lifecycle
// controller watches and never reads by itself: seeing its latest write tells
// that the controller's Lease cache holds every write before it.
const marker = "stalefuzz-marker"

// Nodes are the nodes of every execution: node-a always renews its Lease,
// node-b stops at NodeDies when knob "die" is 1 or 2; with 2, someone else
// labels node-b's Lease at LeaseTouched (a write that does not renew it:
// an administrator, a policy engine, a storage migration).
var Nodes = []string{"node-a", "node-b"}

// NodeLifecycle is kube-controller-manager's node lifecycle controller with
// LeaseGate on or off, under faults a real cluster produces, on two Nodes
// and their Leases in kube-node-lease, renewed by a kubelet stand-in.
//
// Oracles: a node whose Lease the stand-in renewed throughout must never be
// marked Ready=Unknown ("live-node-unknown": in a cluster, its pods leave
// their Services' endpoints and, after the unreachable taint's toleration,
// are evicted); a node whose Lease stopped must be marked Unknown by the end
// of the run ("dead-node-missed"). A run in which the stand-in itself fell
// behind (a renewal gap of half the grace period) is a harness error.
func NodeLifecycle(gate bool) fuzz.Scenario {
	state := "off"
	if gate {
		state = "on"
	}
	// The behaviour the gate was made for: the controller trusts its Lease
	// cache, and a cache late by more than the grace period looks like a
	// dead kubelet.
	knownBug := "with " + LeaseGate + " off, Lease events late by more than the grace period make the controller mark a live node Unknown"
	if gate {
		// nodelifecycle-report.md: the gate compares the live Lease with
		// the last renewed one, not with its cache.
		knownBug = "with " + LeaseGate + " on, a dead node whose Lease was written without being renewed is never marked Unknown"
	}
	// With the gate on, every campaign ends at that finding within 90 s
	// (die=2 is a no-lag seed): known, a campaign counts it and searches
	// on. Its message names the non-renewing write, which only die=2 does.
	var known []fuzz.Known
	if gate {
		known = []fuzz.Known{{Oracle: "dead-node-missed", Message: "labelled, not renewed", Why: "nodelifecycle-report.md: a dead node whose Lease was written without being renewed is never marked Unknown"}}
	}
	return fuzz.Scenario{
		KnownBug:  knownBug,
		Known:     known,
		Name:      "kcm-nodelifecycle-gate-" + state,
		Clients:   []string{Client},
		Resources: []string{"leases", "nodes"},
		Scopes:    map[string]string{"leases": "kube-node-lease", "nodes": fuzz.Cluster},
		Objects:   Nodes,
		Space:     fuzz.Realistic,
		Bounds:    Bounds,
		Knobs:     []fuzz.Knob{{Name: "die", Values: 3}},
		Quiet:     300 * time.Millisecond,
		Setup:     setup,
		Start:     func(ctx context.Context, x *fuzz.Exec) error { return startNodeLifecycle(ctx, x, gate) },
		Drive:     driveNodeLifecycle,
		Seeds:     NodeLifecycleSeeds(),
		Checks: []fuzz.Check{
			{Name: "live-node-unknown", Fn: liveNodeUnknown},
			{Name: "dead-node-missed", Fn: deadNodeMissed},
		},
		SeedsOnlyFuzzing: true,
	}
}

// NodeLifecycleSeeds: each resource's events held for the longest window
// from its first and third event on, each watch relisted at its first
// event, and a restart right after the controller's first node write.
func NodeLifecycleSeeds() []fuzz.Schedule {
	one := func(die int, st fuzz.Step) fuzz.Schedule {
		st.Client = Client
		return fuzz.Schedule{Knobs: map[string]int{"die": die}, Steps: []fuzz.Step{st}}
	}
	var out []fuzz.Schedule
	for _, res := range []string{"leases", "nodes"} {
		for _, n := range []int{1, 3} {
			out = append(out, one(0, fuzz.Step{Resource: res, Action: proxy.Hold, After: n, Length: Bounds.MaxLagEnd}))
		}
		out = append(out, one(1, fuzz.Step{Resource: res, Action: proxy.Expire, Length: Bounds.MaxFaultEnd}))
	}
	out = append(out, one(1, fuzz.Step{Resource: "nodes", Action: proxy.Freeze, Length: Bounds.MaxFaultEnd}))
	return out
}

// startNodeLifecycle joins the nodes, Ready, with their Leases, their
// kubelet stand-ins renewing them (package fuzz/nodes), and starts
// kube-controller-manager with only its node lifecycle controller.
func startNodeLifecycle(ctx context.Context, x *fuzz.Exec, gate bool) error {
	f := &nodes.Fleet{Client: x.Direct, Renewal: LeaseRenewal, LeaseDuration: NodeGrace}
	x.Value = f
	for _, name := range Nodes {
		if err := f.Join(ctx, nodes.Node{Name: name}); err != nil {
			return err
		}
	}
	if err := x.Direct.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: marker}}); err != nil {
		return wrap(err, "create", "lease", corev1.NamespaceNodeLease+"/"+marker)
	}
	x.Go("kubelet stand-in", f.Run)

	return startControllerManager(ctx, x, "node-lifecycle-controller", []string{"leases", "nodes", "pods", "daemonsets"},
		"--node-monitor-period="+NodeMonitorPeriod.String(),
		"--node-monitor-grace-period="+NodeGrace.String(),
		"--node-startup-grace-period="+NodeGrace.String(),
		"--feature-gates="+LeaseGate+"="+strconv.FormatBool(gate),
	)
}

// driveNodeLifecycle stops node-b's renewals at NodeDies when knob "die" is
// 1 or 2, with 2 labels node-b's Lease at LeaseTouched, and keeps the run
// from settling before the controller must have marked node-b (deathDue).
func driveNodeLifecycle(_ context.Context, x *fuzz.Exec) error {
	die := x.Knob("die")
	if die == 0 {
		return nil
	}
	f := x.Value.(*nodes.Fleet)
	x.After(NodeDies, "node-b stops renewing its lease", func(context.Context) error { return f.Stop("node-b") })
	if die == 2 {
		x.After(LeaseTouched, "someone labels node-b's lease", func(ctx context.Context) error {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "node-b"}}
			patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"example.com/audited":"true"}}}`))
			return wrap(x.Direct.Patch(ctx, lease, patch), "label", "lease", corev1.NamespaceNodeLease+"/node-b")
		})
	}
	x.After(deathDue(x.Schedule), "wait out node-b's grace period", func(context.Context) error { return nil })
	return nil
}

// deathDue is, after the mark, when the controller must have marked node-b
// Unknown at the latest: a grace period and two monitor periods after the
// last moment it could have seen a renewal of node-b's Lease (node-b's
// death, the end of the lag, or a restart's new process, which starts its
// grace periods afresh).
func deathDue(s fuzz.Schedule) time.Duration {
	seen := max(NodeDies, s.LagEnd())
	for _, st := range s.Steps {
		if st.IsRestart() {
			seen = max(seen, st.End()+fuzz.RestartBudget/2)
		}
	}
	return seen + NodeGrace + 2*NodeMonitorPeriod
}

// readyOf is a node's Ready condition status, "" if it has none.
func readyOf(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// statusWrites are kube-controller-manager's acknowledged writes to a
// node's status, in order.
func statusWrites(tr trace.Trace, node string) []trace.Request {
	var out []trace.Request
	for _, r := range tr.Requests {
		if r.Client == Client && r.Resource == "nodes" && r.Subresource == "status" && r.Name == node && r.Code == 200 &&
			slices.Contains([]string{"update", "patch"}, r.Verb) {
			out = append(out, r)
		}
	}
	return out
}

// liveNodeUnknown: a node whose Lease was renewed throughout is Ready=True
// at the end. A node found otherwise is a finding only if the stand-in kept
// up until the controller's first write to its status; if it did not, the
// node did look dead for a moment, and the run is a harness error.
func liveNodeUnknown(ctx context.Context, x *fuzz.Exec, tr trace.Trace) error {
	f := x.Value.(*nodes.Fleet)
	var problems []string
	for _, st := range f.States() {
		name := st.Name
		if !st.Alive() {
			continue
		}
		var n corev1.Node
		if err := x.Direct.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return &fuzz.HarnessError{Err: wrap(err, "get", "node", name)}
		}
		if readyOf(&n) == corev1.ConditionTrue {
			continue
		}
		at := time.Now()
		if w := statusWrites(tr, name); len(w) > 0 {
			at = w[0].Start
		}
		if gap := f.Gap(name, st.Joined, at); gap >= NodeGrace/2 {
			return &fuzz.HarnessError{Err: fmt.Errorf("node %s: the kubelet stand-in went %v without renewing its lease before t%+.2fs (a loaded machine): it did look dead", name, gap.Round(time.Millisecond), at.Sub(x.Mark()).Seconds())}
		}
		problems = append(problems, fmt.Sprintf("node %s: Ready=%s since kube-controller-manager's status write at t%+.2fs, though its Lease was renewed every %v throughout (never more than %v apart): a live node marked unreachable",
			name, readyOf(&n), at.Sub(x.Mark()).Seconds(), LeaseRenewal, f.Gap(name, st.Joined, at).Round(time.Millisecond)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// deadNodeMissed: a node whose Lease stopped is Ready=Unknown a grace period
// and three monitor periods after the controller's Lease cache holds every
// write to Leases (after a relist, client-go's backoff can keep it stale
// well past the fault's window, and the gate rightly waits for it): it
// writes the marker Lease, waits until the controller has seen that write,
// then gives it until then. A run whose cache does not catch up within the
// execution's budget cannot be judged: a harness error.
func deadNodeMissed(ctx context.Context, x *fuzz.Exec, _ trace.Trace) error {
	st, _ := x.Value.(*nodes.Fleet).Get("node-b")
	if st.Alive() {
		return nil
	}
	died := st.Stopped
	var n corev1.Node
	if err := x.Direct.Get(ctx, client.ObjectKey{Name: "node-b"}, &n); err != nil {
		return &fuzz.HarnessError{Err: wrap(err, "get", "node", "node-b")}
	}
	if readyOf(&n) == corev1.ConditionUnknown {
		return nil
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: marker}}
	stamp := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"labels":{"stalefuzz.dev/judged":"%d"}}}`, time.Now().UnixNano())))
	if err := x.Direct.Patch(ctx, lease, stamp); err != nil {
		return &fuzz.HarnessError{Err: wrap(err, "label", "lease", corev1.NamespaceNodeLease+"/"+marker)}
	}
	limit := x.Mark().Add(fuzz.Budget - fuzz.StopBudget - 2*NodeGrace)
	wctx, cancel := context.WithDeadline(ctx, limit)
	defer cancel()
	obj := trace.Object{Group: coordinationv1.GroupName, Resource: "leases", Namespace: corev1.NamespaceNodeLease, Name: marker}
	if err := x.WaitForVersion(wctx, Client, obj, lease.ResourceVersion); err != nil {
		return &fuzz.HarnessError{Err: fmt.Errorf("node node-b: kube-controller-manager's Lease cache had not caught up by t%+.2fs, so its detection cannot be judged: %w", limit.Sub(x.Mark()).Seconds(), err)}
	}
	due := time.Now().Add(max(0, x.Mark().Add(deathDue(x.Schedule)).Sub(time.Now()), NodeGrace+3*NodeMonitorPeriod))
	for time.Now().Before(due) {
		time.Sleep(NodeMonitorPeriod)
		if err := x.Direct.Get(ctx, client.ObjectKey{Name: "node-b"}, &n); err != nil {
			return &fuzz.HarnessError{Err: wrap(err, "get", "node", "node-b")}
		}
		if readyOf(&n) == corev1.ConditionUnknown {
			return nil
		}
	}
	touched := ""
	if x.Knob("die") == 2 {
		touched = fmt.Sprintf(" (its Lease labelled, not renewed, at t%+.2fs)", LeaseTouched.Seconds())
	}
	return fmt.Errorf("node node-b: stopped renewing its Lease at t%+.2fs%s, still Ready=%s at t%+.2fs: kube-controller-manager never marked it Unknown",
		died.Sub(x.Mark()).Seconds(), touched, readyOf(&n), time.Since(x.Mark()).Seconds())
}
