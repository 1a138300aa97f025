package trace_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// record makes the same history in l: requests, a rule change, events
// released at once, dropped, and held (one still pending at the end), past
// SpillBuffer several times over.
func record(l *trace.Log, t0 time.Time, n int) {
	l.AddRules(trace.Rules{At: t0, Mark: t0, Rules: []trace.Rule{{Index: 0, Client: "c", Action: "hold", Text: "hold"}}})
	var held []trace.EventID
	for i := range n {
		at := t0.Add(time.Duration(i+1) * time.Millisecond)
		l.AddRequest(trace.Request{Client: "c", Verb: "patch", Resource: "configmaps", Name: fmt.Sprint("cm-", i), Start: at, Code: 200, ReturnedRV: fmt.Sprint(2 * i)})
		ev := trace.Event{Client: "c", Stream: 1, Resource: "configmaps", Type: "MODIFIED", Name: fmt.Sprint("cm-", i), ResourceVersion: fmt.Sprint(2 * i), Arrived: at.Add(time.Microsecond), Fate: trace.Pending, Rule: -1}
		switch i % 4 {
		case 0, 1: // released at once, as the proxy does without rules
			id := l.AddEvent(ev)
			l.SetFate(id, trace.Released, ev.Arrived)
		case 2:
			ev.Fate, ev.Rule = trace.Dropped, 0
			l.AddEvent(ev)
		case 3: // held, released later
			ev.Rule = 0
			held = append(held, l.AddEvent(ev))
			if len(held) > 2 {
				l.SetFate(held[0], trace.Released, at)
				held = held[1:]
			}
		}
	}
	l.SetFate(held[0], trace.Aborted, time.Time{}) // the other stays pending
}

