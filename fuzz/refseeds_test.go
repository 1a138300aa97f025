package fuzz

import (
	"reflect"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

func TestKnobSettingsFewestAwayFromZeroFirst(t *testing.T) {
	got := knobSettings([]Knob{{Name: "edit", Values: 4}, {Name: "replicas", Values: 2}}, 4)
	if len(got) != 4 || !reflect.DeepEqual(got[0], map[string]int{"edit": 0, "replicas": 0}) {
		t.Fatalf("got %v, want 4 settings starting with all zero", got)
	}
	for _, m := range got[1:] {
		if weight(m) != 1 {
			t.Fatalf("got %v: after all zero, settings with one knob set", got)
		}
	}
}

func TestReferencePositionsCountAfterTheMark(t *testing.T) {
	mark := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	ev := func(d time.Duration, typ string) trace.Event {
		return trace.Event{Client: "c", Resource: "gitrepositories", Type: typ, Arrived: mark.Add(d), Fate: trace.Released}
	}
	tr := trace.Trace{
		Events: []trace.Event{ev(-time.Second, "MODIFIED"), ev(time.Second, "MODIFIED"), ev(2*time.Second, "ADDED"), ev(3*time.Second, "MODIFIED")},
		Requests: []trace.Request{
			{Client: "c", Verb: "patch", Start: mark.Add(-time.Second)},
			{Client: "c", Verb: "patch", Start: mark.Add(time.Second)},
			{Client: "c", Verb: "patch", Start: mark.Add(time.Second), DryRun: true},
			{Client: "c", Verb: "create", Subresource: "exec", Start: mark.Add(time.Second)},
			{Client: "c", Verb: "get", Start: mark.Add(time.Second)},
		},
	}
	if n := countEvents(tr, "c", "gitrepositories", mark); n != 2 {
		t.Errorf("countEvents = %d, want the 2 MODIFIED after the mark", n)
	}
	if n := countWrites(tr, "c", mark); n != 1 {
		t.Errorf("countWrites = %d, want the 1 stored write after the mark", n)
	}
}

func TestNoLagSeedsOnePerKnobSettingAfterTheScenarios(t *testing.T) {
	s := Scenario{Knobs: []Knob{{Name: "replicas", Values: 2}}}
	taken := map[string]string{string(s.Encode(Schedule{Knobs: map[string]int{"replicas": 0}})): "the scenario's seed 0"}
	seeds := noLagSeeds(s, taken)
	if len(seeds) != 1 {
		t.Fatalf("got %d no-lag seeds, want 1: replicas=0 is the scenario's own seed already", len(seeds))
	}
	if got := s.Decode(seeds[0]); got.String() != "replicas=1; no lag" {
		t.Errorf("no-lag seed decodes to %q, want %q", got, "replicas=1; no lag")
	}
	if taken[string(seeds[0])] != "the no-lag seed 0" {
		t.Errorf("origin %q, want %q", taken[string(seeds[0])], "the no-lag seed 0")
	}
}
