package target

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// Kubelet is the kubelet stand-in's behaviour. Its zero value runs every
// Pod at once, Ready, until it is deleted.
type Kubelet struct {
	// SucceedAfter, when set, marks each Pod Succeeded that long after it
	// was marked Running (a Job's Pods completing). A duration or a knob
	// reference. Zero: Pods run until deleted.
	SucceedAfter string `yaml:"succeedAfter"`
	// PendingFor, when set, keeps each Pod Pending that long before it
	// runs, its containers waiting with reason ContainerCreating, as the
	// kubelet reports a Pod whose images are being pulled or whose volumes
	// are being mounted. A duration or a knob reference. Zero: Running as
	// soon as the stand-in sees it.
	PendingFor string `yaml:"pendingFor"`
	// Fates are what happens to some Pods after they have run a while.
	Fates []PodFate `yaml:"fates"`
	// RestartBackOff is how long a container the kubelet restarts in
	// place (a Fate under restartPolicy Always or OnFailure) waits in
	// CrashLoopBackOff, not Ready, before it runs again. The kubelet's
	// first back-off is 10 s (doubling to 5 min); the default, 1s, is that
	// scaled by 10 to fit an execution. A duration or a knob reference.
	RestartBackOff string `yaml:"restartBackOff"`
}

// PodFate is what happens to one Pod after it has run for a while, with
// the status the kubelet writes for it.
type PodFate struct {
	// Pod is which Pod: the Nth the stand-in runs (1 is the first) of
	// those with Labels, in the order they were created (with
	// Builtins.Scheduler, bound). A number or a knob reference; 0 is none
	// (a knob that turns the fate off).
	Pod string `yaml:"pod"`
	// Labels are the labels a Pod must have to be counted (a Job's Pods:
	// batch.kubernetes.io/job-name). Zero: every Pod is.
	Labels map[string]string `yaml:"labels"`
	// After is how long after the Pod was marked Running. A duration or a
	// knob reference.
	After string `yaml:"after"`
	// Fate is one of PodFates, or a knob reference whose values are.
	Fate string `yaml:"fate"`
}

// PodFates are what PodFate.Fate may name:
//   - "failed": every container exits with code 1 (reason Error), an
//     application's crash;
//   - "oomKilled": every container is killed by the kernel's OOM killer,
//     exit code 137, reason OOMKilled, a container over its memory limit;
//   - "succeeded": every container exits 0 (reason Completed);
//   - "evicted": the kubelet's eviction manager under memory pressure
//     (pkg/kubelet/eviction): the Pod Failed with reason Evicted, the
//     message "The node was low on resource: memory. ", a DisruptionTarget
//     condition (reason TerminationByKubelet), and its containers killed
//     (exit code 137, reason Error, as the container runtime reports
//     SIGKILL). An evicted Pod is never restarted.
//
// Under restartPolicy Never, and OnFailure for "succeeded", the Pod ends
// Failed or Succeeded. Otherwise the kubelet restarts the containers in
// place: their restartCount goes up, lastState holds the termination, they
// wait in CrashLoopBackOff, not Ready, for RestartBackOff, then run again;
// the Pod stays Running.
var PodFates = []string{"failed", "oomKilled", "succeeded", "evicted"}

// podExit is a fate's container termination.
var podExit = map[string]struct {
	code   int32
	reason string
}{
	"failed":    {1, "Error"},
	"oomKilled": {137, "OOMKilled"},
	"succeeded": {0, "Completed"},
	"evicted":   {137, "Error"},
}

// kubeletPod is what the stand-in remembers of a Pod it runs.
type kubeletPod struct {
	name       string
	containers []string
	policy     corev1.RestartPolicy
	restarts   int32
	terminal   bool
}

