package fuzz

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// StormFlaps is how many times a field must be set back to the value it
// held just before the last, since the faults were over, for the storm
// oracle to call the writes a circle: three returns are A B A B A, two
// writers or one confused one undoing each other, which no healthy
// controller does once its caches are current.
const StormFlaps = 3

// storm describes, for an unsettled run, how its controllers' writes since
// lagOver got nowhere and kept it from settling by end, when settling gave
// up (writeOutcomes.stalled); "" when they made progress, or when the
// settle budget ran out less than quiet after the last progress (a slow
// machine, not a storm). It reads the trace only.
func storm(tr trace.Trace, mark, lagOver, end time.Time, quiet time.Duration) string {
	if lagOver.IsZero() {
		return ""
	}
	w := writesSince(tr, lagOver)
	// Writes after the faults are what a storm is: retries that got
	// nowhere before the faults were over, and none since, are a run that
	// went quiet (a KubeRay campaign's report, 0 writes since t+5.02 s).
	if w.all() >= minFailedRetries && w.stalled(lagOver, end, quiet) {
		return fmt.Sprintf("once the faults were over (t+%.2fs) its controllers kept writing without progress: %s; %d writes since the last that changed an object, in the %.2fs before settling gave up, more than the %v quiet period (by %s)",
			lagOver.Sub(mark).Seconds(), w, w.retries, end.Sub(maxTime(w.lastChange, lagOver)).Seconds(), quiet, strings.Join(writersSince(tr, lagOver), ", "))
	}
	if f, ok := flapping(tr, mark, lagOver); ok {
		return f
	}
	return ""
}

// writersSince lists the clients that wrote from since on.
func writersSince(tr trace.Trace, since time.Time) []string {
	var cs []string
	for _, r := range tr.Requests {
		if r.IsWrite() && !r.DryRun && !r.Start.Before(since) && !slices.Contains(cs, r.Client) {
			cs = append(cs, r.Client)
		}
	}
	slices.Sort(cs)
	return cs
}

// flapping finds a field of one object that successful writes from since
// on set back StormFlaps times or more to the value it held just before
// the last (a → b → a → b), the last write one of those returns, and
// describes it.
func flapping(tr trace.Trace, mark, since time.Time) (string, bool) {
	type field struct {
		obj  trace.Object
		path string
	}
	type history struct {
		values  []string // distinct consecutive values, in write order
		returns int
		clients []string
		// lastNew says the last value written was not a return (not
		// the value held just before the last): the field ended on
		// progress.
		lastNew bool
		// returnedAt are the times of the returns.
		returnedAt []time.Time
	}
	// progress is a write that set a field of an object to a value it had
	// not held since the faults were over.
	type progress struct {
		at   time.Time
		path string
	}
	reqs := slices.Clone(tr.Requests)
	slices.SortStableFunc(reqs, func(a, b trace.Request) int { return a.Start.Compare(b.Start) })
	hs := map[field]*history{}
	held := map[field]map[string]bool{} // values without their times
	progressed := map[trace.Object][]progress{}
	var order []field
	for _, r := range reqs {
		if !r.IsWrite() || r.DryRun || r.Code/100 != 2 || r.Write == nil || r.Start.Before(since) {
			continue
		}
		for path, v := range r.Write.Set {
			f := field{r.Object(), path}
			h := hs[f]
			if h == nil {
				h = &history{}
				hs[f] = h
				held[f] = map[string]bool{}
				order = append(order, f)
			}
			if nv := timeless(v); !held[f][nv] {
				held[f][nv] = true
				if !strings.HasSuffix(path, "observedGeneration") {
					progressed[f.obj] = append(progressed[f.obj], progress{r.Start, path})
				}
			}
			n := len(h.values)
			if n > 0 && h.values[n-1] == v {
				continue
			}
			// A return is a flap, set back to the value just before
			// the last (a → b → a). A value held longer ago is not:
			// a Rollout's second version walks the steps its first
			// walked (currentStepIndex 0, 1, 2, ... again; Argo
			// Rollouts' workflows target, two campaigns' false alarms).
			back := n >= 2 && h.values[n-2] == v
			h.lastNew = !back
			if back {
				h.returns++
				h.returnedAt = append(h.returnedAt, r.Start)
			}
			h.values = append(h.values, v)
			if !slices.Contains(h.clients, r.Client) {
				h.clients = append(h.clients, r.Client)
			}
		}
	}
	for _, f := range order {
		h := hs[f]
		// A field that circled and then took a value it had never held
		// made progress: what kept the run from settling was that late
		// write, not the circle (KEDA campaign 7: a ScaledJob's conditions
		// dropped and initialized again three times after a restart, then
		// set to Active False by the poll after the queue drained, too
		// late for the settle budget).
		if h.returns < StormFlaps || h.lastNew {
			continue
		}
		// A circle while another field of the object walked on to values
		// it had never held is the object's progression, not a storm: an
		// Argo Rollouts canary's status.HPAReplicas goes 3 → 4 → 3 at each
		// step's surge while currentStepIndex, updatedReplicas and
		// stableRS move on (its experiment target, a campaign's seed
		// holding the Rollout's events 7 s, which left the workflow's
		// last steps to the settle budget). Its last StormFlaps returns
		// must come with no such progress. Times (RFC 3339 strings, as in
		// conditions) are not progress, nor is an observedGeneration,
		// which follows a spec that may itself be circling.
		from := h.returnedAt[len(h.returnedAt)-StormFlaps]
		if slices.ContainsFunc(progressed[f.obj], func(p progress) bool { return p.path != f.path && !p.at.Before(from) }) {
			continue
		}
		shown := h.values
		if len(shown) > 6 {
			shown = shown[len(shown)-6:]
		}
		return fmt.Sprintf("once the faults were over (t+%.2fs) %s's %s was set back to a value it had held %d times by successful writes (by %s): ... %s",
			since.Sub(mark).Seconds(), f.obj, f.path, h.returns, strings.Join(h.clients, ", "), strings.Join(shown, " → ")), true
	}
	return "", false
}

