package fuzz

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// check runs every oracle the scenario enables, recording violations in res.
// It returns a *HarnessError when the run cannot be judged: an object not
// converged in a run that never settled.
func (e *Env) check(ctx context.Context, x *Exec, res *Result) error {
	if c := e.s.Converge; c != nil {
		if err := e.convergence(ctx, x, c, res); err != nil {
			return err
		}
	}
	for _, path := range e.s.LostUpdates {
		for _, l := range lostUpdates(res.Trace, path) {
			res.Violations = append(res.Violations, Violation{Oracle: "lost-update", Subject: l.obj.String(), Message: l.msg, At: l.at})
		}
	}
	for _, c := range e.s.Checks {
		if err := c.Fn(ctx, x, res.Trace); err != nil {
			res.violate(c.Name, err.Error())
		}
	}
	return nil
}

// convergence: every object of the kind has observedGeneration == generation
// and Ready=True. Not converged after the run settled (the lag over, then no
// writes for the quiet period) is "stuck". Not converged while the
// controllers were still writing when the settle budget ran out is
// "convergence" only when they were retrying without progress: since the lag
// was over, at least minFailedRetries writes and not one of them succeeded
// (a cache that never catches up meets 409 after 409). Otherwise the run
// says nothing: on a loaded machine a healthy controller is slow, and that
// run is a harness error (retried), never a finding.
func (e *Env) convergence(ctx context.Context, x *Exec, c *Convergence, res *Result) error {
	ready := c.Ready
	if ready == "" {
		ready = "Ready"
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(c.GVK.GroupVersion().WithKind(c.GVK.Kind + "List"))
	if err := e.direct.List(ctx, list, client.InNamespace(x.Namespace)); err != nil {
		return harness("unable to list %s in %s to judge convergence: %w", c.GVK.Kind, x.Namespace, err)
	}
	res.Converged = true
	for _, o := range list.Items {
		var problems []string
		gen := o.GetGeneration()
		og, found, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
		if !found || og != gen {
			problems = append(problems, fmt.Sprintf("want observedGeneration %d, got %s", gen, orMissing(found, og)))
		}
		if st := conditionStatus(&o, ready); st != "True" {
			problems = append(problems, fmt.Sprintf("want condition %s=True, got %s", ready, or(st, "none")))
		}
		if len(problems) == 0 {
			continue
		}
		res.Converged = false
		obj := fmt.Sprintf("%s %s/%s", c.GVK.Kind, o.GetNamespace(), o.GetName())
		if res.Settled {
			res.violateOn("stuck", obj, fmt.Sprintf("%s: settled (lag over, no writes, nothing held) but not converged: %s", obj, strings.Join(problems, "; ")))
			continue
		}
		ok, failed, conflicts := writesSince(res.Trace, x.lagOver)
		if x.lagOver.IsZero() || ok > 0 || failed < minFailedRetries {
			return &HarnessError{Err: fmt.Errorf("%s not converged (%s) and the run never settled: its controllers were still at work %v after the lag ended (%d writes succeeded, %d failed since), so convergence cannot be judged: a slow machine, not a finding",
				obj, strings.Join(problems, "; "), SettleBudget*e.slack, ok, failed), Unsettled: true}
		}
		res.violateOn("convergence", obj, fmt.Sprintf("%s: not converged, its controllers retrying without progress: since the lag was over, %d writes, none succeeded (%d answered 409 Conflict): %s",
			obj, failed, conflicts, strings.Join(problems, "; ")))
	}
	return nil
}

// minFailedRetries is how many writes, all failed, since the lag was over
// make an unsettled run one of no progress rather than a slow one.
const minFailedRetries = 3

// writesSince counts the writes answered after since: those that
// succeeded, those that failed, and of those the 409s.
func writesSince(tr trace.Trace, since time.Time) (ok, failed, conflicts int) {
	for i := range tr.Requests {
		r := &tr.Requests[i]
		if !r.IsWrite() || r.DryRun || r.Code == 0 || r.Start.Before(since) {
			continue
		}
		switch {
		case r.Code/100 == 2:
			ok++
		case r.Code == 409:
			failed++
			conflicts++
		default:
			failed++
		}
	}
	return ok, failed, conflicts
}

func orMissing(found bool, v int64) string {
	if !found {
		return "none"
	}
	return strconv.FormatInt(v, 10)
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// conditionStatus returns status.conditions[type=t].status, or "".
func conditionStatus(o *unstructured.Unstructured, t string) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == t {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// lostUpdates finds acknowledged values of path that a later successful write
// replaced although its writer's view of the object predated them: a value a
// writer saw acknowledged, overwritten by a write based on a stale view.
//
// A client's view of an object is what package trace defines it to be
// (trace.Views), the definition the blind-write audit uses too.
func lostUpdates(tr trace.Trace, path string) []lost {
	type ack struct {
		r  trace.Request
		rv uint64
		v  string
	}
	var writes []ack
	for _, r := range tr.Requests {
		v, ok := r.Fields[path]
		rv, err := strconv.ParseUint(r.ReturnedRV, 10, 64)
		if ok && err == nil && r.IsWrite() && !r.DryRun && r.Code/100 == 2 {
			writes = append(writes, ack{r, rv, v})
		}
	}
	slices.SortFunc(writes, func(a, b ack) int { return cmp.Compare(a.rv, b.rv) })
	views := trace.NewViews(tr)
	var out []lost
	latest := map[trace.Object]ack{} // object → last acknowledged value
	for _, w := range writes {
		obj := w.r.Object()
		prev, seen := latest[obj]
		latest[obj] = w
		if !seen || prev.v == w.v {
			continue
		}
		view := views.Seen(w.r.Client, obj, w.r.Start)
		if view >= prev.rv {
			continue // the writer had seen the value it replaced
		}
		out = append(out, lost{at: w.r.Start, obj: obj, msg: fmt.Sprintf(
			"%s: %s=%s, acknowledged to %s at resourceVersion %d, was replaced by %s=%s from %s (%s %s, no precondition: %v), whose view was at resourceVersion %d",
			obj, path, prev.v, prev.r.Client, prev.rv, path, w.v, w.r.Client, w.r.Verb, w.r.Subresource, w.r.SentRV == "", view)})
	}
	return out
}

// lost is one lost update: when the replacing write was sent, to which
// object, and what it replaced.
type lost struct {
	at  time.Time
	obj trace.Object
	msg string
}

// differential compares the final state with the no-lag reference run for
// the same knob settings.
func (e *Env) differential(ctx context.Context, res *Result) {
	d := e.s.Differential
	want, ok := e.reference(ctx, res.Schedule.Knobs)
	if !ok {
		return // no trustworthy reference: the other oracles speak for this run
	}
	got, err := e.snapshot(ctx, res.Namespace, d)
	if err != nil {
		res.violate("differential", err.Error())
		return
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		res.violate("differential", fmt.Sprintf("final %s state differs from the no-lag reference run (-reference +this run):\n%s", d.GVK.Kind, diff))
	}
}

// reference returns the final state of a no-lag run with these knobs,
// running it on first need; false if that run was not clean.
func (e *Env) reference(ctx context.Context, knobs map[string]int) (map[string]any, bool) {
	key := fmt.Sprint(knobs)
	if want, ok := e.refs[key]; ok {
		return want, want != nil
	}
	e.refs[key] = nil
	ref, err := e.run(ctx, Schedule{Knobs: knobs}, runOptions{})
	if err != nil || len(ref.Violations) > 0 {
		return nil, false
	}
	want, err := e.snapshot(ctx, ref.Namespace, e.s.Differential)
	if err != nil {
		return nil, false
	}
	e.refs[key] = want
	return want, true
}

// snapshot is the normalized final state of the differential's kind: objects
// by name, without metadata and the ignored paths.
func (e *Env) snapshot(ctx context.Context, ns string, d *Differential) (map[string]any, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(d.GVK.GroupVersion().WithKind(d.GVK.Kind + "List"))
	if err := e.direct.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("unable to list %s in %s: %v", d.GVK.Kind, ns, err)
	}
	out := map[string]any{}
	for _, o := range list.Items {
		obj := o.DeepCopy().Object
		delete(obj, "metadata")
		for _, p := range d.Ignore {
			unstructured.RemoveNestedField(obj, strings.Split(p, ".")...)
		}
		out[o.GetName()] = obj
	}
	return out, nil
}
