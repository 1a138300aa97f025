package kcm

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// workloadName names the one workload object every execution creates.
const workloadName = "app"

// nodeLabel marks the Nodes an execution made, with its namespace.
const nodeLabel = "stalefuzz.io/namespace"

// Step spaces the times a knob can choose for a workload action.
const Step = 400 * time.Millisecond

// workload is what differs between the controllers under test.
type workload struct {
	kind  string
	group string // the workload's API group
	// resources are the namespaced resources lag steps pick among; the
	// first is the workload's own.
	resources []string
	// synced are the resources kube-controller-manager must have synced
	// before the workload starts. Zero: resources.
	synced []string
	knobs  []fuzz.Knob
	quiet  time.Duration

	prepare func(ctx context.Context, x *fuzz.Exec, r *run) error // before kube-controller-manager starts
	drive   func(ctx context.Context, x *fuzz.Exec, r *run) error
	watch   func(ctx context.Context, r *run, ns, rv string) (watch.Interface, error)
	// succeedAfter says when the kubelet stand-in marks the nth pod created
	// (from 0) Succeeded, after it is Running; false: never.
	succeedAfter func(x *fuzz.Exec, n int) (time.Duration, bool)

	// judgeCreate judges a pod creation, judgePods any other pod event and
	// judgeWorkload a workload event, on the state right after it; "" is
	// fine.
	judgeCreate   func(st *replay, p *corev1.Pod) string
	judgePods     func(st *replay) string
	judgeWorkload func(st *replay) string
	converged     func(ctx context.Context, x *fuzz.Exec, r *run, pods []corev1.Pod) error
}

func none(*replay) string { return "" }

var labels = map[string]string{"app": workloadName}

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
		},
	}
}