func readAll(t *testing.T, write func(*bytes.Buffer) error) trace.Trace {
	t.Helper()
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// inOrder is t in time order, for comparing traces whose lines come in
// different orders.
func inOrder(t trace.Trace) trace.Trace {
	var out trace.Trace
	for _, e := range t.Entries() {
		switch {
		case e.Request != nil:
			out.Requests = append(out.Requests, *e.Request)
		case e.Event != nil:
			out.Events = append(out.Events, *e.Event)
		case e.Rules != nil:
			out.Rules = append(out.Rules, *e.Rules)
		}
	}
	return out
}

// TestSpillLosesNothing records the same history in a Log kept in memory
// and in a bounded one: the bounded one's file grows during the run, its
// memory holds only the pending event, and its whole trace (WriteJSONL, and
// the file after EndSpill) equals the other's.
func TestSpillLosesNothing(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 2000
	var whole trace.Log
	record(&whole, t0, n)
	want := inOrder(whole.Since(trace.Cursor{}))

	path := filepath.Join(t.TempDir(), "trace.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bounded trace.Log
	bounded.AddRequest(trace.Request{Client: "c", Verb: "get", Start: t0.Add(-time.Second), Code: 200}) // held before Spill: written by it
	if err := bounded.Spill(f); err != nil {
		t.Fatal(err)
	}
	if err := bounded.Spill(f); err == nil {
		t.Error("a second Spill: want an error")
	}
	record(&bounded, t0, n)
	want.Requests = append([]trace.Request{{Client: "c", Verb: "get", Start: t0.Add(-time.Second), Code: 200}}, want.Requests...)

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := bounded.Spilled()
	if fi.Size() == 0 || fi.Size() != st.Written || st.Buffered >= trace.SpillBuffer || st.Pending != 1 || st.Err != nil {
		t.Errorf("during the run: file of %d bytes, Spilled() = %+v; want the file to hold what was written, under %d bytes buffered, 1 pending", fi.Size(), st, trace.SpillBuffer)
	}
	if st.Requests != n+1 || st.Rules != 1 || st.Events != n-1 {
		t.Errorf("Spilled() counts %+v; want %d requests, 1 rule change, %d events (one pending)", st, n+1, n-1)
	}
	// Memory holds the pending event only; the cursors still count.
	mem, cur := bounded.Next(trace.Cursor{})
	if len(mem.Requests) != 0 || len(mem.Rules) != 0 || len(mem.Events) != 1 || mem.Events[0].Fate != trace.Pending {
		t.Errorf("a bounded Log's memory: want the one pending event, got %d requests, %d rules, %+v", len(mem.Requests), len(mem.Rules), mem.Events)
	}
	if later, _ := bounded.Next(cur); len(later.Events) != 0 {
		t.Errorf("Next(end): want nothing, got %+v", later.Events)
	}
	if rel, _ := bounded.NextReleased(trace.Cursor{}); len(rel) != 0 {
		t.Errorf("NextReleased of a bounded Log: want none (written out), got %d", len(rel))
	}

	// GET /trace's view: everything, the pending event as it is now.
	got := inOrder(readAll(t, func(b *bytes.Buffer) error { return bounded.WriteJSONL(b) }))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WriteJSONL of the bounded Log (-in memory +bounded):\n%s", diff)
	}
	// The file, once ended, is the whole trace.
	if err := bounded.EndSpill(); err != nil {
		t.Fatal(err)
	}
	file := inOrder(readAll(t, func(b *bytes.Buffer) error {
		_, err := f.Seek(0, 0)
		if err == nil {
			_, err = b.ReadFrom(f)
		}
		return err
	}))
	if diff := cmp.Diff(want, file); diff != "" {
		t.Errorf("the file after EndSpill (-in memory +file):\n%s", diff)
	}
	// The zero Log writes the same through the same method.
	if diff := cmp.Diff(want.Events, inOrder(readAll(t, func(b *bytes.Buffer) error { return whole.WriteJSONL(b) })).Events); diff != "" {
		t.Errorf("WriteJSONL of the Log in memory:\n%s", diff)
	}
}

// TestSpillReset: Reset writes the pending events as they are and starts a
// new generation; handles from before it are ignored.
func TestSpillReset(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var l trace.Log
	if err := l.Spill(f); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := l.AddEvent(trace.Event{Client: "a", Name: "old", Arrived: t0, Fate: trace.Pending})
	l.Reset()
	l.SetFate(old, trace.Released, t0) // from before Reset: ignored
	id := l.AddEvent(trace.Event{Client: "b", Name: "new", Arrived: t0.Add(time.Second), Fate: trace.Pending})
	if mem := l.Since(trace.Cursor{}); len(mem.Events) != 1 || mem.Events[0].Name != "new" {
		t.Errorf("after Reset: want the new pending event only, got %+v", mem.Events)
	}
	l.SetFate(id, trace.Released, t0.Add(2*time.Second))
	l.SetFate(id, trace.Aborted, time.Time{}) // after a final fate: ignored
	got := readAll(t, func(b *bytes.Buffer) error { return l.WriteJSONL(b) })
	if len(got.Events) != 2 || got.Events[0].Name != "old" || got.Events[0].Fate != trace.Pending ||
		got.Events[1].Name != "new" || got.Events[1].Fate != trace.Released {
		t.Errorf("want old (pending at the Reset) and new (released), got %+v", got.Events)
	}
}

// failingFile is a SpillFile in memory whose writes fail, half done, while
// fail is set.
type failingFile struct {
	mu   sync.Mutex
	b    []byte
	fail bool
}

func (f *failingFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		p = p[:len(p)/2]
	}
	if need := int(off) + len(p); need > len(f.b) {
		f.b = append(f.b, make([]byte, need-len(f.b))...)
	}
	copy(f.b[off:], p)
	if f.fail {
		return len(p), errors.New("no space left on device")
	}
	return len(p), nil
}

func (f *failingFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return bytes.NewReader(f.b).ReadAt(p, off)
}

