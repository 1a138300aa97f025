package kcm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/controlplane"
)

// Client is the proxy client kube-controller-manager runs as.
const Client = "kube-controller-manager"

// Version is the kube-controller-manager release under test: the control
// plane's.
const Version = controlplane.KubernetesVersion

// Controller is one of kube-controller-manager's workload controllers.
type Controller string

// The controllers under test.
const (
	Job         Controller = "Job"
	ReplicaSet  Controller = "ReplicaSet"
	DaemonSet   Controller = "DaemonSet"
	StatefulSet Controller = "StatefulSet"
)

// Controllers lists them in the order the truth table has them.
var Controllers = []Controller{Job, ReplicaSet, DaemonSet, StatefulSet}

// Gate is the KEP-5647 feature gate of the controller:
// StaleControllerConsistency<Kind>.
func (c Controller) Gate() string { return "StaleControllerConsistency" + string(c) }

// flag is the controller's name for --controllers.
func (c Controller) flag() string {
	return map[Controller]string{Job: "job-controller", ReplicaSet: "replicaset-controller",
		DaemonSet: "daemonset-controller", StatefulSet: "statefulset-controller"}[c]
}

// Binary returns the kube-controller-manager hack/assets.sh built:
// $STALEFUZZ_KUBE_CONTROLLER_MANAGER, else next to kube-apiserver.
func Binary() string { return controlplane.ControllerManagerBinary() }

// Bounds leave room, within the 8 s budget (fuzz.Bounds.fits), for lag
// windows up to 3.5 s, long enough to cover two of the Job controller's
// syncs (it batches pod events for 1 s, SyncJobBatchPeriod), and for one
// relist or restart whose window ends by 1.8 s (client-go's relist backoff or
// a restart, then a lagging apiserver up to 0.1 s behind).
var Bounds = fuzz.Bounds{MaxStart: time.Second, MaxLength: 3500 * time.Millisecond, MaxLagEnd: 3500 * time.Millisecond,
	MaxDelay: 100 * time.Millisecond, MaxFaultEnd: 1800 * time.Millisecond}

// Scenario is kube-controller-manager's controller c with its KEP-5647 gate
// on or off, under faults a real cluster produces (fuzz.Realistic).
func Scenario(c Controller, gate bool) fuzz.Scenario {
	w := workloads[c]
	state := "off"
	if gate {
		state = "on"
	}
	knownBug := ""
	if c == Job && !gate {
		// README.md: the Job controller's own status writes unseen, it
		// counts a finished pod nowhere and creates one the spec does not
		// allow (what StaleControllerConsistencyJob prevents).
		knownBug = "with StaleControllerConsistencyJob off, a Job whose own status writes are unseen creates a pod its spec does not allow"
	}
	return fuzz.Scenario{
		KnownBug:  knownBug,
		Name:      fmt.Sprintf("kcm-%s-gate-%s", lower(c), state),
		Clients:   []string{Client},
		Resources: w.resources,
		Space:     fuzz.Realistic,
		Bounds:    Bounds,
		Knobs:     w.knobs,
		// Longer than the controller's retry: the Job controller batches
		// pod events for 1 s and backs off 1 s after an error; the others
		// retry within milliseconds (workqueue's 5 ms doubling).
		Quiet:            w.quiet,
		Setup:            setup,
		Start:            func(ctx context.Context, x *fuzz.Exec) error { return start(ctx, x, c, gate) },
		Drive:            func(ctx context.Context, x *fuzz.Exec) error { return w.drive(ctx, x, x.Value.(*run)) },
		Seeds:            Seeds(c),
		SeedsOnlyFuzzing: true,
		Checks: []fuzz.Check{
			{Name: "safety", Fn: safety},
			{Name: "convergence", Fn: convergence},
		},
	}
}

// Seeds are the same generic, positional schedules for every controller,
// derived from nothing but the resources it watches, with every knob at
// zero: each resource's events held for the rest of the longest window from
// each of its first four events on (the object's creation, then the
// controller's first writes), each resource's watch relisted (410 Gone) at
// its first and second event, and a restart right after the controller's
// first and second pod create. They tell the mutator where in the sequence
// of events a fault can sit, not which one matters; STALEFUZZ_NO_SEEDS=1
// leaves them out.
func Seeds(c Controller) []fuzz.Schedule {
	one := func(st fuzz.Step) fuzz.Schedule {
		st.Client = Client
		knobs := map[string]int{}
		for _, k := range workloads[c].knobs {
			knobs[k.Name] = 0
		}
		return fuzz.Schedule{Knobs: knobs, Steps: []fuzz.Step{st}}
	}
	var out []fuzz.Schedule
	for n := 1; n <= 4; n++ {
		for _, res := range workloads[c].resources {
			out = append(out, one(fuzz.Step{Resource: res, Action: proxy.Hold, After: n, Length: Bounds.MaxLagEnd}))
		}
	}
	for n := 1; n <= 2; n++ {
		for _, res := range workloads[c].resources {
			out = append(out, one(fuzz.Step{Resource: res, Action: proxy.Expire, After: n - 1, Length: Bounds.MaxFaultEnd}))
		}
		out = append(out, one(fuzz.Step{Resource: "pods", Verbs: []string{"create"}, Subresource: "-", Action: proxy.Freeze, After: n - 1, Length: Bounds.MaxFaultEnd}))
	}
	return out
}

