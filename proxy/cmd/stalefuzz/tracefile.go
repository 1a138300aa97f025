package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// flushEvery is how often a trace written as it grows is flushed to its
// file, so that the file is at most this far behind (and a killed proxy
// loses at most this much).
const flushEvery = time.Second

// traceFile is where a run's trace goes: --trace, written as the trace grows
// (trace.Log.Spill), or kept whole in memory and written on exit
// (--trace-in-memory).
type traceFile struct {
	path string
	log  *trace.Log
	f    *os.File // nil: in memory
	warn func(format string, args ...any)

	stop, flushed chan struct{} // the flusher's
	finished      bool          // finish was called: the file is kept
}

// openTrace prepares path for l. Unless inMemory, it creates (truncates)
// path, bounds l by writing to it, and flushes it every flushEvery.
func openTrace(path string, l *trace.Log, inMemory bool, warn func(string, ...any)) (*traceFile, error) {
	t := &traceFile{path: path, log: l, warn: warn}
	if inMemory {
		return t, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("unable to create trace file %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil { // a file that was there before, with another mode
		_ = f.Close()
		return nil, fmt.Errorf("unable to make trace file %s private: %w", path, err)
	}
	if err := l.Spill(f); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("unable to write the trace to %s: %w", path, err)
	}
	t.f, t.stop, t.flushed = f, make(chan struct{}), make(chan struct{})
	go t.flusher()
	return t, nil
}

// flusher flushes the trace every flushEvery until stop, and says when
// writing starts failing and when it works again.
func (t *traceFile) flusher() {
	defer close(t.flushed)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		err := t.log.Flush()
		switch {
		case err != nil && !failing:
			t.warn("stalefuzz: warning: trace %s: %v; the trace is kept in memory until a write succeeds", t.path, err)
		case err == nil && failing:
			t.warn("stalefuzz: trace %s: writing again; nothing was lost", t.path)
		}
		failing = err != nil
	}
}

func (t *traceFile) stopFlusher() {
	if t.stop != nil {
		close(t.stop)
		<-t.flushed
		t.stop = nil
	}
}

// writeJSONL writes the whole trace so far (GET /trace).
func (t *traceFile) writeJSONL(w io.Writer) error { return t.log.WriteJSONL(w) }

// abandon undoes openTrace after a failed start; after finish it does
// nothing.
func (t *traceFile) abandon() {
	t.stopFlusher()
	if t.f != nil && !t.finished {
		_ = t.f.Close()
		_ = os.Remove(t.path)
	}
}

// finish writes what the trace still holds, once the proxy has stopped,
// and says what was written.
func (t *traceFile) finish() (string, error) {
	t.finished = true
	t.stopFlusher()
	if t.f == nil {
		tr := t.log.Since(trace.Cursor{})
		if err := writeAtomic(t.path, 0o600, func(f *os.File) error { return tr.WriteJSONL(f) }); err != nil {
			return "", fmt.Errorf("unable to write the trace to %s: %w", t.path, err)
		}
		return fmt.Sprintf("trace of %d requests and %d watch events written to %s", len(tr.Requests), len(tr.Events), t.path), nil
	}
	var errs []error
	if err := t.log.EndSpill(); err != nil {
		// The file holds whole entries only; the rest is in memory. Write
		// it all beside the file, and rename it over.
		st := t.log.Spilled()
		if err2 := writeAtomic(t.path, 0o600, func(f *os.File) error { return t.log.WriteJSONL(f) }); err2 != nil {
			errs = append(errs, fmt.Errorf("unable to complete the trace %s (%v), nor to write it again (%w): it holds %d bytes of whole entries; %d bytes more are lost",
				t.path, err, err2, st.Written, st.Buffered))
		}
	}
	if err := t.f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("unable to close the trace %s: %w", t.path, err))
	}
	st := t.log.Spilled()
	if st.Unencoded > 0 {
		errs = append(errs, fmt.Errorf("trace %s: %d entries could not be encoded and are missing: %w", t.path, st.Unencoded, st.Err))
	}
	return fmt.Sprintf("trace of %d requests and %d watch events written to %s", st.Requests, st.Events, t.path), errors.Join(errs...)
}
