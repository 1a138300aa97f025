package fuzz

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Count is the count-safety oracle for the objects of GVK in the
// execution's namespace: at no instant of the run, as the apiserver's own
// history shows it (every create, deletion and delete of the kind, watched
// straight from the apiserver in resourceVersion order from the empty
// namespace on), may more live objects (not being deleted) share one
// controller owner than Max. A duplicate counts even if it is removed
// later. Objects are grouped by their controller ownerReference, and owners
// by kind: the limit is per owner of that kind.
type Count struct {
	GVK schema.GroupVersionKind
	// Max is the most live objects one owner (one group) may have at once.
	// Zero: learned, the most any owner of the same kind (any group) had
	// in two no-fault reference runs of the same knob settings (runs whose
	// schedules only delay nothing); a setting whose reference runs were
	// not clean is not judged.
	Max int
	// GroupBy counts objects apart by the values of these labels or
	// annotations ("label:app", "annotation:cert-manager.io/certificate-revision")
	// as well as by owner: per revision or generation where an owner has
	// several at once by design. An object without one has "" there.
	// Zero: by owner alone.
	GroupBy []string
	// AcrossOwners counts objects of every owner together, grouped by
	// GroupBy alone: the Pods of all of a Deployment's ReplicaSets by
	// their app label, against replicas + maxSurge (Max).
	AcrossOwners bool
}

// group is the key objects are counted under (Count.GroupBy,
// AcrossOwners), and the kind of group a limit is learned for.
func (c Count) group(u *unstructured.Unstructured, owner, ownerKind string) (key, kind string) {
	if !c.AcrossOwners {
		key, kind = owner, ownerKind
	} else {
		kind = "group by " + strings.Join(c.GroupBy, ", ")
	}
	for _, g := range c.GroupBy {
		var v string
		if name, ok := strings.CutPrefix(g, "label:"); ok {
			v = u.GetLabels()[name]
		} else if name, ok := strings.CutPrefix(g, "annotation:"); ok {
			v = u.GetAnnotations()[name]
		}
		key += " " + g + "=" + v
	}
	return strings.TrimSpace(key), kind
}

// countPeak is the most live objects of a kind one owner had at once in a
// run, and where.
type countPeak struct {
	n     int
	owner string    // "OwnerKind name"
	names []string  // the live objects then
	at    time.Time // when the watch delivered the event that reached it
	rv    uint64
}

// counter records the history of one Count's kind in one execution.
type counter struct {
	c      Count
	mu     sync.Mutex
	events []countEvent
	err    error
}

type countEvent struct {
	at         time.Time
	rv         uint64
	typ        watch.EventType
	uid, name  string
	owner      string // its group: "Kind name" of its controller owner ("(no owner)"), and its Count.GroupBy values
	ownerKind  string // the kind of group limits are learned for: its owner's kind, or "by ..." across owners
	terminated bool   // a deletionTimestamp is set
}

// startCounts opens one watch per Count in the execution's (still empty)
// namespace, for the whole execution.
func (e *Env) startCounts(ctx context.Context, x *Exec) ([]*counter, error) {
	var out []*counter
	for _, c := range e.s.Counts {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(c.GVK.GroupVersion().WithKind(c.GVK.Kind + "List"))
		if err := e.direct.List(ctx, list, client.InNamespace(x.Namespace)); err != nil {
			return nil, fmt.Errorf("count oracle: unable to list %s in %s: %w", c.GVK.Kind, x.Namespace, err)
		}
		k := &counter{c: c}
		out = append(out, k)
		from := list.GetResourceVersion()
		x.Go("count history of "+c.GVK.Kind, func(ctx context.Context) error { return k.record(ctx, e.direct, x.Namespace, from) })
	}
	return out, nil
}

