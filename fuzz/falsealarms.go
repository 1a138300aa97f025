package fuzz

import (
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

// FalseAlarms is what MeasureFalseAlarms found: executions whose schedules
// only delay events by no more than the apiserver itself delayed them in
// the no-fault reference runs, so that every violation is a false alarm.
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
	// MaxDelay is the largest delay a schedule used: the longest time,
	// in the reference runs, from a write's answer to its watch event's
	// arrival at the proxy.
	MaxDelay time.Duration
	// ByOracle counts the executions with a violation, per oracle, and
	// keeps the first message and schedule of each.
	ByOracle map[string]int
	First    map[string]string
	// Alarms are the judged executions with a violation, in order, each
	// with every violation it raised: what a false alarm's class (an
	// oracle to fix, or a bug that a healthy apiserver's latency alone
	// brings out) is read from.
	Alarms []Alarm `json:",omitempty"`
	// Known counts, per Known's Why, the judged executions whose every
	// violation was a known finding of the scenario (Scenario.Known): a bug
	// that a healthy apiserver's latency alone brings out, already
	// reported, not counted as a false alarm. An execution with two known
	// findings counts under each; KnownExecutions counts it once.
	Known           map[string]int `json:",omitempty"`
	KnownExecutions int            `json:",omitempty"`
}

// Alarm is one judged execution of MeasureFalseAlarms that raised a
// violation.
type Alarm struct {
	Execution  int // 1 for the first of the n executions
	Schedule   string
	Violations []Violation
}

// add counts res, the judged execution i (from 1) of sched; known are the
// known findings its violations all were, if they were.
func (f *FalseAlarms) add(i int, sched Schedule, res *Result, known []Known) {
	f.Executions++
	if !res.Settled {
		f.Unsettled++
	}
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
	f.Alarms = append(f.Alarms, Alarm{Execution: i, Schedule: sched.String(), Violations: res.Violations})
	seen := map[string]bool{}
	for _, v := range res.Violations {
		if !seen[v.Oracle] {
			seen[v.Oracle] = true
			f.ByOracle[v.Oracle]++
			if f.First[v.Oracle] == "" {
				f.First[v.Oracle] = fmt.Sprintf("schedule %s: %s", sched, v.Message)
			}
		}
	}
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
	fmt.Fprintf(&b, "), events delayed by at most %v: ", f.MaxDelay)
	if len(f.ByOracle) == 0 {
		b.WriteString("no false alarm")
	}
	for i, o := range slices.Sorted(maps.Keys(f.ByOracle)) {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %d false alarms (first: %s)", o, f.ByOracle[o], f.First[o])
	}
	if len(f.Known) > 0 {
		fmt.Fprintf(&b, "; %d executions with only known findings (not false alarms):", f.KnownExecutions)
		writeKnown(&b, f.KnownExecutions, f.Known)
	}
	return b.String()
}

// MeasureFalseAlarms runs n executions, the knob settings in turn, each
// with one delay step per client on every resource for the whole lag
// window, the delay drawn at random (from seed) up to the longest watch
// latency the reference runs showed, and counts the violations: none is
// expected, since nothing in such a run is a fault a slower apiserver
// would not produce at once. progress, when set, is called after each
// execution with its result (nil for a harness error).
func (e *Env) MeasureFalseAlarms(ctx context.Context, n int, seed uint64, progress func(done int, f FalseAlarms, res *Result)) (FalseAlarms, error) {
	f := FalseAlarms{ByOracle: map[string]int{}, First: map[string]string{}}
	settings := knobSettings(e.s.Knobs, math.MaxInt)
	for _, knobs := range settings {
		for range 2 {
			// A harness error (a slow start on a loaded machine) is run
			// again, as a fuzzed execution's is.
			var res *Result
			var err error
			for attempt := 0; attempt < 3 && (attempt == 0 || err != nil); attempt++ {
				res, err = e.run(ctx, Schedule{Knobs: knobs}, runOptions{})
			}
			if err != nil {
				return f, fmt.Errorf("reference run %v, 3 attempts: %w", knobs, err)
			}
			f.MaxDelay = max(f.MaxDelay, watchLatency(res))
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5f))
	b := e.s.Bounds.orDefault()
	length := min(b.MaxLength, b.MaxLagEnd)
	for i := range n {
		sched := Schedule{Knobs: settings[i%len(settings)]}
		for _, c := range e.s.Clients {
			d := time.Duration(rng.Int64N(int64(f.MaxDelay) + 1))
			sched.Steps = append(sched.Steps, Step{Client: c, Action: proxy.Delay, Delay: d, Length: length})
		}
		res, err := e.Run(ctx, sched)
		if err != nil {
			f.HarnessErrors++
			if f.HarnessError == "" {
				f.HarnessError = fmt.Sprintf("execution %d: schedule %s: %v", i+1, sched, err)
			}
			res = nil
		} else {
			f.add(i+1, sched, res, e.s.knownOnly(res.Violations))
		}
		if progress != nil {
			progress(i+1, f, res)
		}
		if ctx.Err() != nil {
			return f, ctx.Err()
		}
	}
	return f, nil
}

// watchLatency is the longest time in res from a controller's write being
// answered to the arrival of its watch event at the proxy.
func watchLatency(res *Result) time.Duration {
	answered := map[string]time.Time{}
	for _, r := range res.Trace.Requests {
		if r.ReturnedRV != "" && r.Code < 300 {
			answered[r.ReturnedRV] = r.Start.Add(r.Latency)
		}
	}
	var longest time.Duration
	for _, ev := range res.Trace.Events {
		if at, ok := answered[ev.ResourceVersion]; ok {
			longest = max(longest, ev.Arrived.Sub(at))
		}
	}
	return longest
}
