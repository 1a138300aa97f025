package report

import (
	"fmt"
	"html/template"
	"io"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Page is what one picture shows. Only Trace is required.
type Page struct {
	// Title heads the page (a finding's schedule). Zero: "stalefuzz trace".
	Title string
	// Notes are lines under the title (the scenario, what each step models
	// in a real cluster). Zero: none.
	Notes []string
	// Mark is t = 0 on the time axis (the schedule's mark). Zero: the
	// trace's first entry.
	Mark time.Time
	// Trace is what happened.
	Trace trace.Trace
	// Bands are the schedule's windows. Zero: none.
	Bands []Band
	// Violations are the oracles' verdicts. Zero: none.
	Violations []Violation
	// Objects limits the events drawn to these objects ("namespace/name" or
	// "name" for cluster-scoped). Zero: every object a write touched, and
	// every object an event was held, dropped or broken for.
	Objects []string
	// Sections are appended below the picture (the blind-write audit).
	Sections []Section
}

// Band is a window during which a step acted on one client (or all).
type Band struct {
	Client     string // "" for every lane
	Start, End time.Time
	Label      string // the step, as the schedule prints it
	Cause      string // what in a real cluster does the same (shown on hover)
}

// Violation is one oracle's verdict at a time (zero: the end of the trace).
type Violation struct {
	At      time.Time
	Oracle  string
	Message string
}

// Section is a titled block of trusted HTML under the picture.
type Section struct {
	Title string
	HTML  template.HTML
}

// Write renders p as one HTML document. The document depends on p alone:
// the same Page gives the same bytes.
func Write(w io.Writer, p Page) error {
	v := layout(p)
	if err := pageTemplate.Execute(w, v); err != nil {
		return fmt.Errorf("unable to write report %q: %w", v.Title, err)
	}
	return nil
}