// startKubelet starts the kubelet stand-in, if the target has one, at the
// mark (from Drive: Pods it finds then, or that appear later, are marked
// Pending for PendingFor, then Running and Ready, then meet their Fates or
// SucceedAfter), for the whole execution.
func (t *Target) startKubelet(ctx context.Context, x *fuzz.Exec) error {
	if t.Builtins == nil || t.Builtins.Kubelet == nil {
		return nil
	}
	k := t.Builtins.Kubelet
	dur := func(s, def string) time.Duration {
		if s == "" {
			s = def
		}
		d, _ := parseDuration(substitute(x, t.Knobs, s)) // validated
		return d
	}
	succeedAfter, pendingFor, backOff := dur(k.SucceedAfter, "0s"), dur(k.PendingFor, "0s"), dur(k.RestartBackOff, "1s")
	// fateOf[i] is the fate k.Fates[i] gives the fateOf[i].n-th Pod with
	// its labels; seenOf[i] counts those the stand-in has run.
	type fateOf struct {
		n      int
		fate   string
		labels map[string]string
	}
	var fates []fateOf
	for _, f := range k.Fates {
		n, _ := strconv.Atoi(substitute(x, t.Knobs, f.Pod)) // validated
		fates = append(fates, fateOf{n, substitute(x, t.Knobs, f.Fate), f.Labels})
	}
	seenOf := make([]int, len(fates))
	// Container statuses only where the target asks for a Pod lifecycle:
	// a target without one sees the Pods it always saw.
	detailed := k.PendingFor != "" || len(k.Fates) > 0
	cs, err := kubernetes.NewForConfig(x.DirectConfig())
	if err != nil {
		return err
	}
	list, err := cs.CoreV1().Pods(x.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("kubelet stand-in: unable to list pods in %s: %w", x.Namespace, err)
	}
	var mu sync.Mutex // guards the Pods' state: timers run on goroutines of their own
	seen := map[types.UID]bool{}
	// write sends the Pod's status, as the kubelet does, straight to the
	// apiserver through Exec.Direct, so that the engine counts these
	// writes as the workload's (settling waits for the controllers to see
	// them). A Pod deleted meanwhile, or the execution's end, is no error.
	write := func(ctx context.Context, p *kubeletPod, status map[string]any) error {
		patch, err := json.Marshal(map[string]any{"status": status})
		if err != nil {
			return err
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: p.name}}
		err = x.Direct.Status().Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch))
		if apierrors.IsNotFound(err) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("kubelet stand-in: unable to write the status of pod %s/%s: %w", x.Namespace, p.name, err)
		}
		return nil
	}
	containers := func(p *kubeletPod, state map[string]any, ready bool, last map[string]any) []map[string]any {
		if !detailed {
			return nil
		}
		mu.Lock() // a fate's timer may count a restart meanwhile
		restarts := p.restarts
		mu.Unlock()
		var out []map[string]any
		for _, c := range p.containers {
			st := map[string]any{"name": c, "state": state, "ready": ready, "started": state["running"] != nil, "restartCount": restarts, "image": "stalefuzz/" + c, "imageID": ""}
			if last != nil {
				st["lastState"] = last
			}
			out = append(out, st)
		}
		return out
	}
	readyCond := func(ready bool) []map[string]any {
		status, reason := "True", ""
		if !ready {
			status = "False"
			if detailed {
				reason = "ContainersNotReady"
			}
		}
		c := map[string]any{"type": "Ready", "status": status}
		if reason != "" {
			c["reason"] = reason
		}
		return []map[string]any{c}
	}
	running := func(ctx context.Context, p *kubeletPod, last map[string]any) error {
		status := map[string]any{"phase": corev1.PodRunning, "conditions": readyCond(true)}
		if detailed {
			status["containerStatuses"] = containers(p, map[string]any{"running": map[string]any{"startedAt": metav1.Now()}}, true, last)
		}
		return write(ctx, p, status)
	}
	// meet is what the kubelet writes when a fate comes to the Pod.
	meet := func(ctx context.Context, p *kubeletPod, fate string) error {
		mu.Lock()
		if p.terminal {
			mu.Unlock()
			return nil
		}
		exit := podExit[fate]
		terminated := map[string]any{"terminated": map[string]any{"exitCode": exit.code, "reason": exit.reason, "finishedAt": metav1.Now()}}
		restart := fate != "evicted" && (p.policy == corev1.RestartPolicyAlways || p.policy == "" || (p.policy == corev1.RestartPolicyOnFailure && exit.code != 0))
		if !restart {
			p.terminal = true
			mu.Unlock()
			phase := corev1.PodFailed
			if exit.code == 0 {
				phase = corev1.PodSucceeded
			}
			status := map[string]any{"phase": phase, "conditions": readyCond(false), "containerStatuses": containers(p, terminated, false, nil)}
			if fate == "evicted" {
				status["reason"] = "Evicted"
				status["message"] = "The node was low on resource: memory. "
				status["conditions"] = append(readyCond(false), map[string]any{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet", "message": "The node was low on resource: memory. "})
			}
			return write(ctx, p, status)
		}
		p.restarts++
		mu.Unlock()
		if err := write(ctx, p, map[string]any{"phase": corev1.PodRunning, "conditions": readyCond(false),
			"containerStatuses": containers(p, map[string]any{"waiting": map[string]any{"reason": "CrashLoopBackOff"}}, false, terminated)}); err != nil {
			return err
		}
		x.After(time.Since(x.Mark())+backOff, "kubelet stand-in: "+p.name+" restarts", func(ctx context.Context) error {
			mu.Lock()
			done := p.terminal
			mu.Unlock()
			if done {
				return nil
			}
			return running(ctx, p, terminated)
		})
		return nil
	}
	bound := t.Builtins.Scheduler // Pods run once bound
	run := func(ctx context.Context, pod *corev1.Pod) error {
		if pod.DeletionTimestamp != nil || seen[pod.UID] || (bound && pod.Spec.NodeName == "") {
			return nil
		}
		seen[pod.UID] = true
		var mine []string // the fates of this Pod, with their delays
		var after []time.Duration
		for i, f := range fates {
			if labels.SelectorFromSet(f.labels).Matches(labels.Set(pod.Labels)) {
				seenOf[i]++
				if seenOf[i] == f.n {
					mine, after = append(mine, f.fate), append(after, dur(k.Fates[i].After, "0s"))
				}
			}
		}
		p := &kubeletPod{name: pod.Name, policy: pod.Spec.RestartPolicy}
		for _, c := range pod.Spec.Containers {
			p.containers = append(p.containers, c.Name)
		}
		start := func(ctx context.Context) error {
			if err := running(ctx, p, nil); err != nil {
				return err
			}
			// Timers of the execution's: the run is not settled while a
			// Pod still has something to happen to it.
			if succeedAfter > 0 {
				x.After(time.Since(x.Mark())+succeedAfter, "kubelet stand-in: "+p.name+" succeeds", func(ctx context.Context) error {
					mu.Lock()
					done := p.terminal
					p.terminal = true
					mu.Unlock()
					if done {
						return nil // a fate came first
					}
					return write(ctx, p, map[string]any{"phase": corev1.PodSucceeded, "conditions": readyCond(false)})
				})
			}
			for i, fate := range mine {
				x.After(time.Since(x.Mark())+after[i], "kubelet stand-in: "+p.name+" "+fate, func(ctx context.Context) error {
					return meet(ctx, p, fate)
				})
			}
			return nil
		}
		if pendingFor <= 0 {
			return start(ctx)
		}
		if err := write(ctx, p, map[string]any{"phase": corev1.PodPending, "conditions": readyCond(false),
			"containerStatuses": containers(p, map[string]any{"waiting": map[string]any{"reason": "ContainerCreating"}}, false, nil)}); err != nil {
			return err
		}
		x.After(time.Since(x.Mark())+pendingFor, "kubelet stand-in: "+p.name+" runs", start)
		return nil
	}
	rv := list.ResourceVersion
	x.Go("kubelet stand-in", func(ctx context.Context) error {
		for i := range list.Items {
			if err := run(ctx, &list.Items[i]); err != nil {
				return err
			}
		}
		for ctx.Err() == nil {
			w, err := cs.CoreV1().Pods(x.Namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("kubelet stand-in: unable to watch pods in %s: %w", x.Namespace, err)
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					break // an ERROR event: watch again from rv
				}
				rv = p.ResourceVersion
				if ev.Type != watch.Added && (!bound || ev.Type != watch.Modified) {
					continue
				}
				if err := run(ctx, p); err != nil {
					return err
				}
			}
			w.Stop()
		}
		return nil
	})
	return nil
}
