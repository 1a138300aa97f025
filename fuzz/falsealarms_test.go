package fuzz

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
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
	f.add(1, sched, nil, &Result{}, nil, "", "")
	f.add(2, sched, []byte{1}, &Result{Settled: true, Violations: two, SelfViews: SelfViewStats{Writes: 2, Replacing: 1}}, nil, Nondeterminism, "the same in 1 of 3 no-fault runs")
	f.add(3, sched, []byte{2}, &Result{Settled: true, Violations: []Violation{{Oracle: "crash", Message: "exit 2"}}}, nil, Race, "[crash] is judged without no-fault runs")

	if f.Executions != 3 || !reflect.DeepEqual(f.ByOracle, map[string]int{"end-state": 1}) || !reflect.DeepEqual(f.Races, map[string]int{"crash": 1}) {
		t.Errorf("after 3 executions: %d judged, false alarms %v, races %v; want 3, end-state 1, crash 1", f.Executions, f.ByOracle, f.Races)
	}
	if f.RaceExecutions() != 1 || f.SelfViews.Writes != 2 || f.SelfViewExecutions.Replacing != 1 {
		t.Errorf("races %d, self views %+v in %+v", f.RaceExecutions(), f.SelfViews, f.SelfViewExecutions)
	}
	for _, want := range []string{
		"3 executions judged (0 harness errors, not counted; 1 never settled, so no end state judged)",
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
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back FalseAlarms
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Alarms, want) {
		t.Errorf("alarms after a JSON round trip %+v, want %+v (%s)", back.Alarms, want, b)
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
