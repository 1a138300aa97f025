package proxy

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Action is what a Rule does to the watch events it matches.
type Action int

const (
	// Delay releases a matching event Rule.Delay after it arrived (but never
	// before an earlier event of the same stream).
	Delay Action = iota
	// Hold releases a matching event when the rule's window ends (at the mark
	// plus Rule.To).
	Hold
	// Drop never forwards a matching event; the stream stays open.
	Drop
)

func (a Action) String() string {
	switch a {
	case Delay:
		return "delay"
	case Hold:
		return "hold"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Rule selects watch events and says what to do with them. Every empty
// selector matches anything. An event is matched against the rules in force
// when it arrives at the proxy; the first rule that matches decides its fate,
// which later rule changes do not revisit.
type Rule struct {
	// Client is the name given to Proxy.Client. Empty: every client.
	Client string
	// Resource is the plural resource of the watch request ("configmaps",
	// "gitrepositories"). Empty: every resource.
	Resource string
	// Namespace and Name are the event object's. Empty: any.
	Namespace, Name string
	// Types lists event types (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR).
	// Empty: every type.
	Types []string
	// From and To bound the window, relative to the mark given to SetRules, in
	// which an event must arrive to match: mark+From <= arrival < mark+To.
	// To zero means the window never ends (not allowed for Hold).
	From, To time.Duration
	// Action is what happens to a matching event; Delay is the zero value.
	Action Action
	// Delay is how long Delay holds each event. Zero: not at all.
	Delay time.Duration
	// After lets the first After events the rule matches (counted over
	// every stream, from SetRules on) pass as if it did not match: it places
	// a stall right after a given write of the controller's own, whatever
	// the timing. Zero: the rule applies from its first match.
	After int
}

func (r Rule) String() string {
	s := r.Action.String()
	if r.Action == Delay {
		s += " " + r.Delay.String()
	}
	s += " " + or(r.Resource, "*")
	if r.Namespace != "" || r.Name != "" {
		s += " " + or(r.Namespace, "*") + "/" + or(r.Name, "*")
	}
	if len(r.Types) > 0 {
		s += fmt.Sprintf(" %v", r.Types)
	}
	if r.After > 0 {
		s += fmt.Sprintf(" after the first %d", r.After)
	}
	s += " for " + or(r.Client, "every client")
	if r.To > 0 {
		s += fmt.Sprintf(" during t+%v–%v", r.From, r.To)
	} else {
		s += fmt.Sprintf(" from t+%v", r.From)
	}
	return s
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// Validate reports whether the rule is well formed: a known action, no
// negative durations, a non-empty window, and an end for Hold.
func (r Rule) Validate() error {
	switch {
	case r.Action < Delay || r.Action > Drop:
		return fmt.Errorf("unknown action %d", int(r.Action))
	case r.From < 0 || r.To < 0 || r.Delay < 0 || r.After < 0:
		return errors.New("negative duration or count")
	case r.To != 0 && r.To <= r.From:
		return fmt.Errorf("window t+%v–%v is empty", r.From, r.To)
	case r.Action == Hold && r.To == 0:
		return errors.New("hold needs a window end (To)")
	}
	return nil
}

// ruleSet is an immutable set of rules with their mark; the proxy swaps it
// atomically.
type ruleSet struct {
	mark    time.Time
	rules   []Rule
	matched []atomic.Int64 // per rule, for After
}

// event is what rules match on.
type event struct {
	client, resource, typ, namespace, name string
}

// decide returns the index of the first rule matching e arriving at t, and the
// time at which e may be released (ignoring ordering), or drop. No match: -1
// and t.
func (rs *ruleSet) decide(e event, t time.Time) (rule int, release time.Time, drop bool) {
	if rs == nil {
		return -1, t, false
	}
	since := t.Sub(rs.mark)
	for i, r := range rs.rules {
		if since < r.From || (r.To > 0 && since >= r.To) ||
			(r.Client != "" && r.Client != e.client) ||
			(r.Resource != "" && r.Resource != e.resource) ||
			(r.Namespace != "" && r.Namespace != e.namespace) ||
			(r.Name != "" && r.Name != e.name) ||
			(len(r.Types) > 0 && !slices.Contains(r.Types, e.typ)) {
			continue
		}
		if r.After > 0 && rs.matched[i].Add(1) <= int64(r.After) {
			continue
		}
		switch r.Action {
		case Drop:
			return i, t, true
		case Hold:
			return i, rs.mark.Add(r.To), false
		default:
			return i, t.Add(r.Delay), false
		}
	}
	return -1, t, false
}
