package fuzz

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// cmEvent is an event of a configmap replica-0 was sent ms after mark.
func cmEvent(mark time.Time, typ string, ms int) trace.Event {
	return trace.Event{Client: "replica-0", Resource: "configmaps", Type: typ, Arrived: mark.Add(time.Duration(ms) * time.Millisecond), Fate: trace.Released}
}

// TestAnchoredAtEveryEventType: reference seeds and truth-table patterns
// anchor faults at ADDED and DELETED events too (a relist across a
// deletion, a controller's own creations and deletions seen late), and in
// Composed at the answers to the client's writes; and the answer faults and
// lagging restarts at the client's Nth create of each resource, not only at
// its Nth write of any kind.
func TestAnchoredAtEveryEventType(t *testing.T) {
	mark := time.Unix(1000, 0)
	at := func(ms int) time.Time { return mark.Add(time.Duration(ms) * time.Millisecond) }
	tr := trace.Trace{
		Events: []trace.Event{
			cmEvent(mark, "ADDED", 10),
			cmEvent(mark, "ADDED", 20),
			cmEvent(mark, "MODIFIED", 30),
			cmEvent(mark, "DELETED", 40),
			cmEvent(mark, "DELETED", -10), // before the mark
		},
		Requests: []trace.Request{
			{Client: "replica-0", Verb: "create", Resource: "configmaps", Start: at(5), Code: 201},
		},
	}
	got := map[string][]string{} // step kind → schedules
	for _, space := range []Space{Realistic, Composed} {
		s := testScenario
		s.Space = space
		e := &Env{s: s}
		for _, seeds := range e.Anchored(map[string]int{"replicas": 0, "at": 0}, tr, mark, MaxReferencePositions) {
			for _, sch := range seeds {
				if len(sch.Steps) != 1 {
					t.Fatalf("%v: a seed of %d steps: %s", space, len(sch.Steps), sch)
				}
				if _, err := s.EncodeExactly(sch); err != nil {
					t.Errorf("%v: seed %s does not round-trip through its input: %v", space, sch, err)
				}
				st := sch.Steps[0]
				if st.Client != "replica-0" || (st.Resource != "" && st.Resource != "configmaps") {
					continue
				}
				key := space.String() + " " + st.Action.String()
				if len(st.Types) > 0 {
					key += " " + strings.Join(st.Types, "+")
				}
				got[key] = append(got[key], st.String())
			}
		}
	}
	for key, n := range map[string]int{
		"realistic expire DELETED":              1, // the one after the mark
		"realistic hold ADDED":                  2,
		"realistic hold ADDED+MODIFIED+DELETED": 1, // its own create of configmaps seen late
		"realistic hold DELETED":                1,
		"realistic expire MODIFIED":             2, // plain and lagging
		"realistic freeze":                      2,
		"composed lose":                         2, // the 1st write, and the 1st create of configmaps
		"realistic cut":                         3, // plain, lagging, and lagging at the 1st create of configmaps
		"composed slow":                         1,
		"composed reject":                       1,
		"composed reset":                        1,
		"composed expire DELETED":               1,
	} {
		if len(got[key]) != n {
			t.Errorf("%s: %d seeds, want %d: %v", key, len(got[key]), n, got[key])
		}
	}
	if _, ok := got["realistic lose"]; ok {
		t.Errorf("Realistic has no answer faults: %v", got["realistic lose"])
	}
	for _, want := range []struct{ key, seed string }{
		{"composed lose", "t+0.00s–2.00s lose the answer to replica-0's 1st create configmaps (not a subresource)"},
		{"realistic cut", "t+0.00s–2.00s restart replica-0 before it sees the answer to its 1st create configmaps (not a subresource), reconnecting to an apiserver that has not seen that write, 1.00s behind"},
	} {
		if !slices.Contains(got[want.key], want.seed) {
			t.Errorf("%s: no seed anchored to the client's 1st create of a resource (%q): %v", want.key, want.seed, got[want.key])
		}
	}
	if !slices.Contains(got["composed slow"], "t+0.00s–2.00s slow the answer to replica-0's 1st write by 1.60s") {
		t.Errorf("slow seeds: %v", got["composed slow"])
	}
	if !slices.Contains(got["realistic expire DELETED"], "t+0.00s–2.00s break the watch (410 on re-watch: relist) at DELETED configmaps for replica-0") {
		t.Errorf("relist across a deletion: %v", got["realistic expire DELETED"])
	}
}