// TestSpillWriteFailure: writes that fail half-way lose nothing; the next
// that succeeds writes over the torn part.
func TestSpillWriteFailure(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var whole trace.Log
	record(&whole, t0, 3000)
	want := inOrder(whole.Since(trace.Cursor{}))

	ff := &failingFile{}
	var l trace.Log
	if err := l.Spill(ff); err != nil {
		t.Fatal(err)
	}
	ff.fail = true
	record(&l, t0, 3000)
	st := l.Spilled()
	if st.Err == nil || st.Buffered < trace.SpillBuffer {
		t.Errorf("while writes fail: want an error and everything buffered, got %+v", st)
	}
	if got := inOrder(readAll(t, func(b *bytes.Buffer) error { return l.WriteJSONL(b) })); !cmp.Equal(want, got) {
		t.Errorf("WriteJSONL while writes fail differs from the Log in memory:\n%s", cmp.Diff(want, got))
	}
	if err := l.EndSpill(); err == nil {
		t.Error("EndSpill while writes fail: want the error")
	}
	ff.fail = false
	if err := l.Flush(); err == nil { // ended: writes nothing more, so the file is still not whole
		t.Error("Flush after a failed EndSpill: want its error still")
	}
	if got := inOrder(readAll(t, func(b *bytes.Buffer) error { return l.WriteJSONL(b) })); !cmp.Equal(want, got) {
		t.Errorf("WriteJSONL after a failed EndSpill differs from the Log in memory:\n%s", cmp.Diff(want, got))
	}

	// Writes that fail, then succeed: the file is whole.
	ff = &failingFile{}
	var l2 trace.Log
	if err := l2.Spill(ff); err != nil {
		t.Fatal(err)
	}
	ff.fail = true
	record(&l2, t0, 1000)
	ff.fail = false
	if err := l2.EndSpill(); err != nil {
		t.Fatal(err)
	}
	var w trace.Log
	record(&w, t0, 1000)
	got, err := trace.ReadJSONL(bytes.NewReader(ff.b))
	if err != nil {
		t.Fatalf("the file after failed writes then a good one: %v", err)
	}
	if diff := cmp.Diff(inOrder(w.Since(trace.Cursor{})), inOrder(got)); diff != "" {
		t.Errorf("the file after failed writes then a good one (-want +got):\n%s", diff)
	}
}

// TestSpillBoundsMemory records 200,000 watch events and 20,000 requests
// in a bounded Log: the heap grows by less than 8 MiB (a Log kept in memory
// grows by about 200 bytes an event, 40 MB here).
func TestSpillBoundsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("records 200,000 events")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var l trace.Log
	if err := l.Spill(f); err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	t0 := time.Now()
	for i := range 200_000 {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		if i%10 == 0 {
			l.AddRequest(trace.Request{Client: "c", Verb: "get", Resource: "configmaps", Namespace: "ns", Name: fmt.Sprint("cm-", i%100), Start: at, Code: 200, ReturnedRV: fmt.Sprint(i)})
		}
		id := l.AddEvent(trace.Event{Client: "c", Stream: 1, Resource: "configmaps", Type: "MODIFIED", Namespace: "ns", Name: fmt.Sprint("cm-", i%100), ResourceVersion: fmt.Sprint(i), Arrived: at, Fate: trace.Pending, Rule: -1})
		l.SetFate(id, trace.Released, at)
	}
	after := heap()
	grew := int64(after) - int64(before)
	st := l.Spilled()
	t.Logf("heap %d → %d bytes (%+d) for 200,000 events; file %d bytes", before, after, grew, st.Written)
	if grew > 8<<20 {
		t.Errorf("a bounded Log's heap grew by %d bytes over 200,000 events; want under 8 MiB", grew)
	}
	if st.Events != 200_000 || st.Requests != 20_000 || st.Err != nil {
		t.Errorf("Spilled() = %+v; want 200000 events and 20000 requests written", st)
	}
	runtime.KeepAlive(&l)
}
