package fuzz

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/audit"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// TestFalseAlarmsAdd: an execution counts once per oracle however many
// violations of it it raised, under its verdict (a race is no false
// alarm), the first message of each oracle is kept, and every execution
// with a violation is listed with all of its violations, its input and its
// triage, which survive the JSON line `stalefuzz false-alarms` reads.
func TestFalseAlarmsAdd(t *testing.T) {
	f := FalseAlarms{ByOracle: map[string]int{}, First: map[string]string{}}
	sched := Schedule{Knobs: map[string]int{"k": 1}, Steps: []Step{{Client: "c", Action: proxy.Delay, Delay: 40 * time.Millisecond, Length: time.Second}}}
	two := []Violation{
		{Oracle: "end-state", Subject: "ConfigMap a", Message: "a present"},
		{Oracle: "end-state", Subject: "ConfigMap b", Message: "b present"},
	}
	f.add(1, sched, nil, &Result{Diverged: "the wait for x gave up"}, nil, "", "")
	// A wait that gave up as in both reference runs: the end state was
	// judged, so the execution is not counted as diverged.
	judged := FalseAlarms{ByOracle: map[string]int{}, First: map[string]string{}}
	judged.add(1, sched, nil, &Result{Settled: true, Diverged: "the wait for x gave up", gaveUp: []string{"the wait for x gave up"}, gaveUpAsReferences: true}, nil, "", "")
	if judged.Diverged != 0 {
		t.Errorf("an execution whose wait gave up as its reference runs' did counted as diverged (%d): its end state was judged", judged.Diverged)
	}
	f.add(2, sched, []byte{1}, &Result{Settled: true, Violations: two, SelfViews: SelfViewStats{Writes: 2, Replacing: 1}}, nil, Nondeterminism, "the same in 1 of 3 no-fault runs")
	f.add(3, sched, []byte{2}, &Result{Settled: true, Violations: []Violation{{Oracle: "crash", Message: "exit 2"}}}, nil, Race, "[crash] is judged without no-fault runs")

	if f.Executions != 3 || !reflect.DeepEqual(f.ByOracle, map[string]int{"end-state": 1}) || !reflect.DeepEqual(f.Races, map[string]int{"crash": 1}) {
		t.Errorf("after 3 executions: %d judged, false alarms %v, races %v; want 3, end-state 1, crash 1", f.Executions, f.ByOracle, f.Races)
	}
	if f.RaceExecutions() != 1 || f.SelfViews.Writes != 2 || f.SelfViewExecutions.Replacing != 1 {
		t.Errorf("races %d, self views %+v in %+v", f.RaceExecutions(), f.SelfViews, f.SelfViewExecutions)
	}
	for _, want := range []string{
		"3 executions judged (0 harness errors, not counted; 1 never settled, so no end state judged; 1 went on after a workload wait gave up, so no end state judged)",
		"1 executions with a finding under ordinary latency (a race, not a false alarm: crash: 1 (first: schedule " + sched.String() + ": exit 2)",
		"false alarms (the controller's nondeterminism, shown by no-fault runs): end-state: 1",
		"writes behind their writer's own: 2 in 1 executions, 1 replaced its values (in 1 executions)",
	} {
		if !strings.Contains(f.String(), want) {
			t.Errorf("figure %q lacks %q", f, want)
		}
	}
	// Why executions could not be judged is said with the count.
	h := f
	h.HarnessErrors, h.HarnessError = 2, "execution 4: schedule die=1: start controllers in ns: context deadline exceeded"
	if want := "(2 harness errors, not counted; the first: execution 4: schedule die=1: start controllers in ns: context deadline exceeded; 1 never settled"; !strings.Contains(h.String(), want) {
		t.Errorf("figure %q lacks %q", h, want)
	}
	want := []Alarm{
		{Execution: 2, Schedule: sched.String(), Violations: two, Input: []byte{1}, Verdict: Nondeterminism, Why: "the same in 1 of 3 no-fault runs"},
		{Execution: 3, Schedule: sched.String(), Violations: []Violation{{Oracle: "crash", Message: "exit 2"}}, Input: []byte{2}, Verdict: Race, Why: "[crash] is judged without no-fault runs"},
	}
	if !reflect.DeepEqual(f.Alarms, want) {
		t.Errorf("alarms %+v, want %+v", f.Alarms, want)
	}
	if back := jsonRoundTrip(t, f); !reflect.DeepEqual(back.Alarms, want) {
		t.Errorf("alarms after a JSON round trip %+v, want %+v", back.Alarms, want)
	}
}

