package target

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy/controlplane"
)

// ControllerManagerClient is the proxy client kube-controller-manager runs
// as when Builtins name controllers.
const ControllerManagerClient = "kube-controller-manager"

// SchedulerClient is the proxy client kube-scheduler runs as when
// Builtins.Scheduler is set.
const SchedulerClient = "kube-scheduler"

// NodeName is the Node kube-scheduler binds Pods to when Builtins.Scheduler
// is set.
const NodeName = "stalefuzz"

// Builtins are what a cluster runs beside the controllers under test and
// envtest does not: kube-controller-manager's controllers, kube-scheduler,
// and a kubelet stand-in.
type Builtins struct {
	// Controllers are kube-controller-manager's --controllers names
	// ("job", "replicaset", "deployment", "statefulset",
	// "garbagecollector", ...). It runs as the proxy client
	// ControllerManagerClient, so that faults can act on it too, with
	// leader election off, after the namespace's default ServiceAccount is
	// made (the serviceaccount controller's work: admission refuses a Pod
	// without it). A run settles only once the objects of the workload
	// controllers named (StatefulSets, ReplicaSets, Deployments,
	// DaemonSets, Jobs) in the execution's namespace are kstatus Current
	// or Failed, within its settle budget (fuzz.Scenario.AwaitCurrent).
	// Zero: no kube-controller-manager.
	Controllers []string `yaml:"controllers"`
	// ControllerManager is the kube-controller-manager release to run, as
	// k8s.io/kubernetes@vX.Y.Z (the form a controller's go is pinned in, so
	// that hack/recall.sh's version swap reaches it). Zero: the release the
	// control plane is (controlplane.KubernetesVersion), which make assets
	// builds. Another release runs the binary hack/kcm-version.sh builds
	// and caches beside make assets' one; without it the target is refused,
	// naming that command. It is version skew against the pinned apiserver:
	// Kubernetes supports kube-controller-manager one minor release older
	// than kube-apiserver. kube-scheduler stays the pinned release.
	ControllerManager string `yaml:"controllerManager"`
	// Flags are more kube-controller-manager flags (feature gates:
	// "--feature-gates=X=${gate}"). ${knob} and ${namespace} are replaced.
	Flags []string `yaml:"flags"`
	// Watches are the resources whose watches kube-controller-manager must
	// have synced before the workload starts ("jobs", "pods").
	Watches []string `yaml:"watches"`
	// Scheduler, when set, runs kube-scheduler (make assets builds it
	// beside kube-controller-manager, from the same modules) in each
	// execution, as the proxy client SchedulerClient (faults act on it too),
	// with leader election off and no listener, and waits for its Pods and
	// Nodes watches to sync before the workload starts. It binds Pods to one
	// Node, NodeName: Ready, untainted, with room for any Pod, made by the
	// first execution in a control plane and kept for its life (it is
	// cluster-scoped, and every execution schedules onto it). No kubelet
	// renews its Lease: kube-controller-manager's nodelifecycle controller
	// would mark it NotReady once its grace period (longer than an
	// execution) ran out. With Scheduler set, the kubelet stand-in runs a
	// Pod only once it is bound. Zero: no scheduler, and the stand-in runs
	// every Pod as it appears, unbound.
	Scheduler bool `yaml:"scheduler"`
	// Kubelet, when set, stands in for the kubelet: every Pod of the
	// execution's namespace is marked Running and Ready as it appears (as
	// it is bound, with Scheduler), no container running, straight to the
	// apiserver (not through the proxy).
	Kubelet *Kubelet `yaml:"kubelet"`
}

// workloadKinds are the kinds kube-controller-manager's workload
// controllers drive to kstatus Current, by controller name (its
// --controllers name without "-controller", which it accepts too).
var workloadKinds = map[string]schema.GroupVersionKind{
	"statefulset": {Group: "apps", Version: "v1", Kind: "StatefulSet"},
	"replicaset":  {Group: "apps", Version: "v1", Kind: "ReplicaSet"},
	"deployment":  {Group: "apps", Version: "v1", Kind: "Deployment"},
	"daemonset":   {Group: "apps", Version: "v1", Kind: "DaemonSet"},
	"job":         {Group: "batch", Version: "v1", Kind: "Job"},
}

// awaitCurrent are the kinds of the workload controllers b runs ("*"
// runs them all, "-name" none of that name), in a fixed order: a run waits
// for their objects to be kstatus Current before it settles
// (fuzz.Scenario.AwaitCurrent). kube-controller-manager's controllers
// requeue a sync that failed, with their workqueue's rate limiter and no
// request the trace could show; since 1.36 (the StaleControllerConsistency
// gates, on by default) a sync fails whenever their informer is older than
// their own last write ("Error syncing StatefulSet, requeuing" err="read
// version: 350 is not as new as written version: 353", even in no-fault
// runs on a loaded machine), which late events make common.
func (b *Builtins) awaitCurrent() []schema.GroupVersionKind {
	on := map[string]bool{}
	for _, c := range b.Controllers {
		name := strings.TrimSuffix(strings.TrimPrefix(c, "-"), "-controller")
		switch {
		case c == "*":
			for k := range workloadKinds {
				if _, off := on[k]; !off {
					on[k] = true
				}
			}
		case strings.HasPrefix(c, "-"):
			on[name] = false
		default:
			on[name] = true
		}
	}
	var out []schema.GroupVersionKind
	for _, name := range slices.Sorted(maps.Keys(workloadKinds)) {
		if on[name] {
			out = append(out, workloadKinds[name])
		}
	}
	return out
}