var workloads = map[Controller]workload{
	Job: {
		kind:      "Job",
		group:     "batch",
		resources: []string{"jobs", "pods"},
		// finish: the first pod succeeds finish×Step after it runs; rest:
		// the others never succeed (0) or do 1.5 s after they run (1).
		knobs: []fuzz.Knob{{Name: "finish", Values: 4}, {Name: "rest", Values: 2}},
		// The Job controller batches pod events for 1 s (SyncJobBatchPeriod)
		// and retries a failed sync after 1 s: a Job controller that will
		// act again is never called settled.
		quiet: 1200 * time.Millisecond,
		drive: func(ctx context.Context, x *fuzz.Exec, r *run) error {
			tpl := podTemplate()
			tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
			j := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: workloadName, Namespace: x.Namespace},
				Spec:       batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), Template: tpl},
			}
			_, err := r.cs.BatchV1().Jobs(x.Namespace).Create(ctx, j, metav1.CreateOptions{})
			return wrap(err, "create", "job", x.Namespace)
		},
		watch: func(ctx context.Context, r *run, ns, rv string) (watch.Interface, error) {
			return r.cs.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		},
		succeedAfter: func(x *fuzz.Exec, n int) (time.Duration, bool) {
			if n == 0 {
				return time.Duration(x.Knob("finish")) * Step, true
			}
			return 1500 * time.Millisecond, x.Knob("rest") == 1
		},
		judgeCreate: func(st *replay, p *corev1.Pod) string {
			j := st.workload.(*batchv1.Job)
			par, comp := *j.Spec.Parallelism, *j.Spec.Completions
			allowed := min(par, comp-int32(len(st.succeeded)))
			if n := len(st.livePods()); int32(n) > allowed {
				return fmt.Sprintf("%d live pod(s) of job %s (%s); the spec allowed %d: parallelism %d, completions %d, %d pod(s) already succeeded (%s)",
					n, workloadName, names(st.livePods()), allowed, par, comp, len(st.succeeded), setNames(st.succeeded))
			}
			return ""
		},
		judgePods: func(st *replay) string {
			j := st.workload.(*batchv1.Job)
			if n := int32(len(st.succeeded)); n > *j.Spec.Completions {
				return fmt.Sprintf("%d pods of job %s succeeded (%s); completions is %d", n, workloadName, setNames(st.succeeded), *j.Spec.Completions)
			}
			return ""
		},
		judgeWorkload: func(st *replay) string {
			j := st.workload.(*batchv1.Job)
			if j.Status.Succeeded > *j.Spec.Completions {
				return fmt.Sprintf("job %s status.succeeded is %d; completions is %d", workloadName, j.Status.Succeeded, *j.Spec.Completions)
			}
			return ""
		},
		converged: func(ctx context.Context, x *fuzz.Exec, r *run, pods []corev1.Pod) error {
			j, err := r.cs.BatchV1().Jobs(x.Namespace).Get(ctx, workloadName, metav1.GetOptions{})
			if err != nil {
				return wrap(err, "get", "job", x.Namespace)
			}
			var active, succeeded int32
			for i := range pods {
				switch {
				case pods[i].Status.Phase == corev1.PodSucceeded:
					succeeded++
				case live(&pods[i]):
					active++
				}
			}
			if j.Status.Active != active || j.Status.Succeeded != succeeded {
				return fmt.Errorf("job %s/%s: status.active %d, status.succeeded %d; its pods: %d live, %d succeeded",
					x.Namespace, workloadName, j.Status.Active, j.Status.Succeeded, active, succeeded)
			}
			return nil
		},
	},

	ReplicaSet: {
		kind:      "ReplicaSet",
		group:     "apps",
		resources: []string{"replicasets", "pods"},
		// scale: none, to 4 at t+Step, to 1 at t+Step, to 3 at t+2×Step;
		// kill: someone else deletes a live pod at t+kill×Step.
		knobs: []fuzz.Knob{{Name: "scale", Values: 4}, {Name: "kill", Values: 4}},
		quiet: 500 * time.Millisecond,
		drive: func(ctx context.Context, x *fuzz.Exec, r *run) error {
			rs := &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: workloadName, Namespace: x.Namespace},
				Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: podTemplate()},
			}
			if _, err := r.cs.AppsV1().ReplicaSets(x.Namespace).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
				return wrap(err, "create", "replicaset", x.Namespace)
			}
			scaleKnob(x, r, "replicasets")
			killKnob(x, r, "")
			return nil
		},
		watch: func(ctx context.Context, r *run, ns, rv string) (watch.Interface, error) {
			return r.cs.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		},
		judgeCreate: func(st *replay, p *corev1.Pod) string {
			want := *st.workload.(*appsv1.ReplicaSet).Spec.Replicas
			if n := len(st.livePods()); int32(n) > want {
				return fmt.Sprintf("%d live pods of replicaset %s (%s); spec.replicas is %d", n, workloadName, names(st.livePods()), want)
			}
			return ""
		},
		judgePods:     none,
		judgeWorkload: none,
		converged: func(ctx context.Context, x *fuzz.Exec, r *run, pods []corev1.Pod) error {
			rs, err := r.cs.AppsV1().ReplicaSets(x.Namespace).Get(ctx, workloadName, metav1.GetOptions{})
			if err != nil {
				return wrap(err, "get", "replicaset", x.Namespace)
			}
			n, ready := counts(pods)
			if n != *rs.Spec.Replicas || rs.Status.Replicas != n || rs.Status.ReadyReplicas != ready {
				return fmt.Errorf("replicaset %s/%s: spec.replicas %d, status.replicas %d, status.readyReplicas %d; its pods: %d live, %d ready",
					x.Namespace, workloadName, *rs.Spec.Replicas, rs.Status.Replicas, rs.Status.ReadyReplicas, n, ready)
			}
			return nil
		},
	},

	DaemonSet: {
		kind:      "DaemonSet",
		group:     "apps",
		resources: []string{"daemonsets", "pods"},
		synced:    []string{"daemonsets", "pods", "nodes"},
		// nodes: none, a node added at t+Step, node n0 removed at t+Step,
		// both (added at t+Step, n1 removed at t+3×Step); kill: someone
		// else deletes a live daemon pod at t+kill×Step.
		knobs: []fuzz.Knob{{Name: "nodes", Values: 4}, {Name: "kill", Values: 4}},
		quiet: 500 * time.Millisecond,
		prepare: func(ctx context.Context, x *fuzz.Exec, r *run) error {
			for _, n := range []string{"n0", "n1"} {
				if err := addNode(ctx, x, r, n); err != nil {
					return err
				}
			}
			return nil
		},
		drive: func(ctx context.Context, x *fuzz.Exec, r *run) error {
			tpl := podTemplate()
			tpl.Spec.NodeSelector = map[string]string{nodeLabel: x.Namespace}
			ds := &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: workloadName, Namespace: x.Namespace},
				Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tpl},
			}
			if _, err := r.cs.AppsV1().DaemonSets(x.Namespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
				return wrap(err, "create", "daemonset", x.Namespace)
			}
			k := x.Knob("nodes")
			if k == 1 || k == 3 {
				x.After(Step, "add node n2", func(ctx context.Context) error { return addNode(ctx, x, r, "n2") })
			}
			if k == 2 || k == 3 {
				gone, when := "n0", Step
				if k == 3 {
					gone, when = "n1", 3*Step
				}
				x.After(when, "remove node "+gone, func(ctx context.Context) error {
					err := r.cs.CoreV1().Nodes().Delete(ctx, x.Namespace+"-"+gone, metav1.DeleteOptions{})
					return wrap(err, "delete", "node", x.Namespace+"-"+gone)
				})
			}
			killKnob(x, r, "")
			return nil
		},
		watch: func(ctx context.Context, r *run, ns, rv string) (watch.Interface, error) {
			return r.cs.AppsV1().DaemonSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		},
		judgeCreate: func(st *replay, p *corev1.Pod) string {
			node := nodeOf(p)
			var on []*corev1.Pod
			for _, q := range st.livePods() {
				if nodeOf(q) == node {
					on = append(on, q)
				}
			}
			if len(on) > 1 {
				return fmt.Sprintf("node %s has %d live daemon pods of daemonset %s (%s)", node, len(on), workloadName, names(on))
			}
			return ""
		},
		judgePods:     none,
		judgeWorkload: none,
		converged: func(ctx context.Context, x *fuzz.Exec, r *run, pods []corev1.Pod) error {
			ds, err := r.cs.AppsV1().DaemonSets(x.Namespace).Get(ctx, workloadName, metav1.GetOptions{})
			if err != nil {
				return wrap(err, "get", "daemonset", x.Namespace)
			}
			nodes, err := r.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeLabel + "=" + x.Namespace})
			if err != nil {
				return wrap(err, "list", "nodes", x.Namespace)
			}
			per := map[string]int{}
			for i := range pods {
				if live(&pods[i]) {
					per[nodeOf(&pods[i])]++
				}
			}
			var wrong []string
			for _, n := range nodes.Items {
				if per[n.Name] != 1 {
					wrong = append(wrong, fmt.Sprintf("%s has %d", n.Name, per[n.Name]))
				}
			}
			want := int32(len(nodes.Items))
			if len(wrong) > 0 || ds.Status.DesiredNumberScheduled != want || ds.Status.CurrentNumberScheduled != want || ds.Status.NumberMisscheduled != 0 {
				return fmt.Errorf("daemonset %s/%s: %d nodes; status desired %d, current %d, misscheduled %d; daemon pods per node: %s",
					x.Namespace, workloadName, want, ds.Status.DesiredNumberScheduled, ds.Status.CurrentNumberScheduled, ds.Status.NumberMisscheduled, orAll(wrong))
			}
			return nil
		},
	},

	StatefulSet: {
		kind:      "StatefulSet",
		group:     "apps",
		resources: []string{"statefulsets", "pods"},
		// scale: none, to 3 at t+Step, to 1 at t+Step, to 3 at t+2×Step;
		// kill: someone else deletes app-0 at t+kill×Step.
		knobs: []fuzz.Knob{{Name: "scale", Values: 4}, {Name: "kill", Values: 4}},
		quiet: 500 * time.Millisecond,
		drive: func(ctx context.Context, x *fuzz.Exec, r *run) error {
			sts := &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: workloadName, Namespace: x.Namespace},
				Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
					ServiceName: workloadName, Template: podTemplate()},
			}
			if _, err := r.cs.AppsV1().StatefulSets(x.Namespace).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
				return wrap(err, "create", "statefulset", x.Namespace)
			}
			scaleKnob(x, r, "statefulsets")
			killKnob(x, r, workloadName+"-0")
			return nil
		},
		watch: func(ctx context.Context, r *run, ns, rv string) (watch.Interface, error) {
			return r.cs.AppsV1().StatefulSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		},
		judgeCreate: func(st *replay, p *corev1.Pod) string {
			want := *st.workload.(*appsv1.StatefulSet).Spec.Replicas
			ord := map[string][]*corev1.Pod{}
			for _, q := range st.livePods() {
				o := q.Name[strings.LastIndexByte(q.Name, '-')+1:]
				ord[o] = append(ord[o], q)
			}
			for o, ps := range ord {
				if len(ps) > 1 {
					return fmt.Sprintf("ordinal %s of statefulset %s has %d live pods (%s)", o, workloadName, len(ps), names(ps))
				}
			}
			if n := len(st.livePods()); int32(n) > want {
				return fmt.Sprintf("%d live pods of statefulset %s (%s); spec.replicas is %d", n, workloadName, names(st.livePods()), want)
			}
			return ""
		},
		judgePods:     none,
		judgeWorkload: none,
		converged: func(ctx context.Context, x *fuzz.Exec, r *run, pods []corev1.Pod) error {
			sts, err := r.cs.AppsV1().StatefulSets(x.Namespace).Get(ctx, workloadName, metav1.GetOptions{})
			if err != nil {
				return wrap(err, "get", "statefulset", x.Namespace)
			}
			n, ready := counts(pods)
			if n != *sts.Spec.Replicas || sts.Status.Replicas != n || sts.Status.ReadyReplicas != ready {
				return fmt.Errorf("statefulset %s/%s: spec.replicas %d, status.replicas %d, status.readyReplicas %d; its pods: %d live, %d ready",
					x.Namespace, workloadName, *sts.Spec.Replicas, sts.Status.Replicas, sts.Status.ReadyReplicas, n, ready)
			}
			return nil
		},
	},
}

