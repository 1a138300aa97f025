package kcm

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// The node lifecycle controller's eviction settings in the zones scenario,
// their defaults scaled by 50 as its grace period is (NodeGrace):
// --node-eviction-rate 0.1 and --secondary-node-eviction-rate 0.01 nodes a
// second per zone; the zone thresholds are the defaults, unscaled.
const (
	// EvictionRate is --node-eviction-rate: NoExecute taints a second in a
	// zone whose state is Normal or FullDisruption (with a burst of one).
	EvictionRate = 5.0
	// SecondaryEvictionRate is --secondary-node-eviction-rate, for a zone
	// in PartialDisruption larger than LargeCluster nodes.
	SecondaryEvictionRate = 0.5
	// UnhealthyZone is --unhealthy-zone-threshold: a zone with more than
	// two not-Ready nodes and at least this share of them is in
	// PartialDisruption.
	UnhealthyZone = 0.55
	// LargeCluster is --large-cluster-size-threshold: a zone in
	// PartialDisruption of at most this many nodes gets no taints at all.
	LargeCluster = 50
)

// Zone workload timings, after the mark.
const (
	// OutageStarts is when an outage's first kubelet stops; each next
	// one stops OutageSpread later (real kubelets renew out of phase, so a
	// zone's Leases expire over one renewal interval, 10 s: 200 ms at this
	// scale; the spread also lets the first node of a zone be marked before
	// its zone's state changes, as in a cluster).
	OutageStarts = 200 * time.Millisecond
	OutageSpread = 50 * time.Millisecond
	// ChurnAt is when knob "churn" adds or removes a node.
	ChurnAt = 500 * time.Millisecond
)

// ZoneNodes are the nodes every zones execution starts with: four in
// zone-a (three of them not Ready make it PartialDisruption, 75 % ≥ 55 %)
// and two in zone-b.
var ZoneNodes = []nodes.Node{
	{Name: "a1", Zone: "zone-a"}, {Name: "a2", Zone: "zone-a"}, {Name: "a3", Zone: "zone-a"}, {Name: "a4", Zone: "zone-a"},
	{Name: "b1", Zone: "zone-b"}, {Name: "b2", Zone: "zone-b"},
}

// Joiner is the node knob "churn" = 1 adds to zone-b at ChurnAt; Leaver
// the node knob "churn" = 2 removes from zone-a then.
var (
	Joiner = nodes.Node{Name: "b3", Zone: "zone-b"}
	Leaver = "a4"
)

// Outage is one value of knob "outage": which kubelets stop, when, and
// when they come back with knob "back" = 1.
type Outage struct {
	Name string
	// Stops are the kubelets that stop, in order, at Start, then one each
	// OutageSpread.
	Stops []string
	Start time.Duration
	// Then are kubelets that stop later, from ThenAt, one each
	// OutageSpread: a second outage on top of the first.
	Then   []string
	ThenAt time.Duration
	// Back is when, with knob "back" = 1, the stopped kubelets come back
	// (in the order they stopped, one each OutageSpread), after the
	// controller had to mark them Unknown: the way back out.
	Back time.Duration
}

// stop is one kubelet stop of an Outage.
type stop struct {
	node string
	at   time.Duration
}

// stops are every kubelet stop of o, with its time.
func (o Outage) stops() []stop {
	var out []stop
	for i, n := range o.Stops {
		out = append(out, stop{n, o.Start + time.Duration(i)*OutageSpread})
	}
	for i, n := range o.Then {
		out = append(out, stop{n, o.ThenAt + time.Duration(i)*OutageSpread})
	}
	return out
}

// Outages are the values of knob "outage".
var Outages = []Outage{
	{Name: "none"},
	// zone-a in PartialDisruption: a small zone's taints stop.
	{Name: "three of zone-a's four", Stops: []string{"a1", "a2", "a3"}, Start: OutageStarts, Back: 2500 * time.Millisecond},
	// zone-b in FullDisruption while zone-a is Normal: taints go on at
	// the normal rate.
	{Name: "all of zone-b", Stops: []string{"b1", "b2"}, Start: OutageStarts, Back: 2500 * time.Millisecond},
	// Every zone in FullDisruption ("master disruption mode": a control
	// plane cut off from every node): no taints at all, and those already
	// put on removed.
	{Name: "every node", Stops: []string{"a1", "b1", "a2", "b2", "a3", "a4"}, Start: OutageStarts, Back: 2500 * time.Millisecond},
	// zone-b lost first, its nodes tainted at the normal rate, then the
	// rest (a cascading failure, or a zone outage followed by the control
	// plane's own partition): entering master disruption mode must remove
	// zone-b's taints.
	{Name: "zone-b, then every other node", Stops: []string{"b1", "b2"}, Start: OutageStarts,
		Then: []string{"a1", "a2", "a3", "a4"}, ThenAt: 900 * time.Millisecond, Back: 3300 * time.Millisecond},
}

