package fuzz

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// TestTimelineAroundTheCause: a long run's timeline shows the lines around
// what matters, not its first ones: the write behind its writer's own
// (here the violation's moment) is in the window with what led to it, the
// lines before and after are counted, and the report names the write as a
// likely cause.
func TestTimelineAroundTheCause(t *testing.T) {
	mark := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	patch := func(ms int, rv, plan string) trace.Request {
		return trace.Request{Client: "c", Verb: "patch", Resource: "rollouts", Subresource: "status", Namespace: "ns", Name: "r",
			Start: mark.Add(time.Duration(ms) * time.Millisecond), Latency: time.Millisecond, Code: 200, ReturnedRV: rv,
			Write: &trace.Write{Patch: "merge", Set: map[string]string{"status.plan.id": strconv.Quote(plan)}}}
	}
	var tr trace.Trace
	rv := 100
	// 100 writes the controller saw the answers of (each one's event
	// released to it), then one from a view behind its own last write.
	for i := range 100 {
		rv++
		tr.Requests = append(tr.Requests, patch(10*i, strconv.Itoa(rv), "p"+strconv.Itoa(i)))
		tr.Events = append(tr.Events, trace.Event{Client: "c", Resource: "rollouts", Type: "MODIFIED", Namespace: "ns", Name: "r", ResourceVersion: strconv.Itoa(rv),
			Arrived: mark.Add(time.Duration(10*i+2) * time.Millisecond), Released: mark.Add(time.Duration(10*i+2) * time.Millisecond), Fate: trace.Released, Rule: 0})
	}
	tr.Requests = append(tr.Requests, patch(1005, "201", "own"), patch(1010, "202", "stale"))
	for i := range 50 { // and a tail of other writes
		tr.Requests = append(tr.Requests, trace.Request{Client: "d", Verb: "patch", Resource: "configmaps", Namespace: "ns", Name: "x" + strconv.Itoa(i),
			Start: mark.Add(time.Duration(1100+10*i) * time.Millisecond), Code: 200, ReturnedRV: strconv.Itoa(300 + i)})
	}
	res := &Result{Scenario: "s", Mark: mark, Trace: tr, Violations: []Violation{{Oracle: "end-state", Message: "ConfigMap only-a: present"}}}
	lines := res.Timeline(30)
	text := strings.Join(lines, "\n")
	if !strings.Contains(text, "[view rv 200, behind its own write at rv 201: replaced 1 of its values]") {
		t.Errorf("the write behind its own is not in the timeline, marked:\n%s", text)
	}
	if !strings.HasPrefix(lines[0], "... ") || !strings.Contains(lines[0], "earlier (see the trace)") || !strings.Contains(lines[len(lines)-1], "more (see the trace)") {
		t.Errorf("want the lines before and after the window counted:\n%s", text)
	}
	rep := res.Report()
	if want := "a likely cause: 1 writes sent from a view older than their writer's own last write replaced values of that write"; !strings.Contains(rep, want) ||
		!strings.Contains(rep, `status.plan.id="stale" replaced its own "own" of rv 201`) {
		t.Errorf("report lacks the cause:\n%s", rep)
	}
}

// TestReportNamesAnOvertakenAnswer: a finding whose trace has a write's
// answer that arrived older than its client's view, never followed by a
// newer version of the object, names it as a possible cause (a write-back
// would have pinned the cache to it), and an execution without one does not.
func TestReportNamesAnOvertakenAnswer(t *testing.T) {
	mark := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return mark.Add(time.Duration(n) * time.Millisecond) }
	event := func(rv string, n int) trace.Event {
		return trace.Event{Client: "argo", Resource: "replicasets", Group: "apps", Type: "MODIFIED", Namespace: "ns", Name: "bg-1", ResourceVersion: rv,
			Arrived: ms(n), Released: ms(n), Fate: trace.Released, Rule: -1}
	}
	patch := trace.Request{Client: "argo", Verb: "patch", APIGroup: "apps", Resource: "replicasets", Namespace: "ns", Name: "bg-1",
		Start: ms(100), Latency: 5 * time.Millisecond, Held: time.Second, FaultKind: trace.FaultSlow, Code: 200, ReturnedRV: "11",
		Caller: "rollout/controller.go:1023", Write: &trace.Write{Patch: "strategic-merge", Set: map[string]string{"spec.replicas": "0"}}}
	res := &Result{Scenario: "s", Mark: mark, Namespace: "ns", Trace: trace.Trace{Requests: []trace.Request{patch}, Events: []trace.Event{event("10", 50), event("12", 400)}},
		Violations: []Violation{{Oracle: "end-state", Message: "Rollout bg: status.replicas=4 (reference runs: 2)"}}}
	want := "a possible cause, where the client writes its writes' answers into its cache: 1 answers arrived older than what the client had been shown"
	if rep := res.Report(); !strings.Contains(rep, want) || !strings.Contains(rep, "its answer, rv 11, arrived 1.005s after it was sent, held 1.000s by a slow-answer fault, when the client had been shown rv 12") {
		t.Errorf("report lacks the overtaken answer:\n%s", rep)
	}
	if tl := strings.Join(res.Timeline(30), "\n"); !strings.Contains(tl, "[answered at t+1.105s, after rv 12 had been shown; never shown again]") {
		t.Errorf("the timeline does not mark the answer:\n%s", tl)
	}
	before := *res // the answer came before the execution's mark: a previous execution's
	before.Mark = ms(1500)
	if rep := before.Report(); strings.Contains(rep, want) {
		t.Errorf("an answer before the mark is named as a cause:\n%s", rep)
	}
	other := *res // another execution's namespace
	other.Namespace = "ns-2"
	if rep := other.Report(); strings.Contains(rep, want) {
		t.Errorf("an answer in another execution's namespace is named as a cause:\n%s", rep)
	}
	res.Trace.Events = append(res.Trace.Events, event("13", 1200)) // shown again: the cache healed
	if rep := res.Report(); strings.Contains(rep, want) {
		t.Errorf("an answer followed by a newer version is named as a cause:\n%s", rep)
	}
}
