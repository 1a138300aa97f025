package fuzz

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
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
	x.mu.Lock()
	direct := slices.Clone(x.directWrites)
	x.mu.Unlock()
	res.direct = direct
	for _, path := range e.s.LostUpdates {
		for _, l := range lostUpdates(res.Trace, path, direct...) {
			res.Violations = append(res.Violations, Violation{Oracle: "lost-update", Subject: l.obj.String(), Message: l.msg, At: l.at})
		}
	}
	crashes(x, res)
	for _, c := range e.s.Checks {
		err := c.Fn(ctx, x, res.Trace)
		if h, ok := errors.AsType[*HarnessError](err); ok {
			return h
		}
		if err != nil {
			res.violate(c.Name, err.Error())
		}
	}
	return nil
}

// convergence: every object of the kind has observedGeneration == generation
// and Ready=True, or is kstatus Current (Convergence.KStatus). Not converged
// after the run settled (the lag over, then no writes for the quiet period)
// is "stuck". Not converged while the controllers were still writing when
// the settle budget ran out is "convergence" only when they were retrying
// without progress (noProgress): a cache that never catches up meets 409
// after 409, or repeats a patch the apiserver already holds, which returns
// the same resourceVersion.
// Otherwise the run says nothing: on a loaded machine a healthy controller
// is slow, and that run is a harness error (retried), never a finding.
func (e *Env) convergence(ctx context.Context, x *Exec, c *Convergence, res *Result) error {
	unconverged, err := e.unconverged(ctx, x, c)
	if err != nil {
		return harness("%w", err)
	}
	res.Converged = len(unconverged) == 0
	for _, u := range unconverged {
		obj, problems := u.obj, u.problems
		if res.Settled {
			res.violateOn("stuck", obj, fmt.Sprintf("%s: settled (lag over, no writes, nothing held) but not converged: %s", obj, strings.Join(problems, "; ")))
			continue
		}
		w := writesSince(res.Trace, x.lagOver)
		if x.lagOver.IsZero() {
			return &HarnessError{Err: fmt.Errorf("%s not converged (%s) and the run never settled: its lag never ended (a watch not opened again, a restart or a lagging apiserver not done) within the budget, so convergence cannot be judged: a slow machine, not a finding",
				obj, strings.Join(problems, "; ")), Unsettled: true}
		}
		if !w.stalled(x.lagOver, x.settleEnd, e.s.quiet()) {
			return &HarnessError{Err: fmt.Errorf("%s not converged (%s) and the run never settled: its controllers were still at work %v after the lag ended (since then %s), so convergence cannot be judged: a slow machine, not a finding",
				obj, strings.Join(problems, "; "), x.settleEnd.Sub(x.lagOver).Round(time.Millisecond), w), Unsettled: true}
		}
		res.violateOn("convergence", obj, fmt.Sprintf("%s: not converged, its controllers retrying without progress: since the lag was over, %s; %d writes since the last that changed an object: %s",
			obj, w, w.retries, strings.Join(problems, "; ")))
	}
	return nil
}

// unconvergedObject is an object of the Convergence kind that has not
// converged, and how.
type unconvergedObject struct {
	obj      string // "Kind ns/name"
	problems []string
}

// unconverged lists the objects of c's kind in the execution's namespace
// that have not converged (see Convergence.problems).
func (e *Env) unconverged(ctx context.Context, x *Exec, c *Convergence) ([]unconvergedObject, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(c.GVK.GroupVersion().WithKind(c.GVK.Kind + "List"))
	if err := e.direct.List(ctx, list, client.InNamespace(x.Namespace)); err != nil {
		return nil, fmt.Errorf("unable to list %s in %s to judge convergence: %w", c.GVK.Kind, x.Namespace, err)
	}
	var out []unconvergedObject
	for i := range list.Items {
		o := &list.Items[i]
		name := fmt.Sprintf("%s %s/%s", c.GVK.Kind, o.GetNamespace(), o.GetName())
		problems, err := c.problems(o)
		if err != nil {
			return nil, fmt.Errorf("unable to judge the convergence of %s: %w", name, err)
		}
		if len(problems) > 0 {
			out = append(out, unconvergedObject{name, problems})
		}
	}
	return out, nil
}