// NodeZones is kube-controller-manager's node lifecycle controller (with
// LeaseGate as 1.37 ships it, on) over two zones of nodes that join, leave,
// stop renewing their Leases and come back during a run, under faults a
// real cluster produces on its Node and Lease events.
//
// Knobs: "outage" (Outages), "back" (0: the stopped kubelets stay down; 1:
// they come back at BackAt), "churn" (0: none; 1: Joiner joins; 2: Leaver
// is deleted, both at ChurnAt).
//
// Oracles, judged on the cluster as it ends, once kube-controller-manager's
// Node and Lease caches hold every write and the controller has had its
// grace period, monitor periods and eviction rate's time to act (and only
// while a node's state says otherwise, so a run that is right is judged at
// once):
//   - live-node-unknown: a node whose kubelet runs (never stopped, or back)
//     is Ready=True;
//   - live-node-tainted: such a node carries no taint of the controller's
//     (node.kubernetes.io/unreachable or not-ready): its pods would be
//     evicted, or never scheduled;
//   - dead-node-missed: a node whose kubelet stopped is Ready=Unknown;
//   - dead-node-untainted: such a node, in a zone the controller must
//     evict from (Normal, or FullDisruption while another zone is not), has
//     the NoExecute unreachable taint;
//   - tainted-in-full-disruption: when every zone is fully disrupted, no
//     node has that taint (the controller removes them and stops
//     evicting: a control plane cut off from every node must not evict the
//     whole cluster's pods).
//
// A run in which the stand-in fell behind (a renewal gap of half the grace
// period) is a harness error, as is one whose caches never caught up.
func NodeZones() fuzz.Scenario {
	names := []string{}
	for _, n := range append(slices.Clone(ZoneNodes), Joiner) {
		names = append(names, n.Name)
	}
	return fuzz.Scenario{
		Name:      "kcm-nodelifecycle-zones",
		Clients:   []string{Client},
		Resources: []string{"leases", "nodes"},
		Scopes:    map[string]string{"leases": corev1.NamespaceNodeLease, "nodes": fuzz.Cluster},
		Objects:   names,
		Space:     fuzz.Realistic,
		Bounds:    Bounds,
		Knobs:     []fuzz.Knob{{Name: "outage", Values: len(Outages)}, {Name: "back", Values: 2}, {Name: "churn", Values: 3}},
		Quiet:     300 * time.Millisecond,
		Setup:     setup,
		Start:     startZones,
		Drive:     driveZones,
		Seeds:     NodeZonesSeeds(),
		// kubernetes/kubernetes#111385, known and not fixed in 1.37.1:
		// under ordinary latency too (README.md), so every campaign would
		// end at it; it counts it and searches on. Regression runs and
		// the specs still judge it.
		Known: []fuzz.Known{{Oracle: "tainted-in-full-disruption", Message: "while every zone is fully disrupted",
			Why: "kubernetes/kubernetes#111385 (closed as rotten, not fixed in 1.37.1): a taint the controller applied after its monitor pass listed the Nodes (a concurrent tainter, or late Node events) is not removed when master disruption mode begins (README.md)"}},
		Checks: []fuzz.Check{
			{Name: "live-node-unknown", Fn: zoneCheck("live-node-unknown")},
			{Name: "live-node-tainted", Fn: zoneCheck("live-node-tainted")},
			{Name: "dead-node-missed", Fn: zoneCheck("dead-node-missed")},
			{Name: "dead-node-untainted", Fn: zoneCheck("dead-node-untainted")},
			{Name: "tainted-in-full-disruption", Fn: zoneCheck("tainted-in-full-disruption")},
		},
		SeedsOnlyFuzzing: true,
	}
}

