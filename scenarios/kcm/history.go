package kcm

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// entry is one event of the apiserver's history of the namespace: a pod or
// the workload, as a direct watch (every event, never stale) delivered it.
type entry struct {
	rv   uint64
	at   time.Time
	typ  watch.EventType
	pod  *corev1.Pod    // a pod event
	obj  runtime.Object // a workload event
	name string
}

// history records the namespace's pods and workload from a direct watch.
type history struct {
	mu      sync.Mutex
	entries []entry
	mark    func() time.Time
}

func (h *history) add(e entry) {
	h.mu.Lock()
	h.entries = append(h.entries, e)
	h.mu.Unlock()
}

// sorted returns the entries in resourceVersion order: the order etcd
// applied them, across both watches.
func (h *history) sorted() []entry {
	h.mu.Lock()
	out := slices.Clone(h.entries)
	h.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].rv < out[j].rv })
	return out
}

// record starts watching the namespace's pods and workload, straight from the
// apiserver, from now on; each new pod is handed to the kubelet stand-in.
func record(ctx context.Context, x *fuzz.Exec, r *run, w workload) (*history, error) {
	h := &history{mark: x.Mark}
	list, err := r.cs.CoreV1().Pods(x.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("unable to list pods in %s: %w", x.Namespace, err)
	}
	from := list.ResourceVersion
	r.kubelet = &kubelet{x: x, r: r, w: w, seen: map[string]bool{}}
	watches := map[string]func(ctx context.Context, rv string) (watch.Interface, error){
		"pods": func(ctx context.Context, rv string) (watch.Interface, error) {
			return r.cs.CoreV1().Pods(x.Namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		},
		w.resources[0]: func(ctx context.Context, rv string) (watch.Interface, error) {
			return w.watch(ctx, r, x.Namespace, rv)
		},
	}
	// Each watch runs for the whole execution (the goroutine's context, not
	// Start's) from the resourceVersion of the empty namespace, so it misses
	// nothing whenever it opens.
	for res, open := range watches {
		x.Go("history of "+res, func(ctx context.Context) error {
			rv := from
			for {
				wi, err := open(ctx, rv)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("unable to watch %s in %s: %w", res, x.Namespace, err)
				}
				stop := context.AfterFunc(ctx, wi.Stop)
				for ev := range wi.ResultChan() {
					if ev.Type == watch.Error {
						if ctx.Err() != nil {
							return nil // the execution is over
						}
						return fmt.Errorf("watch of %s in %s: %v", res, x.Namespace, apiStatus(ev.Object))
					}
					m, err := metaOf(ev.Object)
					if err != nil {
						return err
					}
					rv = m.GetResourceVersion()
					n, _ := strconv.ParseUint(rv, 10, 64)
					e := entry{rv: n, at: time.Now(), typ: ev.Type, name: m.GetName()}
					if p, ok := ev.Object.(*corev1.Pod); ok {
						e.pod = p
						if ev.Type == watch.Added {
							r.kubelet.pod(p)
						}
					} else {
						e.obj = ev.Object
					}
					h.add(e)
				}
				stop()
				if ctx.Err() != nil {
					return nil
				}
				// The server ended the watch: go on from where it was.
			}
		})
	}
	return h, nil
}

func metaOf(o runtime.Object) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("watch delivered a %T, which has no metadata", o)
	}
	return m, nil
}

func apiStatus(o runtime.Object) string {
	if s, ok := o.(*metav1.Status); ok {
		return s.Message
	}
	return fmt.Sprintf("%T", o)
}