// scaleKnob schedules the "scale" knob's change of spec.replicas.
func scaleKnob(x *fuzz.Exec, r *run, resource string) {
	k := x.Knob("scale")
	if k == 0 {
		return
	}
	to := map[int]int{1: 4, 2: 1, 3: 3}[k]
	if resource == "statefulsets" && k == 1 {
		to = 3
	}
	when := Step
	if k == 3 {
		when = 2 * Step
	}
	x.After(when, fmt.Sprintf("scale %s to %d", resource, to), func(ctx context.Context) error {
		patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, to)
		var err error
		if resource == "statefulsets" {
			_, err = r.cs.AppsV1().StatefulSets(x.Namespace).Patch(ctx, workloadName, types.MergePatchType, patch, metav1.PatchOptions{})
		} else {
			_, err = r.cs.AppsV1().ReplicaSets(x.Namespace).Patch(ctx, workloadName, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		return wrap(err, "scale", resource, x.Namespace+"/"+workloadName)
	})
}

// killKnob schedules the "kill" knob's pod deletion by someone else: the
// named pod, or the first live one.
func killKnob(x *fuzz.Exec, r *run, name string) {
	k := x.Knob("kill")
	if k == 0 {
		return
	}
	x.After(time.Duration(k)*Step, "delete a pod", func(ctx context.Context) error {
		victim := name
		if victim == "" {
			pods, err := r.cs.CoreV1().Pods(x.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return wrap(err, "list", "pods", x.Namespace)
			}
			for i := range pods.Items {
				if live(&pods.Items[i]) {
					victim = pods.Items[i].Name
					break
				}
			}
		}
		if victim == "" {
			return nil
		}
		err := r.cs.CoreV1().Pods(x.Namespace).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return wrap(err, "delete", "pod", x.Namespace+"/"+victim)
	})
}

// addNode makes a Ready node, as a kubelet registering it and the node
// lifecycle controller would: kube-apiserver's TaintNodesByCondition
// admission taints a new node node.kubernetes.io/not-ready:NoSchedule, which
// daemon pods do not tolerate, until that controller sees it Ready.
func addNode(ctx context.Context, x *fuzz.Exec, r *run, name string) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: x.Namespace + "-" + name, Labels: map[string]string{nodeLabel: x.Namespace}}}
	if _, err := r.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return wrap(err, "create", "node", n.Name)
	}
	if _, err := r.cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(`{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`), metav1.PatchOptions{}, "status"); err != nil {
		return wrap(err, "mark Ready", "node", n.Name)
	}
	_, err := r.cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{})
	return wrap(err, "untaint", "node", n.Name)
}