// NodeZonesSeeds: for each outage, Node events and Lease events held for
// the longest window from their first and third events, each watch relisted
// at its first event, and a restart right after the controller's first node
// write.
func NodeZonesSeeds() []fuzz.Schedule {
	var out []fuzz.Schedule
	for outage := 1; outage < len(Outages); outage++ {
		one := func(st fuzz.Step) {
			st.Client = Client
			out = append(out, fuzz.Schedule{Knobs: map[string]int{"outage": outage}, Steps: []fuzz.Step{st}})
		}
		for _, res := range []string{"nodes", "leases"} {
			for _, n := range []int{1, 3} {
				one(fuzz.Step{Resource: res, Action: proxy.Hold, After: n, Length: Bounds.MaxLagEnd})
			}
			one(fuzz.Step{Resource: res, Action: proxy.Expire, Length: Bounds.MaxFaultEnd})
		}
		one(fuzz.Step{Resource: "nodes", Action: proxy.Freeze, Length: Bounds.MaxFaultEnd})
	}
	return out
}

// zones is one zones execution's state.
type zones struct {
	fleet *nodes.Fleet
	once  sync.Once
	// verdicts are the problems per oracle, judged once for every check.
	verdicts map[string][]string
	harness  error
}

func startZones(ctx context.Context, x *fuzz.Exec) error {
	z := &zones{fleet: &nodes.Fleet{Client: x.Direct, Renewal: LeaseRenewal, LeaseDuration: NodeGrace}}
	x.Value = z
	for _, n := range ZoneNodes {
		if err := z.fleet.Join(ctx, n); err != nil {
			return err
		}
	}
	if err := x.Direct.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: marker}}); err != nil {
		return wrap(err, "create", "lease", corev1.NamespaceNodeLease+"/"+marker)
	}
	x.Go("kubelet stand-ins", z.fleet.Run)
	return startControllerManager(ctx, x, "node-lifecycle-controller", []string{"leases", "nodes", "pods", "daemonsets"},
		"--node-monitor-period="+NodeMonitorPeriod.String(),
		"--node-monitor-grace-period="+NodeGrace.String(),
		"--node-startup-grace-period="+NodeGrace.String(),
		"--node-eviction-rate="+strconv.FormatFloat(EvictionRate, 'g', -1, 64),
		"--secondary-node-eviction-rate="+strconv.FormatFloat(SecondaryEvictionRate, 'g', -1, 64),
		"--unhealthy-zone-threshold="+strconv.FormatFloat(UnhealthyZone, 'g', -1, 64),
		"--large-cluster-size-threshold="+strconv.Itoa(LargeCluster),
		// Its client's rate limit scaled as its periods are: the defaults
		// (20 a second, a burst of 30) would let it write a 50th of what
		// it does in a real monitor period.
		"--kube-api-qps="+strconv.Itoa(20*50),
		"--kube-api-burst="+strconv.Itoa(30*50),
	)
}

func driveZones(_ context.Context, x *fuzz.Exec) error {
	z := x.Value.(*zones)
	outage := Outages[x.Knob("outage")]
	back := x.Knob("back") == 1
	churn := x.Knob("churn")
	stops := outage.stops()
	for i, st := range stops {
		if churn == 2 && st.node == Leaver {
			continue // it leaves first
		}
		x.After(st.at, "node "+st.node+"'s kubelet stops", func(context.Context) error { return z.fleet.Stop(st.node) })
		if back {
			x.After(outage.Back+time.Duration(i)*OutageSpread, "node "+st.node+"'s kubelet comes back", func(ctx context.Context) error {
				return z.fleet.Resume(ctx, st.node)
			})
		}
	}
	switch churn {
	case 1:
		x.After(ChurnAt, "node "+Joiner.Name+" joins "+Joiner.Zone, func(ctx context.Context) error { return z.fleet.Join(ctx, Joiner) })
	case 2:
		x.After(ChurnAt, "node "+Leaver+" is deleted", func(ctx context.Context) error { return z.fleet.Leave(ctx, Leaver) })
	}
	x.After(zonesDue(x.Schedule, outage), "wait out the grace periods and the eviction rate", func(context.Context) error { return nil })
	return nil
}

// zonesDue is, after the mark, when the controller must have done all it
// will: a grace period and two monitor periods after the last moment it
// could have seen a renewal of a stopped node's Lease (deathDue's rule),
// then one eviction per 1/EvictionRate for each stopped node.
func zonesDue(s fuzz.Schedule, o Outage) time.Duration {
	seen := s.LagEnd()
	stops := o.stops()
	for _, st := range stops {
		seen = max(seen, st.at)
	}
	for _, st := range s.Steps {
		if st.IsRestart() {
			seen = max(seen, st.End()+fuzz.RestartBudget/2)
		}
	}
	return seen + NodeGrace + 2*NodeMonitorPeriod + time.Duration(float64(len(stops))/EvictionRate*float64(time.Second))
}