// live is a pod that counts against the spec: not terminating, not finished.
func live(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// replay is the namespace's state at one point of its history.
type replay struct {
	pods      map[string]*corev1.Pod // by name, the latest version, until deleted
	succeeded map[string]bool        // pods that ever reached Succeeded
	workload  runtime.Object         // the latest version
}

func (s *replay) livePods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range s.pods {
		if live(p) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func names(ps []*corev1.Pod) string {
	var ns []string
	for _, p := range ps {
		ns = append(ns, p.Name)
	}
	return strings.Join(ns, ", ")
}

// safety replays the namespace's history in resourceVersion order and judges
// every pod creation and every pod's success by the workload's rules at that
// moment.
func safety(ctx context.Context, x *fuzz.Exec, tr trace.Trace) error {
	r := x.Value.(*run)
	w := workloads[r.c]
	st := &replay{pods: map[string]*corev1.Pod{}, succeeded: map[string]bool{}}
	var violations []string
	for _, e := range r.hist.sorted() {
		if e.obj != nil {
			st.workload = e.obj
			if msg := w.judgeWorkload(st); msg != "" {
				violations = append(violations, fmt.Sprintf("at %s: %s", at(x, e), msg))
			}
			continue
		}
		if e.typ == watch.Deleted {
			delete(st.pods, e.name)
			continue
		}
		st.pods[e.name] = e.pod
		if e.pod.Status.Phase == corev1.PodSucceeded {
			st.succeeded[e.name] = true
		}
		if st.workload == nil {
			continue
		}
		if e.typ == watch.Added {
			if msg := w.judgeCreate(st, e.pod); msg != "" {
				violations = append(violations, fmt.Sprintf("pod %s/%s created at %s: %s\n%s",
					x.Namespace, e.name, at(x, e), msg, explain(x, r, tr, e)))
			}
		} else if msg := w.judgePods(st); msg != "" {
			violations = append(violations, fmt.Sprintf("at %s: %s", at(x, e), msg))
		}
	}
	if len(violations) > 0 {
		return fmt.Errorf("%s", strings.Join(violations, "\n"))
	}
	return nil
}

func at(x *fuzz.Exec, e entry) string {
	return fmt.Sprintf("t%+.2fs (rv %d)", e.at.Sub(x.Mark()).Seconds(), e.rv)
}

// explain says who created the pod of e and what kube-controller-manager had
// been sent when it sent the create: the newest version of the workload and
// of each pod released to it before the request, against the apiserver's.
func explain(x *fuzz.Exec, r *run, tr trace.Trace, e entry) string {
	rv := strconv.FormatUint(e.rv, 10)
	var create *trace.Request
	for i, q := range tr.Requests {
		if q.Verb == "create" && q.Resource == "pods" && q.Subresource == "" && q.ReturnedRV == rv {
			create = &tr.Requests[i]
		}
	}
	if create == nil {
		return "  created by a client outside the proxy (not kube-controller-manager)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  created by %s: create pods at t%+.2fs, answered %d\n", create.Client, create.Start.Sub(x.Mark()).Seconds(), create.Code)
	// What the client had seen of the workload before it sent the create
	// (package trace's definition), and which pods it had been sent.
	w := workloads[r.c]
	views := trace.NewViews(tr)
	seen := func(name string) uint64 {
		return views.Seen(create.Client, trace.Object{Group: w.group, Resource: w.resources[0], Namespace: x.Namespace, Name: name}, create.Start)
	}
	podsSent := map[string]bool{}
	for _, ev := range tr.Events {
		if ev.Client == create.Client && ev.Fate == trace.Released && ev.Released.Before(create.Start) && ev.Namespace == x.Namespace && ev.Resource == "pods" {
			podsSent[ev.Name] = ev.Type != "DELETED"
		}
	}
	var unseen []string
	var newest uint64
	for _, h := range r.hist.sorted() {
		if h.obj == nil || h.rv >= e.rv {
			continue
		}
		newest = h.rv
		if h.rv > seen(h.name) {
			unseen = append(unseen, fmt.Sprintf("rv %d (%s)", h.rv, writer(tr, h.rv)))
		}
	}
	fmt.Fprintf(&b, "  its cache then: %s %s at rv %d, the apiserver's at rv %d", w.kind, workloadName, seen(workloadName), newest)
	if len(unseen) > 0 {
		fmt.Fprintf(&b, "; not yet seen: %s", strings.Join(unseen, ", "))
	}
	var alive []string
	for n, ok := range podsSent {
		if ok {
			alive = append(alive, n)
		}
	}
	sort.Strings(alive)
	fmt.Fprintf(&b, "\n  pods it had been sent (not deleted): %s", strings.Join(alive, ", "))
	return b.String()
}

// writer says which traced request wrote resourceVersion rv.
func writer(tr trace.Trace, rv uint64) string {
	s := strconv.FormatUint(rv, 10)
	for _, q := range tr.Requests {
		if q.ReturnedRV == s && q.Verb != "get" && q.Verb != "list" && q.Verb != "watch" {
			res := q.Resource
			if q.Subresource != "" {
				res += "/" + q.Subresource
			}
			return fmt.Sprintf("%s's own %s %s", q.Client, q.Verb, res)
		}
	}
	return "written by the workload driver"
}

// convergeWait is how long, at most, the convergence oracle waits for the
// workload's status to match its pods after the run settled (or its settle
// budget ran out): the Job controller acts on pod events only after batching
// them for 1 s.
const convergeWait = 1500 * time.Millisecond

// convergence: once the lag is over, the workload's status counts come to
// match its live pods (within convergeWait, and within the execution's
// budget, less what stopping it takes).
func convergence(ctx context.Context, x *fuzz.Exec, _ trace.Trace) error {
	r := x.Value.(*run)
	until := time.Now().Add(convergeWait)
	if d, ok := ctx.Deadline(); ok && d.Add(-fuzz.StopBudget).Before(until) {
		until = d.Add(-fuzz.StopBudget)
	}
	for {
		pods, err := r.cs.CoreV1().Pods(x.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("unable to list pods in %s: %w", x.Namespace, err)
		}
		err = workloads[r.c].converged(ctx, x, r, pods.Items)
		if err == nil || time.Now().After(until) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}