// record watches from rv until ctx ends, going on from where a watch the
// server ended was.
func (k *counter) record(ctx context.Context, c client.WithWatch, ns, rv string) error {
	for ctx.Err() == nil {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.c.GVK.GroupVersion().WithKind(k.c.GVK.Kind + "List"))
		w, err := c.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("count oracle: unable to watch %s in %s: %w", k.c.GVK.Kind, ns, err)
		}
		stop := context.AfterFunc(ctx, w.Stop)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if ev.Type == watch.Error || !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("count oracle: watch of %s in %s: %v", k.c.GVK.Kind, ns, ev.Object)
			}
			rv = u.GetResourceVersion()
			n, _ := strconv.ParseUint(rv, 10, 64)
			ce := countEvent{at: time.Now(), rv: n, typ: ev.Type, uid: string(u.GetUID()), name: u.GetName(),
				owner: "(no owner)", terminated: u.GetDeletionTimestamp() != nil}
			if ref := metav1.GetControllerOfNoCopy(u); ref != nil {
				ce.owner, ce.ownerKind = ref.Kind+" "+ref.Name, ref.Kind
			}
			ce.owner, ce.ownerKind = k.c.group(u, ce.owner, ce.ownerKind)
			if ev.Type == watch.Bookmark {
				continue
			}
			k.mu.Lock()
			k.events = append(k.events, ce)
			k.mu.Unlock()
		}
		stop()
	}
	return nil
}

// peaks replays the history: per owner kind, the most live objects one
// owner had at once.
func (k *counter) peaks() map[string]countPeak {
	k.mu.Lock()
	evs := slices.Clone(k.events)
	k.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b countEvent) int { return cmp.Compare(a.rv, b.rv) })
	live := map[string]countEvent{} // by uid
	out := map[string]countPeak{}
	for _, ev := range evs {
		if ev.typ == watch.Deleted || ev.terminated {
			delete(live, ev.uid)
		} else {
			live[ev.uid] = ev
		}
		var names []string
		for _, l := range live {
			if l.owner == ev.owner {
				names = append(names, l.name)
			}
		}
		if p := out[ev.ownerKind]; len(names) > p.n {
			slices.Sort(names)
			out[ev.ownerKind] = countPeak{n: len(names), owner: ev.owner, names: names, at: ev.at, rv: ev.rv}
		}
	}
	return out
}

// learnedOracles judges res by the oracles whose limits are learned from
// no-fault reference runs: count safety (Max, or what the reference runs
// had), lost update over any field, and end state.
func (e *Env) learnedOracles(ctx context.Context, res *Result) {
	var ref *learned
	need := e.s.needsLearned()
	if need {
		ref = e.learnedReference(ctx, res.Schedule.Knobs)
	}
	for i, c := range e.s.Counts {
		if i >= len(res.counts) {
			break
		}
		limits := map[string]int{}
		if c.Max == 0 {
			if ref == nil {
				continue
			}
			limits = ref.counts[i]
		}
		for _, ownerKind := range slices.Sorted(maps.Keys(res.counts[i])) {
			p := res.counts[i][ownerKind]
			limit, learned := c.Max, "Count.Max"
			if c.Max == 0 {
				var ok bool
				if limit, ok = limits[ownerKind]; !ok {
					continue // no reference owner of this kind: nothing learned
				}
				learned = "the no-fault reference runs"
			}
			if p.n <= limit {
				continue
			}
			res.countOver = append(res.countOver, countOver{count: i, ownerKind: ownerKind, n: p.n})
			// A grouped count says so before "at once": a known finding
			// matched by "live Pods at once" is the per-owner count's.
			sharing := ""
			if len(c.GroupBy) > 0 {
				sharing = " sharing " + strings.Join(c.GroupBy, ", ")
			}
			res.Violations = append(res.Violations, Violation{Oracle: "count", Subject: fmt.Sprintf("%s of %s", c.GVK.Kind, p.owner), At: p.at,
				Message: fmt.Sprintf("%s (namespace %s) had %d live %ss%s at once at t+%.2fs (resourceVersion %d: %s); %s never had more than %d per %s",
					p.owner, res.Namespace, p.n, c.GVK.Kind, sharing, p.at.Sub(res.Mark).Seconds(), p.rv, strings.Join(p.names, ", "), learned, limit, cmp.Or(ownerKind, "object without owner"))})
		}
	}
	if e.s.LostUpdatesAnyField && ref != nil {
		for _, l := range lostUpdatesAnyField(res.Trace, res.direct, ref.rewritten) {
			if !slices.Contains(e.s.LostUpdates, l.path) { // judged already
				res.Violations = append(res.Violations, Violation{Oracle: "lost-update", Subject: l.obj.String(), Message: l.msg, At: l.at})
			}
		}
	}
	if ref == nil || !res.Settled {
		return // an end state that is not final is not judged
	}
	if why := ref.otherWorkflow(res); why != "" {
		// Another workflow than the references' (or theirs not one
		// workflow): its end state is shown, not judged.
		for i, es := range e.s.EndStates {
			if i < len(res.ends) && res.ends[i] != nil {
				m, _ := ref.ends[i].diff(es.GVK.Kind, res.ends[i])
				res.endUnjudged = append(res.endUnjudged, m...)
			}
		}
		res.endUnjudgedWhy = why
		return
	}
	res.gaveUpAsReferences = len(res.gaveUp) > 0
	judge := func() (msgs []string) {
		res.endDiffs = nil
		for i, es := range e.s.EndStates {
			if i < len(res.ends) && res.ends[i] != nil {
				m, d := ref.ends[i].diff(es.GVK.Kind, res.ends[i])
				msgs = append(msgs, m...)
				for j := range d {
					d[j].state = i
				}
				res.endDiffs = append(res.endDiffs, d...)
			}
		}
		return msgs
	}
	msgs := judge()
	if len(msgs) > 0 && !ref.widened && isFuzzing() {
		return // not widened before fuzzing (over 16 knob settings): not judged, as the clock allows no widening
	}
	if len(msgs) > 0 && !ref.widened {
		// A difference two reference runs did not rule out may be the
		// controller's own nondeterminism: more no-fault runs widen the
		// masks (once per knob setting), and it is judged again. (While
		// fuzzing, prepareReferences widened them before the first input,
		// outside any input's clock.)
		e.widenEndStates(ctx, res.Schedule.Knobs, ref)
		msgs = judge()
	}
	for _, msg := range msgs {
		res.violateOn("end-state", endStateSubject(msg), msg)
	}
}

