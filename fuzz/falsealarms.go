package fuzz

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
)

// FalseAlarms is what MeasureFalseAlarms found: executions under ordinary
// latency only (every watch delayed by no more than the apiserver itself
// delayed one in the no-fault reference runs), each violation triaged as a
// finding under ordinary latency (a race) or, with evidence, the
// controller's own nondeterminism (a false alarm: an oracle to fix).
type FalseAlarms struct {
	// Executions judged, and those that could not be (harness errors).
	Executions, HarnessErrors int
	// HarnessError is the first harness error, with its execution and
	// schedule: why executions could not be judged.
	HarnessError string `json:",omitempty"`
	// Unsettled are the judged executions that never settled: the oracles
	// that judge a settled run only (end state, convergence) did not
	// judge them.
	Unsettled int `json:",omitempty"`
	// Diverged are the judged executions whose workload went on after a
	// wait gave up (Result.Diverged): their end state was not judged.
	Diverged int `json:",omitempty"`
	// MaxDelay is the largest delay a schedule used. Measured and
	// MeasuredMax are the median and the longest time, in the reference
	// runs, from a write's answer to its watch event's arrival at the
	// proxy (watchLatencies); delays are drawn log-uniformly from Measured
	// up to the scenario's Bounds.MaxDelay (latencySchedule).
	MaxDelay, Measured, MeasuredMax time.Duration
	// ByOracle counts, per oracle, the executions with a violation
	// triaged as nondeterminism: the false alarms. First keeps the first
	// message and schedule of each.
	ByOracle map[string]int
	First    map[string]string
	// Races counts, per oracle, the executions with a violation triaged as
	// a finding under ordinary latency; FirstRace keeps the first of each.
	Races     map[string]int    `json:",omitempty"`
	FirstRace map[string]string `json:",omitempty"`
	// Alarms are the judged executions with a violation that is not a
	// known finding, in order, each with every violation it raised, its
	// input and its triage.
	Alarms []Alarm `json:",omitempty"`
	// Known counts, per Known's Why, the judged executions whose every
	// violation was a known finding of the scenario (Scenario.Known): a bug
	// that a healthy apiserver's latency alone brings out, already
	// reported, not counted as a false alarm. An execution with two known
	// findings counts under each; KnownExecutions counts it once.
	Known           map[string]int `json:",omitempty"`
	KnownExecutions int            `json:",omitempty"`
	// SelfViews sums the judged executions' writes behind their writer's
	// own (Result.SelfViews); SelfViewExecutions counts the executions
	// with at least one of each kind.
	SelfViews, SelfViewExecutions SelfViewStats
	// SelfViewKinds group the writes SelfViews counts as Lasting (those
	// the stale-self-view oracle judges) by kind, in the order each kind
	// first appeared: what a reader judges, one kind at a time.
	SelfViewKinds []SelfViewKind `json:",omitempty"`
	// NoFaultRuns are the no-fault runs the triage took, per knob
	// setting, beyond the two reference runs.
	NoFaultRuns map[string]int `json:",omitempty"`
}

// Verdicts of the triage (Alarm.Verdict).
const (
	// Race: a violation under ordinary latency that no no-fault run
	// explains away: a finding.
	Race = "race"
	// Nondeterminism: a difference the controller makes in runs without
	// any added latency too, or in a field those runs vary, with no write
	// behind its writer's own to explain it: a false alarm (an oracle to
	// fix: an endState ignore path).
	Nondeterminism = "nondeterminism"
)

// Alarm is one judged execution of MeasureFalseAlarms that raised a
// violation that was not a known finding.
type Alarm struct {
	Execution  int // 1 for the first of the n executions
	Schedule   string
	Violations []Violation
	// Input is the execution's input in the scenario's space, which
	// replays it; nil when the space cannot hold its schedule (ordinary
	// latency is RealisticLatency's).
	Input []byte `json:",omitempty"`
	// Verdict is Race or Nondeterminism; Why, the evidence.
	Verdict, Why string
	// Files are where its trace, log, picture and input were written, set
	// by whoever wrote them (MeasureFalseAlarms' progress function may, on
	// the alarm it is given).
	Files AlarmFiles `json:",omitzero"`
}

// AlarmFiles are the paths of an alarm's files; empty when not written.
type AlarmFiles struct {
	Trace, Log, Picture, Input string `json:",omitempty"`
}