// nodeOf is the node a daemon pod is for: the DaemonSet controller pins it
// with a required node affinity on metadata.name (no scheduler binds it).
func nodeOf(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range t.MatchFields {
				if f.Key == "metadata.name" && len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return "(none)"
}

func counts(pods []corev1.Pod) (n, ready int32) {
	for i := range pods {
		if !live(&pods[i]) {
			continue
		}
		n++
		for _, c := range pods[i].Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return n, ready
}

func setNames(m map[string]bool) string {
	var ns []string
	for n := range m {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return strings.Join(ns, ", ")
}

func orAll(wrong []string) string {
	if len(wrong) == 0 {
		return "one each"
	}
	return strings.Join(wrong, ", ")
}

func wrap(err error, verb, what, name string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("unable to %s %s %s: %w", verb, what, name, err)
}

// kubelet stands in for the kubelet: a new pod is Running and Ready at once,
// and succeeds when the workload says.
type kubelet struct {
	x    *fuzz.Exec
	r    *run
	w    workload
	mu   sync.Mutex
	seen map[string]bool // pod UIDs
	n    int
}

func (k *kubelet) pod(p *corev1.Pod) {
	k.mu.Lock()
	// By UID: a StatefulSet recreates a deleted pod under the same name, and
	// the new pod needs a kubelet as much as the old one did.
	if k.seen[string(p.UID)] || p.DeletionTimestamp != nil {
		k.mu.Unlock()
		return
	}
	k.seen[string(p.UID)] = true
	n := k.n
	k.n++
	k.mu.Unlock()
	k.x.Go("kubelet stand-in for "+p.Name, func(ctx context.Context) error {
		if err := k.status(ctx, p.Name, corev1.PodRunning, true); err != nil {
			return err
		}
		if k.w.succeedAfter == nil {
			return nil
		}
		d, ok := k.w.succeedAfter(k.x, n)
		if !ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
		return k.status(ctx, p.Name, corev1.PodSucceeded, false)
	})
}

func (k *kubelet) status(ctx context.Context, name string, phase corev1.PodPhase, ready bool) error {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	patch := fmt.Appendf(nil, `{"status":{"phase":%q,"conditions":[{"type":"Ready","status":%q}]}}`, phase, cond)
	_, err := k.r.cs.CoreV1().Pods(k.x.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) || ctx.Err() != nil {
		return nil // deleted meanwhile, or the execution is over
	}
	return wrap(err, "mark "+string(phase), "pod", k.x.Namespace+"/"+name)
}