// endStateSubject is the object an end-state message is about, the "Kind
// name" its diff begins with ("ReplicaSet canary-66dccc9c6f: spec.replicas=2
// ..."), so that a known finding's Subject can name it as it names a
// count's.
func endStateSubject(msg string) string {
	subject, _, _ := strings.Cut(msg, ": ")
	return subject
}

// countOver is one count violation: the Count's index, the owner kind and
// the most live objects one owner had.
type countOver struct {
	count     int
	ownerKind string
	n         int
}

// widenEndStates runs EndStateConfirmations more no-fault runs of knobs
// and masks what they show differently from ref's end states.
func (e *Env) widenEndStates(ctx context.Context, knobs map[string]int, ref *learned) {
	ref.widened = true
	for range EndStateConfirmations {
		r, err := e.run(ctx, Schedule{Knobs: knobs}, runOptions{})
		if err != nil || !r.Settled || !slices.Equal(r.gaveUp, ref.gaveUp) || len(r.ends) != len(ref.ends) {
			continue
		}
		for i := range ref.ends {
			ref.ends[i].widen(r.ends[i])
		}
	}
}

// learned is what two no-fault reference runs of one knob setting taught:
// per Count, the most live objects per owner kind; per EndState, the
// objects and their masked paths.
type learned struct {
	counts []map[string]int
	ends   []endReference
	// widened says the end-state masks were widened by more no-fault runs
	// (EndStateConfirmations).
	widened bool
	// settled says both reference runs settled (the storm oracle judges
	// only knob settings whose reference runs did).
	settled bool
	// rewritten are the fields a controller changed in the reference runs
	// (anyFieldKey), which Scenario.LostUpdatesAnyField does not judge.
	rewritten map[string]bool
	// gaveUp are the waits that gave up in both reference runs
	// (Result.gaveUp), sorted: a wait that times out by design, every
	// run, is part of the workflow.
	gaveUp []string
	// diverged says how the two reference runs' waits differed (one gave
	// up in one run only): their workflow is not one, and no end state of
	// this knob setting is judged. Empty when the same waits gave up in
	// both (or none).
	diverged string
}