// TestOwnWritesSeenLate: in Realistic and Composed, the first family holds
// every event (ADDED, MODIFIED, DELETED) of a resource the client writes
// from just before its Nth write of it, positions counted per resource and
// listed resources first; its first turn is each resource's first write,
// then each later create of one (not a dry run); AnchoredLoss has no such
// seeds.
func TestOwnWritesSeenLate(t *testing.T) {
	mark := time.Unix(1000, 0)
	at := func(ms int) time.Time { return mark.Add(time.Duration(ms) * time.Millisecond) }
	tr := trace.Trace{
		Events: []trace.Event{
			cmEvent(mark, "ADDED", 10),
			cmEvent(mark, "MODIFIED", 20),
			cmEvent(mark, "DELETED", 40),
			cmEvent(mark, "ADDED", 60),
			cmEvent(mark, "MODIFIED", -10), // before the mark
		},
		Requests: []trace.Request{
			{Client: "replica-0", Verb: "create", Resource: "configmaps", Start: at(-5), Code: 201}, // before the mark
			{Client: "replica-0", Verb: "update", Resource: "configmaps", Subresource: "status", Start: at(25), Code: 200},
			{Client: "replica-0", Verb: "create", Resource: "configmaps", Start: at(5), Code: 201},
			{Client: "replica-0", Verb: "get", Resource: "configmaps", Start: at(30), Code: 200},
			{Client: "replica-0", Verb: "create", Resource: "configmaps", Start: at(50), Code: 201},
			{Client: "replica-0", Verb: "create", Resource: "configmaps", Start: at(55), Code: 201, DryRun: true},
		},
	}
	for _, space := range []Space{Realistic, Composed, AnchoredLoss} {
		s := testScenario
		s.Space = space
		e := &Env{s: s}
		var own []string
		var first int
		for i, fam := range e.families() {
			if !fam.own {
				continue
			}
			if i != 0 {
				t.Errorf("%v: the own writes' family is family %d, want the first", space, i)
			}
			knobs := map[string]int{"replicas": 0, "at": 0}
			seeds, n := e.ownHeld(knobs, tr, mark, MaxReferencePositions)
			first = n
			if got := e.Anchored(knobs, tr, mark, MaxReferencePositions)[i]; !slices.EqualFunc(got, seeds, func(a, b Schedule) bool { return a.String() == b.String() }) {
				t.Errorf("%v: anchored gives the own family %v, ownHeld %v", space, got, seeds)
			}
			for _, sch := range seeds {
				if _, err := s.EncodeExactly(sch); err != nil {
					t.Errorf("%v: seed %s does not round-trip through its input: %v", space, sch, err)
				}
				st := sch.Steps[0]
				own = append(own, fmt.Sprintf("%s %s %v after %d", st.Action, st.Resource, st.Types, st.After))
			}
		}
		// The first turn: its first write, then its later creates (the
		// one at 50 ms, not the dry run); then its second write.
		want := []string{
			"hold configmaps [ADDED MODIFIED DELETED] after 0", // from before its create at 5 ms
			"hold configmaps [ADDED MODIFIED DELETED] after 3", // from before its create at 50 ms
			"hold configmaps [ADDED MODIFIED DELETED] after 2", // from before its status update at 25 ms
		}
		wantFirst := 2
		if space == AnchoredLoss {
			want, wantFirst = nil, 0
		}
		if !slices.Equal(own, want) {
			t.Errorf("%v: own writes' seeds\n got %q\nwant %q", space, own, want)
		}
		if first != wantFirst {
			t.Errorf("%v: own writes' first turn is %d seeds, want %d", space, first, wantFirst)
		}
	}
}

// TestTakeTurns: families take turns, the first turn giving each family
// its first count, the seeds after the first turn besides the limit.
func TestTakeTurns(t *testing.T) {
	sch := func(n string) Schedule { return Schedule{Knobs: map[string]int{n: 0}} }
	names := func(ss []Schedule) (out []string) {
		for _, s := range ss {
			for k := range s.Knobs {
				out = append(out, k)
			}
		}
		return out
	}
	by := [][]Schedule{{sch("a1"), sch("a2"), sch("a3")}, {sch("b1"), sch("b2")}, {sch("c1")}}
	got := names(takeTurns(by, []int{2, 1, 1}, 6, []Schedule{sch("L")}))
	want := []string{"a1", "a2", "b1", "c1", "L", "a3", "b2"}
	if !slices.Equal(got, want) {
		t.Errorf("takeTurns = %v, want %v", got, want)
	}
	if got := names(takeTurns(by, []int{1, 1, 1}, 2, nil)); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Errorf("takeTurns cut at 2 = %v", got)
	}
}
