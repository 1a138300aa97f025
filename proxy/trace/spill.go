package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// SpillFile is where a bounded Log writes its entries: an *os.File opened
// for reading and writing (os.Create), without O_APPEND, is one. The Log
// writes at the end of what it wrote before, and reads back what it wrote.
type SpillFile interface {
	io.WriterAt
	io.ReaderAt
}

// SpillBuffer is how many bytes of encoded entries a bounded Log gathers
// before it writes them to its SpillFile.
const SpillBuffer = 64 << 10

// SpillStats says what a bounded Log has written and what it holds.
type SpillStats struct {
	// Requests, Events and Rules count the entries written or buffered
	// since Spill, across Resets.
	Requests, Events, Rules int
	// Written is the size of what is in the SpillFile: whole entries only.
	Written int64
	// Buffered is the size of the entries encoded but not written yet: up
	// to SpillBuffer, more while writes to the file fail.
	Buffered int
	// Pending is how many events are held in memory because their fate is
	// not final yet (they are held or delayed at the proxy).
	Pending int
	// Unencoded counts entries that could not be encoded as JSON and are
	// missing from the trace (a time outside the years 0–9999); Err says
	// which was the first.
	Unencoded int
	// Err is the last error writing the file (nil again once a write
	// succeeds), or else the first entry that could not be encoded.
	Err error
}

// spill is the state of a bounded Log.
type spill struct {
	f    SpillFile
	size int64  // bytes of whole entries written to f
	buf  []byte // entries encoded and not yet written to f
	next int    // len(buf) at which to write again
	// writeErr is the last write's error, nil once one succeeds; encErr is
	// the first entry that could not be encoded.
	writeErr, encErr error
	ended            bool // EndSpill: nothing more is written to f

	pending map[int]Event // events whose fate is not final, by index in this generation
	peak    int           // largest len(pending) since it was last made anew

	// What this generation recorded, for cursors.
	requests, events, releases, rules int
	stats                             SpillStats // across generations
}

// Spill bounds the memory l takes, for a log that lives long (the
// standalone proxy in front of a busy cluster): from now on, every entry is
// written to f as JSONL as soon as it is final, and forgotten. A request and
// a rule change are final when recorded; an event is final once its fate is
// not Pending (released, dropped, broken or aborted), which for an event
// held by a rule is when the rule lets it go, so the lines of f are in the
// order entries became final, not in time order (Trace.Entries orders them;
// ReadJSONL reads them in any order). What l already holds is written
// first.
//
// Memory then holds only the events still pending (as many as the proxy
// holds in its streams, whose bytes it keeps anyway) and up to SpillBuffer
// of entries not yet written. A write that fails loses nothing: its
// entries stay in memory and are written, at the same offset, by the next
// write that succeeds (memory grows meanwhile); Spilled says so.
//
// A bounded log answers Next, Since and NextReleased from what it holds:
// the events after the cursor still pending; what it wrote out is in f,
// and WriteJSONL writes all of it. Cursors and EventIDs work as before.
// Reset writes the events still pending as they are (fate pending), then
// starts a new generation; f keeps everything since Spill.
//
// Spill fails if l is bounded already.
func (l *Log) Spill(f SpillFile) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spill != nil {
		return errors.New("trace: Spill called twice")
	}
	s := &spill{
		f: f, next: SpillBuffer, pending: map[int]Event{},
		requests: len(l.requests), events: l.events.n, releases: len(l.releases), rules: len(l.rules),
	}
	held := Trace{Requests: l.requests, Rules: l.rules}
	for i := range l.events.n {
		if ev := *l.events.at(i); ev.Fate == Pending {
			s.pending[i] = ev
		} else {
			held.Events = append(held.Events, ev)
		}
	}
	for _, e := range held.Entries() {
		s.add(e)
	}
	s.peak = len(s.pending)
	l.requests, l.rules, l.events, l.releases = nil, nil, chunks{}, nil
	l.spill = s
	return nil
}

// Flush writes what a bounded Log has buffered to its SpillFile, so that
// the file holds every final entry; it returns the error of that write or
// of an entry that could not be encoded. It does nothing for a Log that is
// not bounded.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spill == nil {
		return nil
	}
	return l.spill.flush()
}

// EndSpill writes the events a bounded Log still holds as they are (fate
// pending) and everything buffered, and stops writing to its SpillFile: the
// file is then the whole trace. Entries recorded later are kept in memory,
// encoded; WriteJSONL still reads the file, which must stay open as long as
// it may be called. It returns the error of the last write (then WriteJSONL
// still writes everything: the file's whole entries, then what is in
// memory), or of an entry that could not be encoded. It does nothing for a
// Log that is not bounded.
func (l *Log) EndSpill() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.spill
	if s == nil || s.ended {
		return nil
	}
	s.addPending()
	err := s.flush()
	s.ended = true
	return err
}

// Spilled reports what a bounded Log has written and holds; the zero
// SpillStats for a Log that is not bounded.
func (l *Log) Spilled() SpillStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.spill
	if s == nil {
		return SpillStats{}
	}
	st := s.stats
	st.Written, st.Buffered, st.Pending = s.size, len(s.buf), len(s.pending)
	st.Err = s.err()
	return st
}