func lower(c Controller) string {
	b := []byte(string(c))
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			b[i] = ch + 'a' - 'A'
		}
	}
	return string(b)
}

// fixture remembers, for the process, which namespaces and nodes earlier
// executions used, so that the next one removes them before its
// kube-controller-manager (whose informers are cluster wide) starts.
type fixture struct {
	mu    sync.Mutex
	dirty []string // namespaces
}

func setup(context.Context, string) (any, func() error, error) {
	if _, err := os.Stat(Binary()); err != nil {
		return nil, nil, fmt.Errorf("kube-controller-manager %s not found at %s (run `make assets`, or set STALEFUZZ_KUBE_CONTROLLER_MANAGER): %w", Version, Binary(), err)
	}
	return &fixture{}, func() error { return nil }, nil
}

// run is one execution's state (fuzz.Exec.Value).
type run struct {
	c       Controller
	cs      *kubernetes.Clientset
	hist    *history
	kubelet *kubelet
}

// start cleans up after earlier executions, prepares the namespace, starts
// recording its history and standing in for the kubelet, and starts
// kube-controller-manager for the controller under test.
func start(ctx context.Context, x *fuzz.Exec, c Controller, gate bool) error {
	cs, err := kubernetes.NewForConfig(x.DirectConfig())
	if err != nil {
		return fmt.Errorf("unable to create a clientset: %w", err)
	}
	fx := x.Fixture().(*fixture)
	fx.mu.Lock()
	dirty := fx.dirty
	fx.dirty = []string{x.Namespace}
	fx.mu.Unlock()
	for _, ns := range dirty {
		if err := cleanUp(ctx, cs, ns); err != nil {
			return err
		}
	}
	// ServiceAccount admission refuses pods without one, and no token
	// controller runs to make it.
	if _, err := cs.CoreV1().ServiceAccounts(x.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("unable to create serviceaccount %s/default: %w", x.Namespace, err)
	}
	r := &run{c: c, cs: cs}
	x.Value = r
	w := workloads[c]
	if w.prepare != nil {
		if err := w.prepare(ctx, x, r); err != nil {
			return err
		}
	}
	if r.hist, err = record(ctx, x, r, w); err != nil {
		return err
	}

	synced := w.synced
	if synced == nil {
		synced = w.resources
	}
	return startControllerManager(ctx, x, c.flag(), synced, "--feature-gates="+c.Gate()+"="+strconv.FormatBool(gate))
}

// startControllerManager starts kube-controller-manager as Client, with only
// the named controller and the given flags, no leader election, no serving
// port and its log in the execution's (Result.Logs, and a finding's .log
// file), and waits until its watches of the synced resources have synced.
func startControllerManager(ctx context.Context, x *fuzz.Exec, controller string, synced []string, flags ...string) error {
	kubeconfig, err := x.Kubeconfig(Client)
	if err != nil {
		return err
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + controller,
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--v=2",
	}, flags...)
	cmd := exec.Command(Binary(), args...)
	if err := x.Command(Client, cmd); err != nil {
		return err
	}
	for _, res := range synced {
		if err := x.WaitForWatch(ctx, Client, res); err != nil {
			return err
		}
	}
	return nil
}

// cleanUp removes what an earlier execution left in ns: its workloads, its
// pods (finalizers stripped: no Job controller runs to remove them) and its
// nodes.
func cleanUp(ctx context.Context, cs *kubernetes.Clientset, ns string) error {
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	all := metav1.ListOptions{}
	errs := []error{
		cs.BatchV1().Jobs(ns).DeleteCollection(ctx, orphan(), all),
		cs.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, orphan(), all),
		cs.AppsV1().DaemonSets(ns).DeleteCollection(ctx, orphan(), all),
		cs.AppsV1().StatefulSets(ns).DeleteCollection(ctx, orphan(), all),
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, all)
	errs = append(errs, err)
	if err == nil {
		for _, p := range pods.Items {
			if len(p.Finalizers) > 0 {
				_, err := cs.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				if !apierrors.IsNotFound(err) {
					errs = append(errs, err)
				}
			}
		}
	}
	errs = append(errs,
		cs.CoreV1().Pods(ns).DeleteCollection(ctx, now, all),
		cs.CoreV1().Nodes().DeleteCollection(ctx, now, metav1.ListOptions{LabelSelector: nodeLabel + "=" + ns}),
	)
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("unable to clean up namespace %s after its execution: %w", ns, err)
		}
	}
	return nil
}

func orphan() metav1.DeleteOptions {
	p := metav1.DeletePropagationOrphan
	return metav1.DeleteOptions{PropagationPolicy: &p, GracePeriodSeconds: new(int64)}
}
