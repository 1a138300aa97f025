package target

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/jsonpath"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/nodes"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// step is a Step with its files read.
type step struct {
	Step
	manifest string // Apply's, from its file or inline
}

func (t *Target) steps() ([]step, error) {
	var out []step
	for i, s := range t.Workload {
		st := step{Step: s}
		if a := s.Apply; a != nil {
			st.manifest = a.Manifest
			if a.File != "" {
				b, err := os.ReadFile(t.path(a.File))
				if err != nil {
					return nil, fmt.Errorf("target %s: workload[%d].apply.file: %w", t.Name, i, err)
				}
				st.manifest = string(b)
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// kinds are the kinds of the objects the apply steps create, in order, each
// once (a document whose apiVersion or kind a knob chooses is left out).
func kinds(steps []step) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, s := range steps {
		if s.Apply == nil {
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(s.manifest), 4096)
		for {
			var tm metav1.TypeMeta
			if err := dec.Decode(&tm); err != nil {
				break // the end, or a manifest apply will refuse with its error
			}
			gvk := tm.GroupVersionKind()
			if gvk.Kind == "" || strings.Contains(tm.APIVersion+tm.Kind, "${") || slices.Contains(out, gvk) {
				continue
			}
			out = append(out, gvk)
		}
	}
	return out
}

// runSteps performs the workload in order, each step at its time.
func runSteps(ctx context.Context, x *fuzz.Exec, knobs []Knob, steps []step, missed *missedWaits) error {
	sub := func(s string) string { return substitute(x, knobs, s) }
	var fleet *nodes.Fleet // made at the first node step
	for i, s := range steps {
		if s.At != "" {
			at, _ := parseDuration(sub(s.At)) // validated
			if err := sleepUntil(ctx, x.Mark().Add(at)); err != nil {
				return err
			}
		}
		var err error
		switch {
		case s.Apply != nil:
			err = apply(ctx, x, sub(s.manifest))
		case s.Patch != nil:
			err = patch(ctx, x, s.Patch, sub)
		case s.Delete != nil:
			u := object(*s.Delete, sub)
			if err = namespaced(x, u); err == nil {
				err = x.Direct.Delete(ctx, u)
			}
			if apierrors.IsNotFound(err) {
				// What the step wants is already so (kubectl delete
				// --ignore-not-found): a controller that has not made the
				// object yet is for the oracles to judge.
				x.Logf("workload", "delete %s %s: not found; going on with the next step", u.GetKind(), u.GetName())
				err = nil
			}
		case s.Wait != nil:
			err = wait(ctx, x, s.Wait, sub, missed)
		case s.Node != nil:
			if fleet == nil {
				fleet = startFleet(x)
			}
			err = nodeStep(ctx, fleet, *s.Node)
		}
		if err != nil {
			return fmt.Errorf("workload[%d]: %w", i, err)
		}
	}
	return nil
}

// object is o as an unstructured object with its knob references replaced.
func object(o Object, sub func(string) string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(o.APIVersion)
	u.SetKind(o.Kind)
	u.SetName(sub(o.Name))
	return u
}

// namespaced puts u in the execution's namespace if its kind is namespaced.
func namespaced(x *fuzz.Exec, u *unstructured.Unstructured) error {
	ns, err := x.Direct.IsObjectNamespaced(u)
	if err != nil {
		return fmt.Errorf("unable to map %s %s (is its CRD under crds?): %w", u.GetKind(), u.GetName(), err)
	}
	if ns {
		u.SetNamespace(x.Namespace)
	} else {
		u.SetNamespace("")
	}
	return nil
}

// apply creates each object of manifest, or, where it exists, patches it
// with the manifest (a JSON merge patch, no resourceVersion: kubectl
// apply's fields, never a 409).
func apply(ctx context.Context, x *fuzz.Exec, manifest string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("unable to decode the manifest: %w", err)
		}
		if len(u.Object) == 0 {
			continue // an empty document
		}
		if err := namespaced(x, u); err != nil {
			return err
		}
		body, err := json.Marshal(u.Object)
		if err != nil {
			return fmt.Errorf("unable to encode %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		err = x.Direct.Create(ctx, u)
		if apierrors.IsAlreadyExists(err) {
			// What kubectl apply sends for the fields a manifest sets: a
			// patch with no resourceVersion, so that a controller's write
			// in between (a status, a finalizer) is no 409, and what the
			// manifest does not set (a controller's finalizer, labels and
			// annotations) stays, where an update would remove it.
			err = x.Direct.Patch(ctx, u, client.RawPatch(types.MergePatchType, body))
		}
		if err != nil {
			return fmt.Errorf("unable to apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

func patch(ctx context.Context, x *fuzz.Exec, p *Patch, sub func(string) string) error {
	u := object(p.Object, sub)
	if err := namespaced(x, u); err != nil {
		return err
	}
	body, err := yaml.YAMLToJSON([]byte(sub(p.Patch)))
	if err != nil {
		return fmt.Errorf("unable to read the patch of %s %s as JSON or YAML: %w", u.GetKind(), u.GetName(), err)
	}
	pt := types.MergePatchType
	var apply bool
	switch p.Type {
	case "json":
		pt = types.JSONPatchType
	case "apply":
		// The body names its object: the step's, in the execution's namespace.
		if body, err = applyBody(body, u); err != nil {
			return fmt.Errorf("unable to read the patch of %s %s as an object: %w", u.GetKind(), u.GetName(), err)
		}
		pt, apply = types.ApplyPatchType, true
	}
	switch {
	case p.Subresource == "status" && apply:
		err = x.Direct.Status().Patch(ctx, u, client.RawPatch(pt, body), client.FieldOwner(workloadFieldOwner), client.ForceOwnership)
	case p.Subresource == "status":
		err = x.Direct.Status().Patch(ctx, u, client.RawPatch(pt, body))
	case apply:
		err = x.Direct.Patch(ctx, u, client.RawPatch(pt, body), client.FieldOwner(workloadFieldOwner), client.ForceOwnership)
	default:
		err = x.Direct.Patch(ctx, u, client.RawPatch(pt, body))
	}
	if err != nil {
		return fmt.Errorf("unable to patch %s %s %s: %w", u.GetKind(), u.GetName(), p.Subresource, err)
	}
	return nil
}

// workloadFieldOwner is the field manager of the workload's apply patches.
const workloadFieldOwner = "stalefuzz-workload"

// applyBody is an apply patch's body with the apiVersion, kind, name and
// namespace of u.
func applyBody(body []byte, u *unstructured.Unstructured) ([]byte, error) {
	obj := map[string]any{}
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	a := &unstructured.Unstructured{Object: obj}
	a.SetAPIVersion(u.GetAPIVersion())
	a.SetKind(u.GetKind())
	a.SetName(u.GetName())
	a.SetNamespace(u.GetNamespace())
	return json.Marshal(a.Object)
}

// wait polls the object until it exists and the value at JSONPath is Value.
// A required wait that times out is handed to missed, for the stuck oracle.
func wait(ctx context.Context, x *fuzz.Exec, w *Wait, sub func(string) string, missed *missedWaits) error {
	c, err := newCondition(x, w, sub)
	if err != nil {
		return err
	}
	timeout := defaultWaitTimeout
	if w.Timeout != "" {
		timeout, _ = parseDuration(w.Timeout) // validated
	}
	started := time.Now()
	deadline := started.Add(timeout)
	for {
		met, last, err := c.met(ctx, x)
		if err != nil || met {
			return err
		}
		if time.Now().After(deadline) {
			// A wait paces the workload; the oracles judge the controllers.
			x.Logf("workload", "wait for %s: %v after %v (last: %s); going on with the next step", c, errTimeout, timeout, last)
			if w.Required {
				missed.add(x, missedWait{cond: c, since: started.Sub(x.Mark()), timeout: timeout})
			}
			missed.diverge(x, c)
			x.Diverged(fmt.Sprintf("the wait for %s gave up after %v", c, timeout))
			return nil
		}
		if err := sleepUntil(ctx, time.Now().Add(50*time.Millisecond)); err != nil {
			return err
		}
	}
}

// condition is what a wait waits for, its knob references replaced.
type condition struct {
	u        *unstructured.Unstructured
	jp       *jsonpath.JSONPath // nil: the object's existence (or Current)
	path     string
	want     string
	from     *jsonpath.JSONPath // non-nil: want is read from the object there
	fromPath string
	cur      bool // kstatus Current
}

func newCondition(x *fuzz.Exec, w *Wait, sub func(string) string) (*condition, error) {
	u := object(w.Object, sub)
	if err := namespaced(x, u); err != nil {
		return nil, err
	}
	c := &condition{u: u, path: w.JSONPath, want: sub(w.Value), cur: w.Current}
	if w.JSONPath != "" {
		c.jp = jsonpath.New("wait").AllowMissingKeys(true)
		if err := c.jp.Parse(w.JSONPath); err != nil {
			return nil, fmt.Errorf("wait for %s %s: jsonPath %q: %w", u.GetKind(), u.GetName(), w.JSONPath, err)
		}
	}
	if w.ValueFrom != "" {
		c.fromPath = w.ValueFrom
		c.from = jsonpath.New("wait-from").AllowMissingKeys(true)
		if err := c.from.Parse(w.ValueFrom); err != nil {
			return nil, fmt.Errorf("wait for %s %s: valueFrom %q: %w", u.GetKind(), u.GetName(), w.ValueFrom, err)
		}
	}
	return c, nil
}

// String is the condition in words: "Rollout bg {.status.replicas} = "2"".
func (c *condition) String() string {
	what := fmt.Sprintf("%s = %q", c.path, c.want)
	if c.from != nil {
		what = fmt.Sprintf("%s = %s", c.path, c.fromPath)
	}
	if c.cur {
		what = "kstatus Current"
	}
	if c.jp == nil && !c.cur {
		what = "exists"
	}
	return fmt.Sprintf("%s %s %s", c.u.GetKind(), c.u.GetName(), what)
}

// met reads the object from the apiserver: whether it shows the condition,
// and if not, what it shows instead, with its status.message when it has
// one.
func (c *condition) met(ctx context.Context, x *fuzz.Exec) (bool, string, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(c.u.GroupVersionKind())
	err := x.Direct.Get(ctx, client.ObjectKeyFromObject(c.u), cur)
	switch {
	case apierrors.IsNotFound(err):
		return false, "absent", nil
	case err != nil:
		return false, "", fmt.Errorf("wait for %s %s: %w", c.u.GetKind(), c.u.GetName(), err)
	case c.cur:
		r, err := kstatus.Compute(cur)
		if err != nil {
			return false, "", fmt.Errorf("wait for %s %s: kstatus: %w", c.u.GetKind(), c.u.GetName(), err)
		}
		return r.Status == kstatus.CurrentStatus, fmt.Sprintf("%s (%s)", r.Status, r.Message), nil
	case c.jp == nil:
		return true, "", nil
	}
	var b bytes.Buffer
	if err := c.jp.Execute(&b, cur.Object); err != nil {
		return false, "", fmt.Errorf("wait for %s %s: jsonPath %q: %w", c.u.GetKind(), c.u.GetName(), c.path, err)
	}
	if c.from != nil {
		var f bytes.Buffer
		if err := c.from.Execute(&f, cur.Object); err != nil {
			return false, "", fmt.Errorf("wait for %s %s: valueFrom %q: %w", c.u.GetKind(), c.u.GetName(), c.fromPath, err)
		}
		met := b.String() != "" && b.String() == f.String()
		return met, fmt.Sprintf("%s against %q at %s", shown(cur, b.String(), f.String()), f.String(), c.fromPath), nil
	}
	return b.String() == c.want, shown(cur, b.String(), c.want), nil
}

// shown is what a missed wait says the object showed: the value, and,
// when it is not the one wanted, the object's own account of where it is
// if it gives one in status.message (Argo Rollouts' "RolloutAborted:
// ..."), so that two causes of one stuck phase are told apart, by a reader
// and by a searching-on campaign's signatures.
func shown(cur *unstructured.Unstructured, value, want string) string {
	s := fmt.Sprintf("%q", value)
	if msg, ok, _ := unstructured.NestedString(cur.Object, "status", "message"); ok && msg != "" && value != want {
		if len(msg) > maxStatusMessage {
			msg = msg[:maxStatusMessage] + "…"
		}
		s += fmt.Sprintf(" (its status.message: %q)", msg)
	}
	return s
}

// maxStatusMessage bounds how much of an object's status.message a missed
// wait quotes.
const maxStatusMessage = 300

// missedWait is a required wait that timed out.
type missedWait struct {
	cond    *condition
	since   time.Duration // when the wait began, after the mark
	timeout time.Duration
}

// missedWaits are, per execution, its required waits that timed out,
// until the stuck oracle judges them (or the execution ends unjudged), and
// the first wait of any kind that timed out. After that one the workload
// went on without what it waited for (a promote sent before the pause it
// was meant for), which no user's workflow does: a required wait after it
// is not judged.
type missedWaits struct {
	mu       sync.Mutex
	m        map[*fuzz.Exec][]missedWait
	diverged map[*fuzz.Exec]*condition
}

// diverge records c as x's first wait that timed out, unless there was one.
func (m *missedWaits) diverge(x *fuzz.Exec, c *condition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.diverged == nil {
		m.diverged = map[*fuzz.Exec]*condition{}
	}
	if _, ok := m.diverged[x]; !ok {
		m.diverged[x] = c
	}
}

// track forgets x's missed waits when its execution ends, judged or not.
func (m *missedWaits) track(x *fuzz.Exec) {
	x.Go("required waits", func(ctx context.Context) error {
		<-ctx.Done()
		m.take(x)
		return nil
	})
}

func (m *missedWaits) add(x *fuzz.Exec, w missedWait) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if first, ok := m.diverged[x]; ok {
		x.Logf("workload", "required wait for %s not judged: the workflow went on after the wait for %s gave up", w.cond, first)
		return
	}
	if m.m == nil {
		m.m = map[*fuzz.Exec][]missedWait{}
	}
	m.m[x] = append(m.m[x], w)
}

func (m *missedWaits) take(x *fuzz.Exec) []missedWait {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.m[x]
	delete(m.m, x)
	delete(m.diverged, x)
	return w
}

// stuckOracle judges the required waits that timed out: a run that settled
// with one still unmet stopped short of its workflow. A run that never
// settled says nothing (its controllers may still have been at work).
func (m *missedWaits) stuckOracle() fuzz.Check {
	return fuzz.Check{Name: "stuck", Fn: func(ctx context.Context, x *fuzz.Exec, _ trace.Trace) error {
		missed := m.take(x)
		if len(missed) == 0 || !x.Settled() {
			return nil
		}
		var problems []string
		for _, w := range missed {
			met, last, err := w.cond.met(ctx, x)
			if err != nil {
				return &fuzz.HarnessError{Err: fmt.Errorf("stuck oracle: %w", err)}
			}
			if !met {
				problems = append(problems, fmt.Sprintf("%s: not reached (the workload's wait from t+%.2fs gave up after %v; still %s once the run settled)", w.cond, w.since.Seconds(), w.timeout, last))
			}
		}
		if len(problems) == 0 {
			return nil
		}
		return fmt.Errorf("the workflow stopped short of a required step though its controllers had nothing left to do (no writes for the quiet period, nothing held): %s", strings.Join(problems, "; "))
	}}
}

// startFleet makes the kubelet stand-ins of the workload's Nodes and runs
// them until the execution ends, then deletes the Nodes still there.
func startFleet(x *fuzz.Exec) *nodes.Fleet {
	f := &nodes.Fleet{Client: x.Direct}
	x.Go("node kubelets", func(ctx context.Context) error {
		err := f.Run(ctx)
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), fuzz.StopBudget)
		defer cancel()
		for _, st := range f.States() {
			if st.Present() {
				err = errors.Join(err, f.Leave(cleanup, st.Name))
			}
		}
		return err
	})
	return f
}

func nodeStep(ctx context.Context, f *nodes.Fleet, n NodeStep) error {
	switch {
	case n.Join != "":
		return f.Join(ctx, nodes.Node{Name: n.Join, Zone: n.Zone})
	case n.Stop != "":
		return f.Stop(n.Stop)
	case n.Resume != "":
		return f.Resume(ctx, n.Resume)
	default:
		return f.Leave(ctx, n.Leave)
	}
}