// Taint keys the node lifecycle controller puts on nodes
// (pkg/controller/nodelifecycle, UnreachableTaintTemplate,
// NotReadyTaintTemplate, and their NoSchedule twins).
const (
	unreachable = corev1.TaintNodeUnreachable
	notReady    = corev1.TaintNodeNotReady
)

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == key && (effect == "" || t.Effect == effect)
	})
}

func controllerTaints(n *corev1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		if t.Key == unreachable || t.Key == notReady {
			out = append(out, t.Key+":"+string(t.Effect))
		}
	}
	return out
}

// zoneState is the node lifecycle controller's ComputeZoneState over the
// nodes' true states: "Normal", "PartialDisruption" or "FullDisruption".
func zoneState(dead, ready int) string {
	switch {
	case ready == 0 && dead > 0:
		return "FullDisruption"
	case dead > 2 && float64(dead)/float64(dead+ready) >= UnhealthyZone:
		return "PartialDisruption"
	}
	return "Normal"
}

// judge returns the problems per oracle of the nodes as they are now.
func (z *zones) judge(ctx context.Context, x *fuzz.Exec) (map[string][]string, error) {
	out := map[string][]string{}
	states := z.fleet.States()
	got := map[string]*corev1.Node{}
	deadIn, readyIn := map[string]int{}, map[string]int{}
	for _, s := range states {
		if !s.Present() {
			continue
		}
		var n corev1.Node
		if err := x.Direct.Get(ctx, client.ObjectKey{Name: s.Name}, &n); err != nil {
			return nil, wrap(err, "get", "node", s.Name)
		}
		got[s.Name] = &n
		if s.Alive() {
			readyIn[s.Zone]++
		} else {
			deadIn[s.Zone]++
		}
	}
	allFull := len(got) > 0
	zonesOf := map[string]string{}
	for zone := range mergeKeys(deadIn, readyIn) {
		zonesOf[zone] = zoneState(deadIn[zone], readyIn[zone])
		if zonesOf[zone] != "FullDisruption" {
			allFull = false
		}
	}
	t := func(at time.Time) string { return fmt.Sprintf("t%+.2fs", at.Sub(x.Mark()).Seconds()) }
	for _, s := range states {
		n := got[s.Name]
		if n == nil {
			continue
		}
		if s.Alive() {
			since := s.Joined
			if !s.Resumed.IsZero() {
				since = s.Resumed
			}
			if r := readyOf(n); r != corev1.ConditionTrue {
				if gap := z.fleet.Gap(s.Name, since, time.Now()); gap >= NodeGrace/2 {
					return nil, &fuzz.HarnessError{Err: fmt.Errorf("node %s: the kubelet stand-in went %v without renewing its lease (a loaded machine): it did look dead", s.Name, gap.Round(time.Millisecond))}
				}
				out["live-node-unknown"] = append(out["live-node-unknown"], fmt.Sprintf("node %s (%s): Ready=%s though its kubelet runs and renews its Lease every %v (%s): a live node marked unreachable", s.Name, s.Zone, r, LeaseRenewal, lifeOf(s, t)))
			}
			if taints := controllerTaints(n); len(taints) > 0 {
				out["live-node-tainted"] = append(out["live-node-tainted"], fmt.Sprintf("node %s (%s): tainted %s though its kubelet runs (%s) and it is Ready=%s: its pods are evicted or never scheduled", s.Name, s.Zone, strings.Join(taints, ", "), lifeOf(s, t), readyOf(n)))
			}
			continue
		}
		if r := readyOf(n); r != corev1.ConditionUnknown {
			out["dead-node-missed"] = append(out["dead-node-missed"], fmt.Sprintf("node %s (%s): its kubelet stopped at %s, still Ready=%s: never marked Unknown", s.Name, s.Zone, t(s.Stopped), r))
		}
		switch zs := zonesOf[s.Zone]; {
		case allFull:
			if hasTaint(n, unreachable, corev1.TaintEffectNoExecute) {
				out["tainted-in-full-disruption"] = append(out["tainted-in-full-disruption"], fmt.Sprintf("node %s (%s): tainted %s:NoExecute while every zone is fully disrupted (every kubelet stopped, the last at %s): the controller stops evictions and removes these taints then, so that a control plane cut off from every node does not evict every pod", s.Name, s.Zone, unreachable, t(lastStop(states))))
			}
		case zs == "Normal" || zs == "FullDisruption":
			if !hasTaint(n, unreachable, corev1.TaintEffectNoExecute) {
				out["dead-node-untainted"] = append(out["dead-node-untainted"], fmt.Sprintf("node %s (%s, %s, another zone not): its kubelet stopped at %s, Ready=%s, but no %s:NoExecute taint: its pods are never evicted (the rate is %g a second)", s.Name, s.Zone, zs, t(s.Stopped), readyOf(n), unreachable, EvictionRate))
			}
		}
	}
	return out, nil
}

