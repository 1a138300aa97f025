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
	// Mark is t = 0 on the time axis (the schedule's mark). Zero: the mark
	// of the first rules the trace records (trace.Rules), else the trace's
	// first entry.
	Mark time.Time
	// Trace is what happened.
	Trace trace.Trace
	// Bands are the schedule's windows. Zero: the windows of the rules the
	// trace records (trace.Rules), each while it was in force.
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
	v := layout(fromRules(p))
	if err := pageTemplate.Execute(w, v); err != nil {
		return fmt.Errorf("unable to write report %q: %w", v.Title, err)
	}
	return nil
}

// fromRules fills Mark and Bands, when they are zero, from the rule changes
// the trace records: each rule's window after its mark, while it was in force
// (until rules replaced it, or the trace ended).
func fromRules(p Page) Page {
	rs := p.Trace.Rules
	if len(rs) == 0 {
		return p
	}
	if p.Mark.IsZero() {
		for _, r := range rs {
			if len(r.Rules) > 0 {
				p.Mark = r.Mark
				break
			}
		}
	}
	if len(p.Bands) > 0 {
		return p
	}
	var end time.Time
	for _, e := range p.Trace.Entries() {
		for _, t := range []time.Time{e.Time(), entryEnd(e)} {
			if t.After(end) {
				end = t
			}
		}
	}
	for i, r := range rs {
		until := end
		for _, next := range rs[i+1:] {
			if !next.Added {
				until = next.At
				break
			}
		}
		for _, rule := range r.Rules {
			start, stop := r.Mark.Add(rule.From), until
			if rule.To > 0 && r.Mark.Add(rule.To).Before(stop) {
				stop = r.Mark.Add(rule.To)
			}
			if start.Before(r.At) {
				start = r.At
			}
			if !stop.After(start) {
				continue
			}
			p.Bands = append(p.Bands, Band{
				Client: rule.Client, Start: start, End: stop,
				Label: fmt.Sprintf("rule %d: %s", rule.Index, rule.Text), Cause: causes[rule.Action],
			})
		}
	}
	return p
}

func entryEnd(e trace.Entry) time.Time {
	switch {
	case e.Request != nil:
		return e.Request.Start.Add(e.Request.Latency)
	case e.Event != nil:
		return e.Event.Released
	}
	return e.Rules.At
}

// causes says what in a real cluster does what each action does (package
// proxy's Action documentation).
var causes = map[string]string{
	"delay":  "a slow or overloaded apiserver, a congested network, a client that reads slowly",
	"hold":   "a slow or overloaded apiserver, a congested network, a client that reads slowly",
	"drop":   "nothing: a real watch never loses an event silently",
	"break":  "the apiserver's watch timeout, an apiserver restart, a load balancer reset",
	"expire": "etcd compaction, a watch cache that no longer holds the resourceVersion",
	"rewind": "a LIST served by an apiserver whose watch cache lags etcd",
	"freeze": "nothing by itself: a harness stops the client between two writes, to kill it there",
	"cut":    "a controller killed, or its connection lost, after sending a write and before its answer",
}