// add counts res, the judged execution i (from 1) of sched, with its input
// (nil: none); known are the known findings its violations all were, if
// they were; verdict and why its triage, when it has violations.
func (f *FalseAlarms) add(i int, sched Schedule, input []byte, res *Result, known []Known, verdict, why string) {
	f.Executions++
	if !res.Settled {
		f.Unsettled++
	}
	if res.Diverged != "" && !res.gaveUpAsReferences {
		f.Diverged++
	}
	f.SelfViews = f.SelfViews.Add(res.SelfViews)
	f.SelfViewExecutions = f.SelfViewExecutions.Add(SelfViewStats{
		Writes: min(1, res.SelfViews.Writes), Replacing: min(1, res.SelfViews.Replacing),
		Lasting: min(1, res.SelfViews.Lasting), Judged: min(1, res.SelfViews.Judged),
	})
	f.SelfViewKinds = addSelfViewKinds(f.SelfViewKinds, i, res.selfViewWrites)
	if len(res.Violations) == 0 {
		return
	}
	if known != nil {
		if f.Known == nil {
			f.Known = map[string]int{}
		}
		f.KnownExecutions++
		for _, k := range known {
			f.Known[k.Why]++
		}
		return
	}
	f.Alarms = append(f.Alarms, Alarm{Execution: i, Schedule: sched.String(), Violations: res.Violations, Input: input, Verdict: verdict, Why: why})
	counts, first := f.ByOracle, f.First
	if verdict == Race {
		if f.Races == nil {
			f.Races, f.FirstRace = map[string]int{}, map[string]string{}
		}
		counts, first = f.Races, f.FirstRace
	}
	seen := map[string]bool{}
	for _, v := range res.Violations {
		if !seen[v.Oracle] {
			seen[v.Oracle] = true
			counts[v.Oracle]++
			if first[v.Oracle] == "" {
				first[v.Oracle] = fmt.Sprintf("schedule %s: %s", sched, v.Message)
			}
		}
	}
}

// RaceExecutions is how many executions were triaged as races.
func (f FalseAlarms) RaceExecutions() int {
	n := 0
	for _, a := range f.Alarms {
		if a.Verdict == Race {
			n++
		}
	}
	return n
}

func (f FalseAlarms) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d executions judged (%d harness errors, not counted", f.Executions, f.HarnessErrors)
	if f.HarnessError != "" {
		fmt.Fprintf(&b, "; the first: %s", f.HarnessError)
	}
	if f.Unsettled > 0 {
		fmt.Fprintf(&b, "; %d never settled, so no end state judged", f.Unsettled)
	}
	if f.Diverged > 0 {
		fmt.Fprintf(&b, "; %d went on after a workload wait gave up, so no end state judged", f.Diverged)
	}
	fmt.Fprintf(&b, "), every watch delayed by at most %v (drawn from the reference runs' median watch latency, %v; their longest: %v): ", f.MaxDelay, f.Measured.Round(10*time.Microsecond), f.MeasuredMax.Round(10*time.Microsecond))
	if n := f.RaceExecutions(); n > 0 {
		fmt.Fprintf(&b, "%d executions with a finding under ordinary latency (a race, not a false alarm: ", n)
		writeCounts(&b, f.Races, f.FirstRace)
		b.WriteString("); ")
	}
	if len(f.ByOracle) == 0 {
		b.WriteString("no false alarm")
	} else {
		b.WriteString("false alarms (the controller's nondeterminism, shown by no-fault runs): ")
		writeCounts(&b, f.ByOracle, f.First)
	}
	if len(f.Known) > 0 {
		fmt.Fprintf(&b, "; %d executions with only known findings (not false alarms):", f.KnownExecutions)
		writeKnown(&b, f.KnownExecutions, f.Known)
	}
	if f.SelfViews.Writes > 0 {
		s, e := f.SelfViews, f.SelfViewExecutions
		fmt.Fprintf(&b, "; writes behind their writer's own: %d in %d executions, %d replaced its values (in %d executions), %d of them for good (in %d executions: what the stale-self-view oracle judges)",
			s.Writes, e.Writes, s.Replacing, e.Replacing, s.Lasting, e.Lasting)
	}
	return b.String()
}