func lifeOf(s nodes.State, t func(time.Time) string) string {
	if s.Resumed.IsZero() {
		return "never stopped"
	}
	return "stopped at " + t(s.Stopped) + ", back at " + t(s.Resumed)
}

func lastStop(states []nodes.State) time.Time {
	var last time.Time
	for _, s := range states {
		if s.Stopped.After(last) {
			last = s.Stopped
		}
	}
	return last
}

func mergeKeys(a, b map[string]int) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// verdict judges the run once for every check: at once if the nodes are
// right; otherwise, once kube-controller-manager's caches hold every write
// (the marker Lease and each node's current version seen), again every
// monitor period until the controller's time to act is up.
func (z *zones) verdict(ctx context.Context, x *fuzz.Exec) (map[string][]string, error) {
	z.once.Do(func() {
		v, err := z.judge(ctx, x)
		if err != nil || len(v) == 0 {
			z.verdicts, z.harness = v, err
			return
		}
		if err := z.catchUp(ctx, x); err != nil {
			z.harness = err
			return
		}
		due := time.Now().Add(max(0, x.Mark().Add(zonesDue(x.Schedule, Outages[x.Knob("outage")])).Sub(time.Now()), NodeGrace+3*NodeMonitorPeriod))
		for {
			if v, err = z.judge(ctx, x); err != nil || len(v) == 0 || !time.Now().Before(due) {
				z.verdicts, z.harness = v, err
				return
			}
			time.Sleep(NodeMonitorPeriod)
		}
	})
	return z.verdicts, z.harness
}

// catchUp waits until kube-controller-manager has seen a fresh write to the
// marker Lease and every present node at its current version.
func (z *zones) catchUp(ctx context.Context, x *fuzz.Exec) error {
	limit := x.Mark().Add(fuzz.Budget - fuzz.StopBudget - 2*NodeGrace)
	wctx, cancel := context.WithDeadline(ctx, limit)
	defer cancel()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: marker}}
	stamp := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"labels":{"stalefuzz.dev/judged":"%d"}}}`, time.Now().UnixNano())))
	if err := x.Direct.Patch(ctx, lease, stamp); err != nil {
		return &fuzz.HarnessError{Err: wrap(err, "label", "lease", corev1.NamespaceNodeLease+"/"+marker)}
	}
	waitFor := []struct {
		obj trace.Object
		rv  string
	}{{trace.Object{Group: coordinationv1.GroupName, Resource: "leases", Namespace: corev1.NamespaceNodeLease, Name: marker}, lease.ResourceVersion}}
	for _, s := range z.fleet.States() {
		if !s.Present() {
			continue
		}
		var n corev1.Node
		if err := x.Direct.Get(ctx, client.ObjectKey{Name: s.Name}, &n); err != nil {
			return &fuzz.HarnessError{Err: wrap(err, "get", "node", s.Name)}
		}
		waitFor = append(waitFor, struct {
			obj trace.Object
			rv  string
		}{trace.Object{Resource: "nodes", Name: s.Name}, n.ResourceVersion})
	}
	for _, w := range waitFor {
		if err := x.WaitForVersion(wctx, Client, w.obj, w.rv); err != nil {
			return &fuzz.HarnessError{Err: fmt.Errorf("kube-controller-manager's caches had not caught up by t%+.2fs, so the nodes cannot be judged: %w", limit.Sub(x.Mark()).Seconds(), err)}
		}
	}
	return nil
}

func zoneCheck(oracle string) func(ctx context.Context, x *fuzz.Exec, _ trace.Trace) error {
	return func(ctx context.Context, x *fuzz.Exec, _ trace.Trace) error {
		v, err := x.Value.(*zones).verdict(ctx, x)
		if err != nil {
			return err
		}
		if p := v[oracle]; len(p) > 0 {
			return fmt.Errorf("%s", strings.Join(p, "; "))
		}
		return nil
	}
}