// TestTriage: an end-state difference that a no-fault run shows too is
// nondeterminism, unless a write behind its writer's own replaced that
// write's values; one no no-fault run shows is a race; so is a violation
// of an oracle that no-fault runs do not teach.
func TestTriage(t *testing.T) {
	extra := endDiff{Kind: "ConfigMap", Key: "only-a", Extra: true}
	value := endDiff{Kind: "ConfigMap", Key: "cm", Path: "data.x", Have: `"2"`, Want: `"1"`}
	noFault := func(objs ...endObjects) []noFaultRun {
		var out []noFaultRun
		for _, o := range objs {
			out = append(out, noFaultRun{ends: []endObjects{o}})
		}
		return out
	}
	for name, c := range map[string]struct {
		res     Result
		runs    []noFaultRun
		verdict string
		why     string
	}{
		"the same object in a no-fault run": {
			res:     Result{Violations: []Violation{{Oracle: "end-state"}}, endDiffs: []endDiff{extra}},
			runs:    noFault(endObjects{"cm": {}}, endObjects{"cm": {}, "only-a": {}}),
			verdict: Nondeterminism, why: "ConfigMap only-a present: the same in 1 of 2 no-fault runs",
		},
		"in no no-fault run": {
			res:     Result{Violations: []Violation{{Oracle: "end-state"}}, endDiffs: []endDiff{extra}},
			runs:    noFault(endObjects{"cm": {}}, endObjects{"cm": {}}),
			verdict: Race, why: "in none of 2 more no-fault runs: ConfigMap only-a present",
		},
		"the same, but a write behind its writer's own": {
			res:     Result{Violations: []Violation{{Oracle: "end-state"}}, endDiffs: []endDiff{extra}, SelfViews: SelfViewStats{Writes: 1, Replacing: 1, Lasting: 1}},
			runs:    noFault(endObjects{"cm": {}, "only-a": {}}),
			verdict: Race, why: "a race that needs no added latency",
		},
		"a field the no-fault runs vary": {
			res:     Result{Violations: []Violation{{Oracle: "end-state"}}, endDiffs: []endDiff{value}},
			runs:    noFault(endObjects{"cm": {"data.x": `"1"`}}, endObjects{"cm": {"data.x": `"3"`}}),
			verdict: Nondeterminism, why: "the field varies among 2 no-fault runs",
		},
		"a lost update": {
			res:     Result{Violations: []Violation{{Oracle: "lost-update"}}},
			verdict: Race, why: "[lost-update] is judged without no-fault runs",
		},
	} {
		t.Run(name, func(t *testing.T) {
			tri := triage{runs: map[string][]noFaultRun{"map[]": c.runs}, limit: len(c.runs)}
			res := c.res
			res.Schedule = Schedule{Knobs: map[string]int{}}
			verdict, why := tri.judge(context.Background(), &res)
			if verdict != c.verdict || !strings.Contains(why, c.why) {
				t.Errorf("got %s (%s), want %s (%s)", verdict, why, c.verdict, c.why)
			}
		})
	}
}

// TestSelfViewKinds: the writes behind their writer's own that replaced
// its values for good are grouped by writer, write and own write, each kind
// with the fields its writes replaced (list indexes dropped), counted in
// writes and executions with its first message; a write whose values a later write restored is in no
// kind; the kinds survive the JSON line `stalefuzz false-alarms` reads.
func TestSelfViewKinds(t *testing.T) {
	stale := func(name, caller string, paths ...string) audit.SelfStale {
		s := audit.SelfStale{WriteRef: audit.WriteRef{Client: "op", Verb: "patch", Group: "example.com", Resource: "widgets", Subresource: "status", Name: name,
			Caller: caller}, OwnVerb: "patch", OwnSubresource: "status", OwnCaller: "status.go:10", RV: "20", View: "10", Own: "15"}
		for _, p := range paths {
			s.Replaced = append(s.Replaced, audit.Replaced{Path: p, Value: "new", Own: "old", OwnRV: "15"})
		}
		return s
	}
	restored := stale("w3", "status.go:10", "status.count")
	restored.Replaced[0].Restored = true
	first := audit.Report{SelfStale: []audit.SelfStale{
		stale("w1", "status.go:10", "status.conditions[0]"),
		stale("w2", "status.go:10", "status.conditions[3]"),
		restored,
	}}
	second := audit.Report{SelfStale: []audit.SelfStale{
		stale("w1", "scale.go:7", "status.replicas"),
		stale("w1", "status.go:10", "status.conditions[1]", "status.count"),
	}}
	var f FalseAlarms
	for i, rep := range []audit.Report{first, second} {
		st, vs, writes := selfViews(trace.Trace{}, rep, nil)
		if st.Lasting != len(vs) || len(writes) != len(vs) {
			t.Fatalf("execution %d: %d lasting, %d violations, %d writes", i+1, st.Lasting, len(vs), len(writes))
		}
		f.add(i+1, Schedule{}, nil, &Result{SelfViews: st, selfViewWrites: writes}, nil, "", "")
	}
	got := jsonRoundTrip(t, f).SelfViewKinds
	if len(got) != 2 {
		t.Fatalf("kinds %+v, want 2", got)
	}
	want := []struct {
		text                     string
		writes, execs, firstExec int
	}{
		{"op's patch status widgets.example.com at status.go:10, behind its own patch status widgets.example.com at status.go:10, replaced status.conditions[], status.count", 3, 2, 1},
		{"op's patch status widgets.example.com at scale.go:7, behind its own patch status widgets.example.com at status.go:10, replaced status.replicas", 1, 1, 2},
	}
	for i, w := range want {
		k := got[i]
		if k.String() != w.text || k.Writes != w.writes || k.Executions != w.execs || k.FirstExecution != w.firstExec || !strings.Contains(k.First, "replaced status.conditions[0]=new over its own old") && i == 0 {
			t.Errorf("kind %d: %q, %d writes in %d executions, first in %d (%s); want %q, %d in %d, first in %d", i, k, k.Writes, k.Executions, k.FirstExecution, k.First, w.text, w.writes, w.execs, w.firstExec)
		}
	}
}

// jsonRoundTrip is f as `stalefuzz false-alarms` reads it back from the
// driver's JSON line.
func jsonRoundTrip(t *testing.T, f FalseAlarms) FalseAlarms {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back FalseAlarms
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return back
}
