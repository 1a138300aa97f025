package audit_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stalefuzz/stalefuzz/proxy/audit"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// statusPatch is a successful patch of rollouts/status of ns/r by client.
func statusPatch(client string, ms int, sentRV, rv string, set map[string]string) trace.Request {
	return trace.Request{
		Client: client, Verb: "patch", Resource: "rollouts", Subresource: "status", Namespace: "ns", Name: "r",
		Start: at(ms), Latency: time.Millisecond, Code: 200, SentRV: sentRV, ReturnedRV: rv,
		Caller: "controller.go:70 (*Reconciler).Reconcile", Write: &trace.Write{Patch: "merge", Set: set},
	}
}

func released(client, rv string, ms int) trace.Event {
	return trace.Event{Client: client, Resource: "rollouts", Type: "MODIFIED", Namespace: "ns", Name: "r", ResourceVersion: rv,
		Arrived: at(ms), Fate: trace.Released, Released: at(ms), Rule: -1}
}

func TestBlindWriteOverUnseenChange(t *testing.T) {
	tr := trace.Trace{
		Requests: []trace.Request{
			statusPatch("a", 100, "", "11", map[string]string{"status.plan.id": `"A"`}),
			statusPatch("b", 200, "", "12", map[string]string{"status.plan.id": `"B"`, "status.plan.steps": "3"}),
		},
		Events: []trace.Event{released("b", "10", 50)}, // b saw rv 10, never a's 11
	}
	rep := audit.Of(tr)
	if len(rep.Overwrites) != 1 {
		t.Fatalf("want 1 overwrite, got %+v", rep.Overwrites)
	}
	o := rep.Overwrites[0]
	want := audit.Overwrite{At: at(200), Client: "b", Caller: "controller.go:70 (*Reconciler).Reconcile", Verb: "patch", Resource: "rollouts",
		Subresource: "status", Namespace: "ns", Name: "r", RV: "12", View: "10", Path: "status.plan.id", Value: `"B"`, Replaced: `"A"`,
		By: "a", ByCaller: "controller.go:70 (*Reconciler).Reconcile", ByRV: "11"}
	if d := cmp.Diff(want, o); d != "" {
		t.Fatalf("overwrite (-want +got):\n%s", d)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"controller.go:70", "merge patch", "none", `b patch status rollouts ns/r at controller.go:70 (*Reconciler).Reconcile (rv 12; b had been sent rv 10)`, `status.plan.id="B" replaced "A", written by a at rv 11`} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
	if !strings.Contains(string(rep.HTML()), `class="blind overwrote"`) {
		t.Errorf("HTML does not mark the row:\n%s", rep.HTML())
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
}

func TestOwnUnseenWrite(t *testing.T) {
	rep := audit.Of(trace.Trace{Requests: []trace.Request{
		statusPatch("b", 100, "", "11", map[string]string{"status.plan.id": `"A"`}),
		statusPatch("b", 200, "", "12", map[string]string{"status.plan.id": `"B"`}),
	}})
	if len(rep.Overwrites) != 1 || !rep.Overwrites[0].Own || rep.Overwrites[0].View != "" {
		t.Fatalf("want one overwrite of its own unseen write, from no view, got %+v", rep.Overwrites)
	}
	if s := rep.Overwrites[0].String(); !strings.Contains(s, "written by b itself, unseen") || !strings.Contains(s, "had been sent no version of it") {
		t.Fatalf("message: %s", s)
	}
}

func TestNotFlagged(t *testing.T) {
	for name, tr := range map[string]trace.Trace{
		"the writer had been sent the other's version": {
			Requests: []trace.Request{
				statusPatch("a", 100, "", "11", map[string]string{"status.plan.id": `"A"`}),
				statusPatch("b", 200, "", "12", map[string]string{"status.plan.id": `"B"`}),
			},
			Events: []trace.Event{released("b", "11", 150)},
		},
		"the writer had listed after it": {
			Requests: []trace.Request{
				statusPatch("a", 100, "", "11", map[string]string{"status.plan.id": `"A"`}),
				{Client: "b", Verb: "list", Resource: "rollouts", Namespace: "ns", Start: at(150), Latency: time.Millisecond, Code: 200, ReturnedRV: "11"},
				statusPatch("b", 200, "", "12", map[string]string{"status.plan.id": `"B"`}),
			},
		},
		"a locked write": {
			Requests: []trace.Request{
				statusPatch("a", 100, "", "11", map[string]string{"status.plan.id": `"A"`}),
				statusPatch("b", 200, "10", "12", map[string]string{"status.plan.id": `"B"`}),
			},
		},
		"the same value": {
			Requests: []trace.Request{
				statusPatch("a", 100, "", "11", map[string]string{"status.plan.id": `"A"`}),
				statusPatch("b", 200, "", "12", map[string]string{"status.plan.id": `"A"`}),
			},
		},
		"another field": {
			Requests: []trace.Request{
				statusPatch("a", 100, "", "11", map[string]string{"status.plan.id": `"A"`}),
				statusPatch("b", 200, "", "12", map[string]string{"status.observedGeneration": "2"}),
			},
		},
		"a dry run": {
			Requests: []trace.Request{
				statusPatch("a", 100, "", "11", map[string]string{"status.plan.id": `"A"`}),
				func() trace.Request {
					r := statusPatch("b", 200, "", "12", map[string]string{"status.plan.id": `"B"`})
					r.DryRun = true
					return r
				}(),
			},
		},
		"status in a main-resource write of a resource with a status subresource": {
			Requests: []trace.Request{
				statusPatch("a", 100, "", "11", map[string]string{"status.plan.id": `"A"`}),
				func() trace.Request {
					r := statusPatch("b", 200, "", "12", map[string]string{"status.plan.id": `"B"`})
					r.Subresource = ""
					return r
				}(),
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if rep := audit.Of(tr); len(rep.Overwrites) != 0 {
				t.Fatalf("flagged: %v", rep.Overwrites)
			}
		})
	}
}

func TestRowsCountKindsAndConflicts(t *testing.T) {
	locked := statusPatch("a", 100, "10", "", nil)
	locked.Code = 409
	apply := statusPatch("a", 300, "", "12", nil)
	apply.Write = &trace.Write{Patch: "apply", Force: true}
	del := trace.Request{Client: "a", Verb: "delete", Resource: "rollouts", Namespace: "ns", Name: "r", Start: at(400), Code: 200, Write: &trace.Write{UID: "u"}}
	dry := statusPatch("a", 500, "", "", nil)
	dry.DryRun = true
	rep := audit.Of(trace.Trace{Requests: []trace.Request{
		locked, statusPatch("a", 200, "11", "12", nil), apply, del, dry,
		{Client: "a", Verb: "create", Resource: "rollouts", Namespace: "ns", Name: "s", Start: at(600), Code: 201},
	}})
	var got []string
	for _, r := range rep.Rows {
		got = append(got, strings.Join([]string{r.Verb, r.Kind, r.Lock, itoa(r.Writes), itoa(r.Conflicts)}, " "))
	}
	want := []string{
		"create create  1 0",
		"delete delete uid 1 0",
		"patch apply --force none 1 0",
		"patch merge patch resourceVersion 2 1",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("rows (-want +got):\n%s", d)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestTableShowsWhereLongValuesDiffer(t *testing.T) {
	long := func(id string) string {
		return `[{"lastTransitionTime":"2026-11-21T21:17:23Z","message":"plan ` + id + `","reason":"Planned","status":"False","type":"Ready"}]`
	}
	rep := audit.Of(trace.Trace{Requests: []trace.Request{
		statusPatch("a", 100, "", "11", map[string]string{"status.conditions": long("aaaa")}),
		statusPatch("b", 200, "", "12", map[string]string{"status.conditions": long("bbbb")}),
	}})
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"message":"plan bbbb"`) || !strings.Contains(b.String(), `"message":"plan aaaa"`) {
		t.Fatalf("the table does not show where the values differ:\n%s", b.String())
	}
}

func TestTableGroupsSiblingFields(t *testing.T) {
	r := statusPatch("a", 100, "", "11", map[string]string{
		"status.artifact.digest": `"d"`, "status.artifact.path": `"p"`, "status.observedGeneration": "2", "status.url": `"u"`,
	})
	var b strings.Builder
	if err := audit.Of(trace.Trace{Requests: []trace.Request{r}}).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if want := "status.artifact.{digest,path},status.{observedGeneration,url}"; !strings.Contains(b.String(), want) {
		t.Fatalf("want %s in:\n%s", want, b.String())
	}
}

func TestConnectionsAreNotWrites(t *testing.T) {
	rep := audit.Of(trace.Trace{Requests: []trace.Request{
		{Client: "kubectl", Verb: "create", Resource: "pods", Subresource: "exec", Namespace: "ns", Name: "p", Start: at(0), Code: 101},
		{Client: "kubectl", Verb: "create", Resource: "pods", Subresource: "portforward", Namespace: "ns", Name: "p", Start: at(1), Code: 101},
		{Client: "kubectl", Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "ns", Name: "p", Start: at(2), Code: 201},
	}})
	if len(rep.Rows) != 1 || rep.Rows[0].Subresource != "eviction" {
		t.Fatalf("want only the eviction as a write, got %+v", rep.Rows)
	}
}

// Twenty blind writes of one writer to one object read as the first and a
// count; the JSON keeps every one.
func TestTableGroupsRepeatedOverwrites(t *testing.T) {
	var tr trace.Trace
	for i := range 20 {
		rv := 100 + 2*i
		tr.Requests = append(tr.Requests,
			statusPatch("a", 10*i, "", strconv.Itoa(rv), map[string]string{"status.plan.id": strconv.Quote("A" + strconv.Itoa(i))}),
			statusPatch("b", 10*i+5, "", strconv.Itoa(rv+1), map[string]string{"status.plan.id": strconv.Quote("B" + strconv.Itoa(i))}))
	}
	rep := audit.Of(tr)
	if len(rep.Overwrites) < 20 {
		t.Fatalf("want at least 20 overwrites (b never saw a's), got %d", len(rep.Overwrites))
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	_, out, _ := strings.Cut(table.String(), "blind writes over an unseen change")
	if n := strings.Count(out, "b patch status rollouts ns/r"); n != 2 { // the first write shown, and the count line
		t.Errorf("b's writes appear %d times, want its first and one count:\n%s", n, out)
	}
	if !strings.Contains(out, "... and 19 more writes like it: b patch status rollouts ns/r at controller.go:70") {
		t.Errorf("table lacks the count of b's other 19 writes:\n%s", out)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(js), `"client":"b","caller"`); n < 20 {
		t.Errorf("the JSON form lists %d of b's overwrites, want every one", n)
	}
}

// TestTraceStartingWithRules: a trace whose first entry is a rules change (the
// stalefuzz command's --mark-now, an execution whose controllers sent nothing
// before the mark) is audited from that change.
func TestTraceStartingWithRules(t *testing.T) {
	tr := trace.Trace{
		Rules:    []trace.Rules{{At: at(0), Mark: at(0)}},
		Requests: []trace.Request{statusPatch("a", 100, "", "11", map[string]string{"status.plan.id": `"A"`})},
	}
	if rep := audit.Of(tr); !rep.Start.Equal(at(0)) || len(rep.Rows) != 1 {
		t.Errorf("audit of a trace starting with a rules change at %v: got start %v and %d rows, want that start and 1 row", at(0), rep.Start, len(rep.Rows))
	}
}