// writeCounts writes "oracle: n (first: ...)" for each oracle.
func writeCounts(b *strings.Builder, counts map[string]int, first map[string]string) {
	for i, o := range slices.Sorted(maps.Keys(counts)) {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(b, "%s: %d (first: %s)", o, counts[o], first[o])
	}
}

// TriageRuns is the most no-fault runs of one knob setting the triage of
// MeasureFalseAlarms takes, beyond the two reference runs, to look for a
// difference among runs without any added latency.
const TriageRuns = 10

// FalseAlarmsOptions say what MeasureFalseAlarms runs.
type FalseAlarmsOptions struct {
	// Executions is how many executions to judge. Zero: 200.
	Executions int
	// Seed seeds the delays drawn. Zero: 1.
	Seed uint64
	// Only keeps the knob settings it accepts. Nil: every setting.
	Only func(knobs map[string]int) bool
	// Progress, when set, is called after each execution with its result
	// (nil for a harness error) and, when it raised a violation that is not
	// a known finding, its alarm (nil otherwise), which it may annotate
	// (Alarm.Files).
	Progress func(done int, f FalseAlarms, res *Result, a *Alarm)
	// Answer, when set (proxy.Lose, Reset, Slow or Reject), adds to every
	// execution's ordinary latency one fault of that kind on the answer to
	// a client's Nth write (client and N drawn at random, N within the
	// writes the client made in the no-fault reference runs; a Slow one
	// held up to MaxSlowAnswer), so that the fault's false alarms are
	// measured as ordinary latency's are: a violation no no-fault run
	// shows is a race (a finding under that fault), one they show is the
	// controller's nondeterminism. Only in the Composed space, which holds
	// such schedules. Zero: ordinary latency only.
	Answer proxy.Action
	// Code is a Reject's status (429, 500, 503). Zero: 429.
	Code int
}

// MeasureFalseAlarms runs executions under ordinary latency only, the
// knob settings in turn: every watch event of each client delayed, for the
// whole lag window, by an amount drawn at random, log-uniformly from the
// reference runs' median watch latency to Bounds.MaxDelay (latencySchedule:
// in the latency spaces, each one's input replays it). Each execution with a violation that is
// not a known finding is triaged (triage): a race, a finding, unless
// no-fault runs show the same difference, or one in a field they vary, with
// no write behind its writer's own to explain it: then nondeterminism, a
// false alarm.
func (e *Env) MeasureFalseAlarms(ctx context.Context, o FalseAlarmsOptions) (FalseAlarms, error) {
	f := FalseAlarms{ByOracle: map[string]int{}, First: map[string]string{}}
	n, seed := cmp.Or(o.Executions, 200), cmp.Or(o.Seed, 1)
	settings := knobSettings(e.s.Knobs, math.MaxInt)
	if o.Only != nil {
		settings = slices.DeleteFunc(settings, func(k map[string]int) bool { return !o.Only(k) })
		if len(settings) == 0 {
			return f, fmt.Errorf("scenario %s: no knob setting is left to measure", e.s.Name)
		}
	}
	if o.Answer != 0 && (!o.Answer.IsAnswer() || e.s.Space != Composed) {
		return f, fmt.Errorf("scenario %s: false alarms under %v: the faults on answers (lose, reset, slow, reject) are in the Composed space, and its space is %v", e.s.Name, o.Answer, e.s.Space)
	}
	var latencies []time.Duration
	writes := map[string]int{} // knob setting|client → the most writes it made in a reference run
	for _, knobs := range settings {
		for range 2 {
			// A harness error (a slow start on a loaded machine) is run
			// again, as a fuzzed execution's is.
			res, err := e.Run(ctx, Schedule{Knobs: knobs}, Retries(3))
			if err != nil {
				return f, fmt.Errorf("reference run %v, 3 attempts: %w", knobs, err)
			}
			latencies = append(latencies, watchLatencies(res)...)
			for _, c := range e.s.Clients {
				k := fmt.Sprint(knobs) + "|" + c
				writes[k] = max(writes[k], countWrites(res.Trace, c, res.Mark))
			}
		}
	}
	slices.Sort(latencies)
	f.Measured = median(latencies)
	if len(latencies) > 0 {
		f.MeasuredMax = latencies[len(latencies)-1]
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5f))
	tri := triage{env: e, runs: map[string][]noFaultRun{}}
	for i := range n {
		knobs := settings[i%len(settings)]
		sched := e.s.latencySchedule(knobs, f.Measured, rng.Float64, false)
		if o.Answer != 0 {
			sched.Steps = append(sched.Steps, e.answerStep(o, knobs, writes, rng))
		}
		for _, st := range sched.Steps {
			if st.IsLatency() { // not a Slow answer's hold
				f.MaxDelay = max(f.MaxDelay, st.Delay)
			}
		}
		input, _ := e.Input(sched) // nil: not this space's; the schedule in words replays it
		res, err := e.Run(ctx, sched)
		var alarm *Alarm
		if err != nil {
			f.HarnessErrors++
			if f.HarnessError == "" {
				f.HarnessError = fmt.Sprintf("execution %d: schedule %s: %v", i+1, sched, err)
			}
			res = nil
		} else {
			known := e.s.knownOnly(res.Violations, sched)
			verdict, why := "", ""
			if len(res.Violations) > 0 && known == nil {
				verdict, why = tri.judge(ctx, res)
			}
			f.add(i+1, sched, input, res, known, verdict, why)
			if len(f.Alarms) > 0 && f.Alarms[len(f.Alarms)-1].Execution == i+1 {
				alarm = &f.Alarms[len(f.Alarms)-1]
			}
		}
		f.NoFaultRuns = tri.counts()
		if o.Progress != nil {
			o.Progress(i+1, f, res, alarm)
		}
		if ctx.Err() != nil {
			return f, ctx.Err()
		}
	}
	return f, nil
}