// rfc3339 matches the times a written value may hold (conditions'
// lastTransitionTime, a deadline annotation).
var rfc3339 = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)

// timeless is a written value with its times blanked: a condition
// rewritten with only a new lastUpdateTime holds the value it held.
func timeless(v string) string { return rfc3339.ReplaceAllString(v, "T") }

// judgeStorm turns res's storm candidate into a violation when the no-fault
// reference runs of its knob settings settled; reports whether it did. A
// schedule with no step is itself a no-fault run: when it does not settle
// where the reference runs did, no fault is there to blame, only a slower
// machine (prometheus-operator campaign 10: the operator's no-op updates
// after each StatefulSet status write went on for 1.2 s at load average 4),
// so it stays unsettled, a harness error, never a finding. So does a
// schedule none of whose steps acted (faultsActed): a delay of 0 s, a hold
// of events that never came (prometheus-operator's bindings target: "delay
// 0.00s ADDED statefulsets" reported as a storm at load average 7).
func (e *Env) judgeStorm(ctx context.Context, res *Result) bool {
	if res.storm == "" || slices.ContainsFunc(res.Violations, func(v Violation) bool { return v.Oracle == "convergence" }) {
		return false // the convergence violation already says it
	}
	if len(res.Schedule.Steps) == 0 || !faultsActed(res) {
		return false
	}
	ref := e.learnedReference(ctx, res.Schedule.Knobs)
	if ref == nil || !ref.settled {
		return false
	}
	res.violate("storm", fmt.Sprintf("the run never settled: %s; the no-fault reference runs of these knob settings settled", res.storm))
	return true
}

// faultsActed reports whether a step of the execution's schedule did
// anything: a restart; an event a rule decided that was not handed on at
// once (released 1 ms or more after it arrived, or dropped, broken,
// aborted, still pending); a request a rule answered or changed. A
// schedule none of whose steps acted ran as a no-fault run does.
func faultsActed(res *Result) bool {
	if len(res.Restarts) > 0 {
		return true
	}
	for _, ev := range res.Trace.Events {
		if ev.Rule >= 0 && (ev.Fate != trace.Released || ev.Released.Sub(ev.Arrived) >= time.Millisecond) {
			return true
		}
	}
	for _, r := range res.Trace.Requests {
		if r.FaultKind != "" {
			return true
		}
	}
	return false
}
