package trace_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

func TestLogSinceResetAndJSONL(t *testing.T) {
	var l trace.Log
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.AddRequest(trace.Request{Client: "a", Verb: "get", Start: t0, Code: 200})
	c := l.Cursor()
	id := l.AddEvent(trace.Event{Client: "a", Type: "MODIFIED", Name: "x", ResourceVersion: "7", Arrived: t0.Add(2 * time.Second), Fate: trace.Pending, Rule: 0})
	l.AddRequest(trace.Request{Client: "a", Verb: "update", Start: t0.Add(time.Second), Code: 409, SentRV: "5"})
	l.SetFate(id, trace.Released, t0.Add(3*time.Second))
	l.AddRules(trace.Rules{At: t0.Add(1500 * time.Millisecond), Mark: t0, Rules: []trace.Rule{{Index: 0, Client: "a", Action: "hold", Text: "hold", To: 5 * time.Second}}})

	got := l.Since(c)
	if len(got.Rules) != 1 || got.Rules[0].Rules[0].To != 5*time.Second {
		t.Fatalf("Since(cursor) rules = %+v, want the hold", got.Rules)
	}
	if len(got.Requests) != 1 || got.Requests[0].Verb != "update" {
		t.Fatalf("Since(cursor) requests = %+v, want only the update", got.Requests)
	}
	if len(got.Events) != 1 || got.Events[0].Fate != trace.Released || !got.Events[0].Released.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("Since(cursor) events = %+v, want one released at t0+3s", got.Events)
	}

	var buf bytes.Buffer
	all := l.Since(trace.Cursor{})
	if err := all.WriteJSONL(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], `"update"`) || !strings.Contains(lines[2], `"rules"`) || !strings.Contains(lines[3], `"MODIFIED"`) {
		t.Fatalf("JSONL not in time order:\n%s", buf.String())
	}
	back, err := trace.ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all, back); diff != "" {
		t.Errorf("JSONL round trip (-wrote +read):\n%s", diff)
	}

	// Next reads and advances together: polling sees each entry once.
	first, cur := l.Next(trace.Cursor{})
	l.AddRequest(trace.Request{Client: "a", Verb: "patch", Start: t0.Add(4 * time.Second)})
	second, _ := l.Next(cur)
	if len(first.Requests) != 2 || len(second.Requests) != 1 || second.Requests[0].Verb != "patch" || len(second.Events) != 0 {
		t.Errorf("Next: first %+v, then %+v", first, second)
	}

	l.Reset()
	l.SetFate(id, trace.Dropped, time.Time{}) // a handle from before Reset must not touch the new log
	l.AddEvent(trace.Event{Client: "b", Fate: trace.Pending})
	after := l.Since(c) // a cursor from before Reset sees the whole new log
	if len(after.Requests) != 0 || len(after.Events) != 1 || after.Events[0].Fate != trace.Pending {
		t.Errorf("after Reset: %+v", after)
	}
}
