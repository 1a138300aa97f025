package fuzz

import (
	"fmt"
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

// TestLatencySeeds: in the latency spaces, a campaign's seeds include
// ordinary latency at each knob setting, every client's and each client's
// own, from what the reference runs measured up to MaxDelay, each an input
// of the space that replays exactly; other spaces get none.
func TestLatencySeeds(t *testing.T) {
	s := testScenario
	s.Space = RealisticLatency
	seeds := s.latencySeeds(120 * time.Millisecond)
	if len(seeds) != MaxLatencySeeds {
		t.Fatalf("%d seeds, want %d", len(seeds), MaxLatencySeeds)
	}
	settings, every, own := map[string]bool{}, 0, 0
	for _, sch := range seeds {
		settings[fmt.Sprint(sch.Knobs)] = true
		if !sch.LatencyOnly() {
			t.Errorf("seed %s: not ordinary latency only", sch)
		}
		for _, st := range sch.Steps {
			if st.Delay < 100*time.Millisecond || st.Delay > DefaultBounds.MaxDelay || st.Start != 0 {
				t.Errorf("seed %s: a delay under what was measured or over MaxDelay, or a window not from the mark", sch)
			}
		}
		if sch.Steps[0].Client == "" {
			every++
		} else {
			own++
		}
		if _, err := s.EncodeExactly(sch); err != nil {
			t.Errorf("seed %s: %v", sch, err)
		}
	}
	if len(settings) != MaxLatencySeeds || every == 0 || own == 0 {
		t.Errorf("seeds over %d knob settings, %d of every client and %d per client: want the knobs varied, and both", len(settings), every, own)
	}
	// Each setting's first seed is in the top stratum: with three settings,
	// three rounds, the first from the 0.75 quantile of [1 ms, MaxDelay]
	// up (a race that needs 60 ms is met in a seed).
	three := Scenario{Clients: []string{"c"}, Resources: []string{"rollouts"}, Knobs: []Knob{{Name: "write", Values: 3}}, Space: RealisticLatency, Bounds: Bounds{MaxStart: time.Second, MaxLength: 2100 * time.Millisecond, MaxLagEnd: 2100 * time.Millisecond, MaxDelay: 300 * time.Millisecond}}
	for i, sch := range three.latencySeeds(0)[:3] {
		if d := sch.Steps[0].Delay; d < 60*time.Millisecond {
			t.Errorf("seed %d (%s): a first seed of its setting under 60 ms", i, sch)
		}
	}
	s.Space = Realistic
	if got := s.latencySeeds(120 * time.Millisecond); got != nil {
		t.Errorf("Realistic has no latency: got %v", got)
	}
}