// problems says how o has not converged; none if it has. Without KStatus:
// observedGeneration != generation, or the Ready condition not True. With
// it: kstatus' status other than Current.
func (c *Convergence) problems(o *unstructured.Unstructured) ([]string, error) {
	if c.KStatus {
		return kstatusProblems(o)
	}
	ready := c.Ready
	if ready == "" {
		ready = "Ready"
	}
	var problems []string
	gen := o.GetGeneration()
	og, found, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
	if !found || og != gen {
		problems = append(problems, fmt.Sprintf("want observedGeneration %d, got %s", gen, orMissing(found, og)))
	}
	if st := conditionStatus(o, ready); st != "True" {
		problems = append(problems, fmt.Sprintf("want condition %s=True, got %s", ready, or(st, "none")))
	}
	return problems, nil
}

// kstatusProblems says why kstatus does not compute Current for o: its
// status and message, the condition it derived them from and that
// condition's reason, and observedGeneration against generation where the
// status has one. It fails only when kstatus cannot read o's status
// (conditions of another shape, say).
func kstatusProblems(o *unstructured.Unstructured) ([]string, error) {
	r, err := kstatus.Compute(o)
	if err != nil {
		return nil, fmt.Errorf("kstatus cannot compute its status: %w", err)
	}
	if r.Status == kstatus.CurrentStatus {
		return nil, nil
	}
	p := fmt.Sprintf("want kstatus %s, got %s: %q", kstatus.CurrentStatus, r.Status, r.Message)
	for _, cond := range r.Conditions {
		p += fmt.Sprintf(" (%s=%s, reason %s)", cond.Type, cond.Status, or(cond.Reason, "none"))
	}
	problems := []string{p}
	if og, found, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration"); found {
		problems = append(problems, fmt.Sprintf("observedGeneration %d, generation %d", og, o.GetGeneration()))
	}
	return problems, nil
}

// convergedNow reports whether the execution's objects have converged now,
// or the scenario has no Convergence oracle (nothing to confirm); false if
// they cannot be read.
func (e *Env) convergedNow(ctx context.Context, x *Exec) bool {
	if e.s.Converge == nil {
		return true
	}
	u, err := e.unconverged(ctx, x, e.s.Converge)
	return err == nil && len(u) == 0
}

// minFailedRetries is the fewest writes that failed or changed nothing in
// a run of no progress.
const minFailedRetries = 3

// noProgress says the writes since the lag was over were retries that get
// nowhere, not a slow controller's work: none changed an object and at
// least minFailedRetries were sent since the last write that did; or at
// least minFailedRetries failed or changed nothing and they outnumber those
// that changed an object. Once the lag is over the caches are current, and
// a healthy controller's writes succeed, however slow the machine.
func (w writeOutcomes) noProgress() bool {
	wasted := w.noops + w.conflicts + w.failed
	return (w.changed == 0 && w.retries >= minFailedRetries) || (wasted >= minFailedRetries && wasted > w.changed)
}

// stalled says the writes since lagOver got nowhere (noProgress), and that
// they are what kept the run from settling: from the last write that
// changed an object (or the lag's end) to end, when settling gave up, there
// was at least quiet, so without them the run would have settled. Less
// than quiet, the settle budget ran out first: a healthy controller's round
// of unconditional writes on a loaded machine, cut off by the budget
// (prometheus-operator's reconcile rewrites a dozen unchanged Secrets and
// Services on each StatefulSet status event), is a run that never
// settled, never a finding. A controller retrying now and then without
// progress (FluxCD's requeue after a lost event) stalls however sparse its
// writes.
func (w writeOutcomes) stalled(lagOver, end time.Time, quiet time.Duration) bool {
	return w.noProgress() && end.Sub(maxTime(w.lastChange, lagOver)) >= quiet
}

// writeOutcomes counts writes by what they did.
type writeOutcomes struct {
	changed   int // stored a new resourceVersion of their object
	noops     int // succeeded, but the object's resourceVersion did not move
	conflicts int // 409 Conflict
	failed    int // another error
	// retries are the writes, over the whole run, sent after the last
	// write that changed an object.
	retries int
	// lastChange is when the last write, over the whole run, that changed
	// an object was sent.
	lastChange time.Time
}