// WriteJSONL writes everything l holds as JSONL: for a Log that is not
// bounded, Since(Cursor{}) in time order; for a bounded one, everything
// since Spill, Resets included: the SpillFile's entries (written first, if
// buffered), then the events still pending, as they are now.
func (l *Log) WriteJSONL(w io.Writer) error {
	l.mu.Lock()
	s := l.spill
	if s == nil {
		t, _ := l.next(Cursor{})
		l.mu.Unlock()
		return t.WriteJSONL(w)
	}
	if !s.ended {
		_ = s.flush() // on failure the entries stay in buf, copied below
	}
	f, size, buf := s.f, s.size, bytes.Clone(s.buf)
	pending := Trace{Events: s.pendingSince(0), Restarts: slices.Clone(l.restarts)}
	encErr := s.encErr
	l.mu.Unlock()

	// f's first size bytes are never written again: read them unlocked.
	if _, err := io.Copy(w, io.NewSectionReader(f, 0, size)); err != nil {
		return fmt.Errorf("unable to copy %d bytes of trace from its file: %w", size, err)
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("unable to write %d bytes of trace: %w", len(buf), err)
	}
	if err := pending.WriteJSONL(w); err != nil {
		return err
	}
	return encErr
}

// add encodes e at the end of the buffer, and writes the buffer when it is
// full.
func (s *spill) add(e Entry) {
	ok := false
	if e.Event != nil {
		s.buf, ok = appendEventEntry(s.buf, e.Event)
	}
	if !ok {
		b, err := json.Marshal(e)
		if err != nil {
			s.stats.Unencoded++
			if s.encErr == nil {
				s.encErr = fmt.Errorf("unable to encode trace entry at %s: %w — it is missing from the trace", e.Time(), err)
			}
			return
		}
		s.buf = append(s.buf, b...)
	}
	switch {
	case e.Request != nil:
		s.stats.Requests++
	case e.Event != nil:
		s.stats.Events++
	case e.Rules != nil:
		s.stats.Rules++
	}
	s.buf = append(s.buf, '\n')
	if len(s.buf) >= s.next && !s.ended {
		_ = s.flush()
	}
}

// flush writes the buffer at the end of the file's whole entries. A failed
// or short write keeps the buffer, and the next attempt (once as much again
// is buffered, or at Flush) writes it at the same offset, over whatever
// part of it the failed one left.
func (s *spill) flush() error {
	if len(s.buf) > 0 && !s.ended {
		n, err := s.f.WriteAt(s.buf, s.size)
		if err == nil && n < len(s.buf) {
			err = io.ErrShortWrite
		}
		if err != nil {
			s.writeErr = fmt.Errorf("unable to write %d bytes of trace at offset %d: %w (kept in memory, written again later)", len(s.buf), s.size, err)
			s.next = 2 * len(s.buf)
		} else {
			s.size += int64(n)
			s.writeErr, s.next = nil, SpillBuffer
			if cap(s.buf) > 4*SpillBuffer {
				s.buf = nil // it grew while writes failed: let it go
			} else {
				s.buf = s.buf[:0]
			}
		}
	}
	return s.err()
}

func (s *spill) err() error {
	if s.writeErr != nil {
		return s.writeErr
	}
	return s.encErr
}

// addEvent records e, which has index i in this generation.
func (s *spill) addEvent(i int, e Event) {
	s.events++
	if e.Fate == Released {
		s.releases++
	}
	if e.Fate != Pending {
		s.add(Entry{Event: &e})
		return
	}
	s.pending[i] = e
	s.peak = max(s.peak, len(s.pending))
}

// setFate updates the pending event i, and writes it once it is final. A
// fate set after a final one is ignored: the event is written already.
func (s *spill) setFate(i int, f Fate, at time.Time) {
	ev, ok := s.pending[i]
	if !ok {
		return
	}
	ev.Fate = f
	if f == Released {
		ev.Released = at
		s.releases++
	}
	if f == Pending {
		s.pending[i] = ev
		return
	}
	s.forget(i)
	s.add(Entry{Event: &ev})
}

// forget removes pending event i; a map that grew for a burst of held
// events is made anew once they are gone, since a map never shrinks.
func (s *spill) forget(i int) {
	delete(s.pending, i)
	if len(s.pending) == 0 && s.peak > 1024 {
		s.pending, s.peak = map[int]Event{}, 0
	}
}

// addPending writes the pending events as they are, in the order they
// arrived, and forgets them.
func (s *spill) addPending() {
	for _, i := range slices.Sorted(maps.Keys(s.pending)) {
		ev := s.pending[i]
		s.add(Entry{Event: &ev})
	}
	s.pending, s.peak = map[int]Event{}, 0
}

// pendingSince returns the pending events with index i or later, in the
// order they arrived.
func (s *spill) pendingSince(i int) []Event {
	var out []Event
	for _, j := range slices.Sorted(maps.Keys(s.pending)) {
		if j >= i {
			out = append(out, s.pending[j])
		}
	}
	return out
}

// reset starts a new generation, writing the pending events first.
func (s *spill) reset() {
	s.addPending()
	s.requests, s.events, s.releases, s.rules = 0, 0, 0, 0
}

func (s *spill) end(gen uint64) Cursor {
	return Cursor{gen: gen, requests: s.requests, events: s.events, releases: s.releases, rules: s.rules}
}