// answerStep is a fault of kind o.Answer on the answer to a client's Nth
// write, both drawn with rng, N within what the client wrote in the
// no-fault reference runs of knobs (writes), for the whole fault window.
func (e *Env) answerStep(o FalseAlarmsOptions, knobs map[string]int, writes map[string]int, rng *rand.Rand) Step {
	b := e.s.Bounds.orDefault()
	c := e.s.Clients[rng.IntN(len(e.s.Clients))]
	n := max(1, min(maxAfter, writes[fmt.Sprint(knobs)+"|"+c]))
	st := Step{Client: c, Action: o.Answer, After: rng.IntN(n), Length: min(b.MaxLength, b.MaxLagEnd, b.faultEnd())}
	switch o.Answer {
	case proxy.Slow:
		st.Delay = quad5(unquad5(time.Duration(rng.Float64()*float64(MaxSlowAnswer)), MaxSlowAnswer), MaxSlowAnswer)
	case proxy.Reject:
		st.Code = cmp.Or(o.Code, 429)
	}
	return st
}

// triage sorts the violations of executions under ordinary latency into
// races and nondeterminism, by more no-fault runs of their knob settings,
// made on first need and kept for the next execution of the setting.
type triage struct {
	env  *Env
	runs map[string][]noFaultRun // knob setting → its no-fault runs so far
	// limit is the most no-fault runs per setting. Zero: TriageRuns.
	limit int
}

// noFaultRun is what one no-fault run ended with: per EndState its
// objects (nil when it did not settle), per Count its peaks.
type noFaultRun struct {
	ends   []endObjects
	counts []map[string]countPeak
}

func (t *triage) counts() map[string]int {
	out := map[string]int{}
	for k, rs := range t.runs {
		out[k] = len(rs)
	}
	return out
}

// run returns the ith no-fault run of knobs, making it when it is not
// there yet; false when it could not be made (harness errors).
func (t *triage) run(ctx context.Context, knobs map[string]int, i int) (noFaultRun, bool) {
	key := fmt.Sprint(knobs)
	for len(t.runs[key]) <= i {
		res, err := t.env.Run(ctx, Schedule{Knobs: knobs}, Retries(3))
		if err != nil {
			return noFaultRun{}, false
		}
		r := noFaultRun{counts: res.counts}
		if res.Settled {
			r.ends = res.ends
		}
		t.runs[key] = append(t.runs[key], r)
	}
	return t.runs[key][i], true
}