func (w writeOutcomes) all() int { return w.changed + w.noops + w.conflicts + w.failed }

func (w writeOutcomes) String() string {
	return fmt.Sprintf("%d writes: %d changed an object, %d changed nothing (the apiserver already held what they wrote), %d met 409 Conflict, %d failed otherwise",
		w.all(), w.changed, w.noops, w.conflicts, w.failed)
}

// writesSince sorts the writes sent from since on by what they did. A
// successful write changed its object when it returned a resourceVersion
// newer than any returned for that object before it.
func writesSince(tr trace.Trace, since time.Time) writeOutcomes {
	var w writeOutcomes
	newest := map[trace.Object]uint64{}
	reqs := slices.Clone(tr.Requests)
	slices.SortStableFunc(reqs, func(a, b trace.Request) int { return a.Start.Compare(b.Start) })
	for i := range reqs {
		r := &reqs[i]
		rv, rvErr := strconv.ParseUint(r.ReturnedRV, 10, 64)
		obj := r.Object()
		changed := rvErr == nil && rv > newest[obj]
		if rvErr == nil && r.Code/100 == 2 {
			newest[obj] = max(newest[obj], rv)
		}
		if !r.IsWrite() || r.DryRun || r.Code == 0 {
			continue
		}
		if r.Code/100 == 2 && changed {
			w.retries = 0
			w.lastChange = r.Start
		} else {
			w.retries++
		}
		if r.Start.Before(since) {
			continue
		}
		switch {
		case r.Code/100 == 2 && changed:
			w.changed++
		case r.Code/100 == 2:
			w.noops++
		case r.Code == 409:
			w.conflicts++
		default:
			w.failed++
		}
	}
	return w
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
// (trace.Views), the definition the blind-write audit uses too. The
// workload's own writes (direct, through Exec.Direct, which the trace does
// not see) are acknowledged values too: a controller that overwrites the
// user's edit from a view that predates it loses an update as surely as one
// that overwrites another controller's.
//
// The values are what the writes' answers held (trace.Request.Fields): a
// write whose body cannot have set the path (a status patch, for a spec
// path: its answer shows the spec someone else changed) records the value
// it found, and is never the write that replaced it.
func lostUpdates(tr trace.Trace, path string, direct ...directWrite) []lost {
	status := statusResources(tr)
	return lostUpdatesOf(tr, path, trace.NewViews(tr), direct,
		func(r *trace.Request) (string, bool) { v, ok := r.Fields[path]; return v, ok },
		func(d directWrite) (string, bool) { v, ok := d.fields[path]; return v, ok },
		func(r *trace.Request) bool { return maySet(r, path, status) })
}

// maySet reports whether r's body can have set path: it set the path, a
// path inside it or around it; or its body is not known whole (no Write,
// or Write.Set truncated). A status write sets status paths only, a
// main-resource write of a resource with a status subresource (status)
// none of them.
func maySet(r *trace.Request, path string, status map[string]bool) bool {
	isStatus := path == "status" || strings.HasPrefix(path, "status.")
	switch {
	case r.Subresource == "status" && !isStatus:
		return false
	case r.Subresource == "" && isStatus && status[r.APIGroup+"/"+r.Resource]:
		return false
	case r.Write == nil || r.Write.Truncated:
		return true
	}
	for p := range r.Write.Set {
		if p == path || strings.HasPrefix(p, path+".") || strings.HasPrefix(path, p+".") {
			return true
		}
	}
	return false
}

// lostUpdatesOf is lostUpdates with the values of path read by value (a
// request's) and directValue (a workload write's).
func lostUpdatesOf(tr trace.Trace, path string, views *trace.Views, direct []directWrite, value func(*trace.Request) (string, bool), directValue func(directWrite) (string, bool), sets func(*trace.Request) bool) []lost {
	type ack struct {
		r  trace.Request
		rv uint64
		v  string
		// user: a write of the workload's (Exec.Direct): a value
		// acknowledged to the user, which a controller must not lose; the
		// user's own writes are never judged.
		user bool
	}
	var writes []ack
	for _, d := range direct {
		if v, ok := directValue(d); ok {
			writes = append(writes, ack{r: trace.Request{Client: "the workload", APIGroup: d.obj.Group, Resource: d.obj.Resource, Namespace: d.obj.Namespace, Name: d.obj.Name, Start: d.at}, rv: d.rv, v: v, user: true})
		}
	}
	for i := range tr.Requests {
		r := &tr.Requests[i]
		v, ok := value(r)
		rv, err := strconv.ParseUint(r.ReturnedRV, 10, 64)
		if ok && err == nil && r.IsWrite() && !r.DryRun && r.Code/100 == 2 {
			writes = append(writes, ack{r: *r, rv: rv, v: v})
		}
	}
	slices.SortFunc(writes, func(a, b ack) int { return cmp.Compare(a.rv, b.rv) })
	var out []lost
	latest := map[trace.Object]ack{} // object → last acknowledged value
	// lostBy holds, per object whose latest value replaced one it had not
	// seen, that replaced value: a write that puts it back repairs the
	// loss and is not another one.
	lostBy := map[trace.Object]string{}
	for _, w := range writes {
		obj := w.r.Object()
		prev, seen := latest[obj]
		latest[obj] = w
		replaced, repairs := lostBy[obj]
		delete(lostBy, obj)
		if !seen || prev.v == w.v || w.user || (repairs && w.v == replaced) || !sets(&w.r) {
			continue
		}
		view := views.Seen(w.r.Client, obj, w.r.Start)
		if view >= prev.rv {
			continue // the writer had seen the value it replaced
		}
		lostBy[obj] = prev.v
		acked := "acknowledged to " + prev.r.Client
		if !prev.user && prev.r.Unanswered() {
			// Stored all the same, and shown to every watch: what its
			// writer was told (a cut, lost or reset answer) changes nothing
			// of what it replaced.
			acked = "stored by " + prev.r.Client + " (its answer " + or(string(prev.r.FaultKind), "abandoned") + ": never acknowledged)"
		}
		out = append(out, lost{at: w.r.Start, obj: obj, path: path, msg: fmt.Sprintf(
			"%s: %s=%s, %s at resourceVersion %d, was replaced by %s=%s from %s (%s %s, no precondition: %v), whose view was at resourceVersion %d",
			obj, path, prev.v, acked, prev.rv, path, w.v, w.r.Client, w.r.Verb, w.r.Subresource, w.r.SentRV == "", view)})
	}
	return out
}

// lost is one lost update: when the replacing write was sent, to which
// object, and what it replaced.
type lost struct {
	at   time.Time
	obj  trace.Object
	path string
	msg  string
}

// differential compares the final state with the no-lag reference run for
// the same knob settings. A run whose workload waits gave up (Exec.Diverged)
// is judged only when the same waits gave up in the reference runs: the
// workflow as written, as the end-state oracle judges it.
func (e *Env) differential(ctx context.Context, res *Result) {
	d := e.s.Differential
	want, gaveUp, ok := e.reference(ctx, res.Schedule.Knobs)
	if !ok {
		return // no trustworthy reference: the other oracles speak for this run
	}
	if !slices.Equal(res.gaveUp, gaveUp) {
		return // another workflow than the reference run's (Exec.Diverged)
	}
	res.gaveUpAsReferences = len(gaveUp) > 0
	if res.finalErr != nil {
		res.violate("differential", res.finalErr.Error())
		return
	}
	if diff := gocmp.Diff(want, res.final); diff != "" {
		res.violate("differential", fmt.Sprintf("final %s state differs from the no-lag reference run (-reference +this run):\n%s", d.GVK.Kind, diff))
	}
}

// reference returns the final state of a no-lag run with these knobs,
// running it on first need, and the workload waits that gave up in it;
// false if that run was not clean. A reference run whose waits gave up is
// trusted only when a second no-lag run gives up the same ones: a wait that
// gives up every time is the workflow as written, one that gave up once is
// chance.
func (e *Env) reference(ctx context.Context, knobs map[string]int) (map[string]any, []string, bool) {
	key := fmt.Sprint(knobs)
	if want, ok := e.refs[key]; ok {
		return want, e.refsGaveUp[key], want != nil
	}
	e.refs[key] = nil
	clean := func(ref *Result, err error) bool {
		return err == nil && len(ref.Violations) == 0 && ref.finalErr == nil && ref.Settled
	}
	ref, err := e.run(ctx, Schedule{Knobs: knobs}, runOptions{})
	if !clean(ref, err) {
		return nil, nil, false
	}
	if len(ref.gaveUp) > 0 {
		again, err := e.run(ctx, Schedule{Knobs: knobs}, runOptions{})
		if !clean(again, err) || !slices.Equal(again.gaveUp, ref.gaveUp) {
			return nil, nil, false
		}
	}
	e.refs[key], e.refsGaveUp[key] = ref.final, ref.gaveUp
	return ref.final, ref.gaveUp, true
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

// crashes adds a violation per controller process that exited on its own
// (outside a restart the schedule asked for) and per Go panic a controller
// logged, printed ("panic: ") or recovered (controller-runtime's "Observed
// a panic"): each names the controller and gives its stack (the lines after
// the panic: Go's goroutine dump, a Python traceback), or its last lines
// when it printed none.
func crashes(x *Exec, res *Result) {
	x.mu.Lock()
	cs := slices.Clone(x.crashes)
	x.mu.Unlock()
	logs := x.logs.logs() // res.Logs is taken once the controllers stopped
	byClient := map[string][]string{}
	for _, l := range logs.Lines {
		byClient[l.Client] = append(byClient[l.Client], l.Text)
	}
	for _, c := range cs {
		ls := byClient[c.client]
		what := "(it logged nothing)"
		if i := lastPanic(ls); i >= 0 {
			what = "its panic: " + strings.Join(stackAt(ls, i), " | ")
		} else if len(ls) > 0 {
			what = "its last lines: " + strings.Join(ls[max(0, len(ls)-3):], " | ")
		}
		res.Violations = append(res.Violations, Violation{Oracle: "crash", Subject: "controller " + c.client, At: c.at,
			Message: fmt.Sprintf("controller %s exited on its own at t+%.2fs, outside any restart the schedule asked for (%v); %s", c.client, c.at.Sub(res.Mark).Seconds(), c.err, what)})
	}
	seen := map[string]int{} // client → lines of it read so far
	for _, l := range logs.Lines {
		n := seen[l.Client]
		seen[l.Client]++
		if isPanic(l.Text) {
			res.Violations = append(res.Violations, Violation{Oracle: "crash", Subject: "controller " + l.Client, At: l.At,
				Message: fmt.Sprintf("controller %s panicked at t+%.2fs: %s", l.Client, l.At.Sub(res.Mark).Seconds(), strings.Join(stackAt(byClient[l.Client], n), " | "))})
		}
	}
}

// maxStack bounds the lines of a stack a crash's message gives.
const maxStack = 24

// isPanic reports whether a log line starts a Go panic, printed or
// recovered by controller-runtime.
func isPanic(line string) bool {
	return strings.HasPrefix(line, "panic: ") || strings.Contains(line, "Observed a panic")
}

// lastPanic is the index of the last line of ls that starts a crash's
// story (a Go panic, a Go runtime's fatal error, a Python traceback), or -1.
func lastPanic(ls []string) int {
	for i := len(ls) - 1; i >= 0; i-- {
		if isPanic(ls[i]) || strings.HasPrefix(ls[i], "fatal error: ") || strings.HasPrefix(ls[i], "Traceback (most recent call last)") {
			return i
		}
	}
	return -1
}

// stackAt is line i of ls and the stack that follows it, up to maxStack
// lines, blank lines left out: it ends at the next line a logger wrote
// (JSON, klog's "I1127 ", a timestamp), as after a panic controller-runtime
// recovered.
func stackAt(ls []string, i int) []string {
	out := []string{ls[i]}
	for _, l := range ls[i+1:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if loggerLine.MatchString(l) {
			break
		}
		if len(out) == maxStack {
			out = append(out, "...")
			break
		}
		out = append(out, l)
	}
	return out
}

// loggerLine matches a line a logger wrote: JSON, klog's header, or one
// that starts with a date.
var loggerLine = regexp.MustCompile(`^(\{|[IWEF]\d{4} \d\d:|\d{4}-\d\d-\d\d)`)