// otherWorkflow says why res's workflow is not the one ref's reference
// runs ran, as the report reads it, or "" when the same waits gave up in
// it as in both of them (none, or those that time out by design).
func (ref *learned) otherWorkflow(res *Result) string {
	if ref.diverged != "" {
		return fmt.Sprintf("the no-fault reference runs' workflow diverged (%s)", ref.diverged)
	}
	for _, w := range res.gaveUp {
		if !slices.Contains(ref.gaveUp, w) {
			return fmt.Sprintf("this run's workflow diverged (%s)", w)
		}
	}
	for _, w := range ref.gaveUp {
		if !slices.Contains(res.gaveUp, w) {
			return fmt.Sprintf("this run's workflow diverged (%s in both no-fault reference runs, not in this one)", w)
		}
	}
	return ""
}

// gaveUpDiffer says how two runs' waits that gave up differ ("" when
// they are the same), naming the first wait that gave up in one only.
func gaveUpDiffer(a, b []string) string {
	for _, w := range slices.Concat(a, b) {
		if slices.Contains(a, w) != slices.Contains(b, w) {
			return w + " in one reference run only"
		}
	}
	return ""
}

// learnedReference runs the two no-fault reference runs of knobs on first
// need; nil when either was not clean (a harness error, a violation, an
// unsettled run when end states are judged).
func (e *Env) learnedReference(ctx context.Context, knobs map[string]int) *learned {
	key := fmt.Sprint(knobs)
	if ref, ok := e.learnedRefs[key]; ok {
		return ref
	}
	e.learnedRefs[key] = nil
	ref := &learned{counts: make([]map[string]int, len(e.s.Counts)), settled: true, rewritten: map[string]bool{}}
	var ends [2][]endObjects
	for run := range 2 {
		res, err := e.run(ctx, Schedule{Knobs: knobs}, runOptions{})
		if why := uncleanReference(res, err, len(ref.counts), len(e.s.EndStates)); why != "" {
			if e.unclean == nil {
				e.unclean = map[string]string{}
			}
			e.unclean[key] = fmt.Sprintf("reference run %d of 2: %s", run+1, why)
			return nil
		}
		for i, peaks := range res.counts {
			if ref.counts[i] == nil {
				ref.counts[i] = map[string]int{}
			}
			for kind, p := range peaks {
				ref.counts[i][kind] = max(ref.counts[i][kind], p.n)
			}
		}
		ends[run] = res.ends
		if run == 0 && e.refRuns != nil {
			e.refRuns[key] = res
		}
		ref.settled = ref.settled && res.Settled
		if run == 0 {
			ref.gaveUp = res.gaveUp
		} else if d := gaveUpDiffer(ref.gaveUp, res.gaveUp); d != "" {
			ref.diverged, ref.gaveUp = d, nil
		}
		rewrittenFields(res.Trace, res.direct, ref.rewritten)
	}
	for i := range e.s.EndStates {
		ref.ends = append(ref.ends, newEndReference(ends[0][i], ends[1][i]))
	}
	e.learnedRefs[key] = ref
	return ref
}

// uncleanReference says why a no-fault reference run cannot teach the
// learned oracles, or "" when it can: a harness error, a violation, count
// oracles that did not all record, or, where end states are judged, a run
// that never settled or whose end state was not read.
func uncleanReference(res *Result, err error, counts, endStates int) string {
	switch {
	case err != nil:
		return fmt.Sprintf("a harness error: %v", err)
	case len(res.Violations) > 0:
		v := res.Violations[0]
		msg := strings.ReplaceAll(v.Message, "\n", " ")
		if len(msg) > 300 {
			msg = strings.ToValidUTF8(msg[:300], "") + "..."
		}
		return fmt.Sprintf("a violation, [%s] %s", v.Oracle, msg)
	case len(res.counts) != counts:
		return fmt.Sprintf("%d of its %d count oracles recorded", len(res.counts), counts)
	case endStates > 0 && !res.Settled:
		return "it never settled, so its end state cannot be a reference"
	case endStates > 0 && len(res.ends) != endStates:
		return fmt.Sprintf("%d of its %d end states read", len(res.ends), endStates)
	}
	return ""
}

// needsLearned says whether an oracle of s learns from the no-fault
// reference runs (besides Storm, which only asks whether they settled).
func (s *Scenario) needsLearned() bool {
	return len(s.EndStates) > 0 || s.LostUpdatesAnyField || slices.ContainsFunc(s.Counts, func(c Count) bool { return c.Max == 0 })
}