// judge triages res's violations (none of them only known findings). A
// violation of an oracle that learns nothing from no-fault runs (a lost
// update, a write behind its writer's own, convergence, a crash, a storm,
// the scenario's checks) is a race. An end-state or count difference is
// looked for in up to TriageRuns more no-fault runs of the knob setting:
// each difference those runs show too (the same object missing or
// present, the same value at the same path, as many live objects), or, for
// a path, one they vary, is the controller's own; the execution is
// nondeterminism when every difference is, and no write of it was sent
// from a view behind its writer's own and replaced that write's values for
// good (audit.SelfStale, no later write restoring them): such a write is a
// race's cause, whatever no-fault runs happen to show. (A controller that
// writes its status several times a reconcile from the object in memory has
// such writes in most runs, KRO's in half of them: its nondeterminism is
// then called a race, the side a person reads.) Otherwise it is a race. why says which evidence decided.
func (t *triage) judge(ctx context.Context, res *Result) (verdict, why string) {
	for _, v := range res.Violations {
		if v.Oracle != "end-state" && v.Oracle != "count" {
			return Race, fmt.Sprintf("[%s] is judged without no-fault runs: under ordinary latency it is a finding", v.Oracle)
		}
	}
	if len(res.endDiffs) == 0 && len(res.countOver) == 0 {
		return Race, "no difference the no-fault runs could show was recorded"
	}
	knobs := res.Schedule.Knobs
	seen := make([]int, len(res.endDiffs))
	over := make([]int, len(res.countOver))
	var ends [][]endObjects // per EndState, the settled no-fault runs' objects
	n := 0
	explained := func() bool {
		for _, k := range seen {
			if k == 0 {
				return false
			}
		}
		for _, k := range over {
			if k == 0 {
				return false
			}
		}
		return true
	}
	limit := t.limit
	if limit == 0 {
		limit = TriageRuns
	}
	for i := 0; i < limit && !explained(); i++ {
		r, ok := t.run(ctx, knobs, i)
		if !ok {
			break
		}
		n++
		for j, d := range res.endDiffs {
			if d.state < len(r.ends) && r.ends[d.state] != nil && d.seenIn(r.ends[d.state]) {
				seen[j]++
			}
		}
		for j, c := range res.countOver {
			if c.count < len(r.counts) {
				for kind, p := range r.counts[c.count] {
					if kind == c.ownerKind && p.n >= c.n {
						over[j]++
					}
				}
			}
		}
		if len(r.ends) > 0 {
			for s := range r.ends {
				for len(ends) <= s {
					ends = append(ends, nil)
				}
				if r.ends[s] != nil {
					ends[s] = append(ends[s], r.ends[s])
				}
			}
		}
	}
	behind := res.SelfViews.Lasting > 0
	var unexplained, evidence []string
	for j, d := range res.endDiffs {
		what := d.String()
		switch {
		case seen[j] > 0:
			evidence = append(evidence, fmt.Sprintf("%s: the same in %d of %d no-fault runs", what, seen[j], n))
		case d.state < len(ends) && d.variesIn(ends[d.state]) && !behind:
			evidence = append(evidence, fmt.Sprintf("%s: the field varies among %d no-fault runs", what, len(ends[d.state])))
		default:
			unexplained = append(unexplained, what)
		}
	}
	for j, c := range res.countOver {
		what := fmt.Sprintf("%d live at once per %s", c.n, c.ownerKind)
		if over[j] > 0 {
			evidence = append(evidence, fmt.Sprintf("%s: as many in %d of %d no-fault runs", what, over[j], n))
		} else {
			unexplained = append(unexplained, what)
		}
	}
	switch {
	case len(unexplained) > 0:
		return Race, fmt.Sprintf("in none of %d more no-fault runs: %s", n, strings.Join(unexplained, "; "))
	case behind:
		return Race, fmt.Sprintf("no-fault runs show it too (%s), but a write of this run was sent from a view behind its writer's own and replaced that write's values for good (see the audit): a race that needs no added latency", strings.Join(evidence, "; "))
	}
	return Nondeterminism, strings.Join(evidence, "; ")
}

// String names a difference as the end-state oracle does.
func (d endDiff) String() string {
	switch {
	case d.Missing:
		return fmt.Sprintf("%s %s missing", d.Kind, d.Key)
	case d.Extra:
		return fmt.Sprintf("%s %s present", d.Kind, d.Key)
	}
	return fmt.Sprintf("%s %s %s=%s", d.Kind, d.Key, d.Path, or(d.Have, "absent"))
}