// startBuiltins starts kube-controller-manager and the kubelet stand-in
// for one execution.
func (t *Target) startBuiltins(ctx context.Context, x *fuzz.Exec) error {
	b := t.Builtins
	if b == nil || (len(b.Controllers) == 0 && !b.Scheduler) {
		return nil
	}
	// The serviceaccount controller's work, which envtest does not do:
	// ServiceAccount admission refuses a Pod without its service account.
	cs, err := kubernetes.NewForConfig(x.DirectConfig())
	if err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts(x.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("unable to create serviceaccount %s/default: %w", x.Namespace, err)
	}
	if b.Scheduler {
		if err := startScheduler(ctx, x, cs); err != nil {
			return err
		}
	}
	if len(b.Controllers) == 0 {
		return nil
	}
	bin := b.controllerManagerBinary()
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kube-controller-manager not found at %s (%s): %w", bin, b.controllerManagerHint(), err)
	}
	kubeconfig, err := x.Kubeconfig(ControllerManagerClient)
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(b.Controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--v=2",
	}
	for _, f := range b.Flags {
		args = append(args, substitute(x, t.Knobs, f))
	}
	if err := x.Command(ControllerManagerClient, exec.Command(bin, args...)); err != nil {
		return fmt.Errorf("unable to start kube-controller-manager: %w", err)
	}
	for _, res := range b.Watches {
		if err := x.WaitForWatch(ctx, ControllerManagerClient, res); err != nil {
			return err
		}
	}
	return nil
}

// ControllerManagerModule is the module a Builtins.ControllerManager pins.
const ControllerManagerModule = "k8s.io/kubernetes"

// controllerManagerVersion is the release ControllerManager pins ("" for
// the control plane's own).
func (b *Builtins) controllerManagerVersion() string {
	_, v, _ := strings.Cut(b.ControllerManager, "@")
	return v
}

// controllerManagerBinary is the kube-controller-manager b runs.
func (b *Builtins) controllerManagerBinary() string {
	return controlplane.ControllerManagerBinaryAt(b.controllerManagerVersion())
}

// controllerManagerHint says how to get the kube-controller-manager b runs.
func (b *Builtins) controllerManagerHint() string {
	if v := b.controllerManagerVersion(); v != "" && v != controlplane.KubernetesVersion {
		return fmt.Sprintf("build it with `hack/kcm-version.sh %s` in a stalefuzz checkout, or set STALEFUZZ_KUBE_CONTROLLER_MANAGER", v)
	}
	return "run `make assets` in a stalefuzz checkout, or set STALEFUZZ_KUBE_CONTROLLER_MANAGER"
}

// builtinBinaries checks that the binaries the builtins run are there.
func (t *Target) builtinBinaries() error {
	b := t.Builtins
	if b == nil {
		return nil
	}
	var errs []error
	if len(b.Controllers) > 0 {
		if bin := b.controllerManagerBinary(); !fileExists(bin) {
			errs = append(errs, fmt.Errorf("target %s: builtins.controllers: kube-controller-manager not found at %s (%s)", t.Name, bin, b.controllerManagerHint()))
		}
	}
	if b.Scheduler {
		if bin := controlplane.SchedulerBinary(); !fileExists(bin) {
			errs = append(errs, fmt.Errorf("target %s: builtins.scheduler: kube-scheduler not found at %s (run `make assets` in a stalefuzz checkout, or set STALEFUZZ_KUBE_SCHEDULER)", t.Name, bin))
		}
	}
	return errors.Join(errs...)
}

// startScheduler makes the Node, if this control plane has none yet, and
// starts kube-scheduler for one execution.
func startScheduler(ctx context.Context, x *fuzz.Exec, cs kubernetes.Interface) error {
	if err := ensureNode(ctx, cs); err != nil {
		return err
	}
	bin := controlplane.SchedulerBinary()
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kube-scheduler not found at %s (run `make assets`, or set STALEFUZZ_KUBE_SCHEDULER): %w", bin, err)
	}
	kubeconfig, err := x.Kubeconfig(SchedulerClient)
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=2",
	}
	if err := x.Command(SchedulerClient, exec.Command(bin, args...)); err != nil {
		return fmt.Errorf("unable to start kube-scheduler: %w", err)
	}
	for _, res := range []string{"nodes", "pods"} {
		if err := x.WaitForWatch(ctx, SchedulerClient, res); err != nil {
			return err
		}
	}
	return nil
}

// ensureNode makes the Node kube-scheduler binds Pods to, Ready and with
// room for any Pod, unless it is there already.
func ensureNode(ctx context.Context, cs kubernetes.Interface) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:   NodeName,
			Labels: map[string]string{corev1.LabelHostname: NodeName, corev1.LabelOSStable: "linux"},
		}}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("unable to get or create node %s: %w", NodeName, err)
	}
	if len(n.Spec.Taints) > 0 {
		// The apiserver's NodeTaint admission taints a new Node
		// node.kubernetes.io/not-ready, which the nodelifecycle
		// controller removes once the Node is Ready: its work here.
		n.Spec.Taints = nil
		if n, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("unable to remove the taints of node %s: %w", NodeName, err)
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("10000"),
	}
	n.Status.Capacity, n.Status.Allocatable = room, room
	n.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "stalefuzz's kubelet stand-in", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("unable to mark node %s Ready: %w", NodeName, err)
	}
	return nil
}
