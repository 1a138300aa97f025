package proxy

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Action is what a Rule does. Delay, Hold, Drop and Break act on the watch
// events a rule matches; Expire and Rewind on the watch and list requests it
// matches; Freeze, Cut, Lose, Reset, Slow and Reject on the write requests it
// matches (the last four are faults on a write's answer: the client keeps
// running). Each action's
// comment says what in a real cluster does the same, or that nothing does.
type Action int

const (
	// Delay releases a matching event Rule.Delay after it arrived (but never
	// before an earlier event of the same stream). Real cause: a slow or
	// overloaded apiserver, a congested network, a client that reads slowly.
	Delay Action = iota
	// Hold releases a matching event when the rule's window ends (at the mark
	// plus Rule.To). Real cause: the same as Delay, for longer.
	Hold
	// Drop never forwards a matching event; the stream stays open. No real
	// cluster does this: an apiserver never skips an event on an open stream,
	// and client-go's reflector never misses one without relisting. Drop
	// models silent loss, and findings that need it say so.
	Drop
	// Break ends the client's watch stream cleanly just before the first
	// matching event: the events before it are released in order, then the
	// stream ends; neither that event nor anything after it on that stream is
	// forwarded. Each rule breaks a given client's watch of a given resource
	// at most once, so the re-watch (client-go's reflector re-watches at once
	// from the last resourceVersion it saw) meets the apiserver's own replay
	// of what it missed. Real cause: the apiserver's watch timeout, an
	// apiserver restart, a load balancer resetting an idle connection.
	Break
	// Expire makes the client's matching watch requests that resume from a
	// resourceVersion (not WatchList requests, which an apiserver never
	// answers with 410) meet the apiserver's own 410 Expired: the proxy
	// answers them itself with the "too old resource version" ERROR event a
	// kube-apiserver sends, byte for byte as its watch server encodes it
	// (JSON or protobuf, as negotiated). client-go's reflector then relists
	// after its backoff (0.8 s and more), and the states between the last
	// event it saw and that list are never observed. Matched by request time
	// on Client, Resource and Namespace, and by resourceVersion: the first
	// watch it matches sets where the apiserver's watch cache now begins (the
	// newest resourceVersion the proxy had seen), and a watch from there or
	// later (after a relist from a current apiserver) is served; one from
	// an older list (a relist from a lagging apiserver, Rewind) meets 410
	// again. Real cause: etcd compaction, a watch
	// cache whose window no longer holds the client's resourceVersion (after
	// a long disconnect, or on another apiserver).
	Expire
	// Rewind serves the client's matching LIST requests that carry a
	// resourceVersion from the past (a consistent LIST, with none, is served
	// as it is: no apiserver serves one stale): the
	// proxy rewrites them to resourceVersion=R&resourceVersionMatch=Exact, so
	// the real apiserver answers with genuine old state from etcd, where R is
	// the newest resourceVersion the proxy had seen (in any response or watch
	// event, of any client) Rule.Ago before the request, or at the window's
	// start when Ago is zero, but never older than the resourceVersion X
	// the LIST carries: a LIST at resourceVersion=X (X not 0, no match or
	// NotOlderThan) is served at X when R is older, as every apiserver
	// serves it not older than X (its watch cache waits for X), so a relist
	// after 410, which carries the informer's last resourceVersion, never
	// loses what the informer had seen. A LIST with resourceVersionMatch
	// Exact, or a continued one, is served as it asks. The watch that
	// follows starts at R (or X) and the apiserver replays forward from
	// there. A WatchList request
	// (sendInitialEvents=true) in the window cannot be served from the past,
	// so the proxy refuses it the way a kube-apiserver without the WatchList
	// feature does (422 Invalid, its exact Status), and client-go falls back
	// to LIST (reflector.go ListAndWatchWithContext). Real cause: a LIST with
	// resourceVersion=0 (the reflector's initial list without WatchList, and
	// its fallback) served from the watch cache of an apiserver that lags
	// etcd, as in an HA control plane after a restart or partition.
	Rewind
	// Freeze lets the matching write through and delivers its answer, and
	// from then on holds every later request of the client unanswered (never
	// forwarded) until the client goes away. No real cluster does this: it is
	// how a harness stops a controller exactly between two writes, before
	// killing it (an OOM kill, an eviction, a rollout). Requests already in
	// flight when it fires are answered. Neither Freeze nor Cut matches a
	// dry-run write (dryRun=All), which changes nothing.
	Freeze
	// Cut forwards the matching write, records the apiserver's answer, and
	// withholds it from the client, then freezes the client as Freeze does:
	// the write is applied, and the client never learns it was. Real cause:
	// a controller killed, or its connection lost, after sending a write and
	// before reading the response.
	Cut
	// Lose forwards the matching write, records the apiserver's answer, and
	// answers the client instead with the 504 Timeout a kube-apiserver's
	// timeout filter sends ("request did not complete within the allotted
	// timeout", no Retry-After, so client-go does not retry it): the write
	// is applied, the client is told it may not have been, and it keeps
	// running. Real cause: the apiserver's request timeout (60 s by
	// default) while etcd or an admission webhook is slow, the write
	// committing after the client was answered; a load balancer's 504. On
	// every Kubernetes version.
	Lose
	// Reset forwards the matching write, records the apiserver's answer, and
	// resets the client's stream instead of answering (an HTTP/2
	// RST_STREAM; the client sees a transport error, which client-go never
	// retries for a write): applied, and the client keeps running not
	// knowing it. Real cause: a connection reset between the client and the
	// apiserver after the request was sent (a load balancer or an apiserver
	// shutting down, a network partition, a proxy's idle timeout).
	Reset
	// Slow forwards the matching write and holds its answer Rule.Delay
	// after the apiserver gave it: meanwhile the write's own watch event,
	// and other clients' writes, may reach the client first. Real cause: a
	// slow path back from a write already committed (a client CPU-starved
	// or its connection congested, the answer converted by a slow CRD
	// conversion webhook, a busy apiserver encoding it).
	Slow
	// Reject answers the matching write itself, before it reaches the
	// apiserver, as a kube-apiserver refuses one: Rule.Code 429 (the zero
	// value) is API Priority and Fairness's "Too many requests" with
	// Retry-After: 1, which client-go retries by itself after a second;
	// 500 is etcd's "etcdserver: request timed out" for a proposal that
	// never committed; 503 is a Status ServiceUnavailable, as from an
	// apiserver behind a load balancer while it restarts. Nothing is
	// applied; the client keeps running.
	Reject
)

func (a Action) String() string {
	switch a {
	case Delay:
		return "delay"
	case Hold:
		return "hold"
	case Drop:
		return "drop"
	case Break:
		return "break"
	case Expire:
		return "expire"
	case Rewind:
		return "rewind"
	case Freeze:
		return "freeze"
	case Cut:
		return "cut"
	case Lose:
		return "lose"
	case Reset:
		return "reset"
	case Slow:
		return "slow"
	case Reject:
		return "reject"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// onEvents reports whether a acts on watch events (else on requests).
func (a Action) onEvents() bool { return a <= Break }

// onWrites reports whether a acts on write requests.
func (a Action) onWrites() bool { return a >= Freeze && a <= Reject }

// freezes reports whether a stops its client once it fires.
func (a Action) freezes() bool { return a == Freeze || a == Cut }

// IsAnswer reports whether a is a fault on a write's answer (Lose, Reset,
// Slow, Reject): the client keeps running.
func (a Action) IsAnswer() bool { return a >= Lose && a <= Reject }

// RejectCodes are the status codes a Reject rule answers with.
var RejectCodes = []int{429, 500, 503}

// Rule selects watch events or requests and says what to do with them. Every
// empty selector matches anything. An event is matched against the rules in
// force when it arrives at the proxy, a request when it arrives; the first
// rule of the right kind that matches decides, and later rule changes do not
// revisit the decision.
type Rule struct {
	// Client is the name given to Proxy.Client. Empty: every client.
	Client string
	// Resource is the plural resource of the request ("configmaps",
	// "gitrepositories"); for events, of their watch request. Empty: every
	// resource.
	Resource string
	// Namespace and Name are the event object's, or the request's. Empty:
	// any. For Expire and Rewind, a request across all namespaces (or for
	// the whole collection) matches too: what it returns includes them.
	Namespace, Name string
	// Types lists event types (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR).
	// Empty: every type. Only for actions on events.
	Types []string
	// Verbs lists the write verbs (create, update, patch, delete,
	// deletecollection) the actions on writes match. Empty: every write. A dry-run
	// write (dryRun=All) is never matched, nor counted by After: the
	// apiserver persists nothing of it.
	Verbs []string
	// Subresource is the write's subresource ("status") for the actions on
	// writes;
	// "-" matches writes to the main resource only. Empty: any.
	Subresource string
	// From and To bound the window, relative to the mark given to SetRules, in
	// which an event must arrive (a request must start) to match:
	// mark+From <= arrival < mark+To. To zero means the window never ends
	// (not allowed for Hold).
	From, To time.Duration
	// Action is what happens to a match; Delay is the zero value.
	Action Action
	// Delay is how long Delay holds each event, and Slow a write's answer.
	// Zero: not at all.
	Delay time.Duration
	// Code is, for Reject, the status answered: 429 (zero), 500 or 503.
	Code int
	// Ago is, for Rewind, how far before each request its list is served.
	// Zero: as of the window's start.
	Ago time.Duration
	// ResourceVersion is, for Rewind, the exact resourceVersion lists are
	// served at ("the apiserver has seen everything before it, nothing
	// after"). Empty: from Ago.
	ResourceVersion string
	// After lets the first After matches (counted over every stream, from
	// SetRules on) pass as if the rule did not match: it places a stall right
	// after a given write of the controller's own, whatever the timing, or a
	// Freeze right after the client's After+1st write. Zero: the rule applies
	// from its first match.
	After int
}

func (r Rule) String() string {
	s := r.Action.String()
	switch r.Action {
	case Delay, Slow:
		s += " " + r.Delay.String()
	case Reject:
		s += fmt.Sprintf(" %d", r.code())
	case Rewind:
		if r.ResourceVersion != "" {
			s += " to resourceVersion " + r.ResourceVersion
		} else if r.Ago > 0 {
			s += " " + r.Ago.String()
		} else {
			s += " to the window's start"
		}
	}
	s += " " + or(r.Resource, "*")
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	if r.Namespace != "" || r.Name != "" {
		s += " " + or(r.Namespace, "*") + "/" + or(r.Name, "*")
	}
	if len(r.Types) > 0 {
		s += fmt.Sprintf(" %v", r.Types)
	}
	if len(r.Verbs) > 0 {
		s += fmt.Sprintf(" %v", r.Verbs)
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

// code is the status a Reject rule answers with.
func (r Rule) code() int {
	if r.Action == Reject && r.Code == 0 {
		return 429
	}
	return r.Code
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// Validate reports whether the rule is well formed: a known action, no
// negative durations, a non-empty window, an end for Hold, and selectors that
// fit the action.
func (r Rule) Validate() error {
	switch {
	case r.Action < Delay || r.Action > Reject:
		return fmt.Errorf("unknown action %d", int(r.Action))
	case r.From < 0 || r.To < 0 || r.Delay < 0 || r.After < 0 || r.Ago < 0:
		return errors.New("negative duration or count")
	case r.To != 0 && r.To <= r.From:
		return fmt.Errorf("window t+%v–%v is empty", r.From, r.To)
	case r.Action == Hold && r.To == 0:
		return errors.New("hold needs a window end (To)")
	case !r.Action.onEvents() && len(r.Types) > 0:
		return fmt.Errorf("%v acts on requests: event Types do not apply", r.Action)
	case !r.Action.onWrites() && (len(r.Verbs) > 0 || r.Subresource != ""):
		return fmt.Errorf("%v: Verbs and Subresource apply to freeze and cut only", r.Action)
	case r.Action != Rewind && (r.Ago != 0 || r.ResourceVersion != ""):
		return fmt.Errorf("%v: Ago and ResourceVersion apply to rewind only", r.Action)
	case r.Action != Reject && r.Code != 0:
		return fmt.Errorf("%v: Code applies to reject only", r.Action)
	case r.Action == Reject && r.Code != 0 && !slices.Contains(RejectCodes, r.Code):
		return fmt.Errorf("reject: code %d: want one of %v", r.Code, RejectCodes)
	}
	return nil
}

// ruleSet is an immutable set of rules with their mark; the proxy swaps it
// atomically. The rules' own state (how often each matched, what it broke or
// froze) lives in ruleState, which AddRules carries over.
type ruleSet struct {
	mark  time.Time
	rules []*ruleState
}

type ruleState struct {
	Rule
	matched atomic.Int64 // for After
	fired   sync.Map     // Break: "client|resource"; actions on writes: client. At most once each.
	// floors is, for Expire, per "client|resource", the newest
	// resourceVersion the proxy had seen when the rule first matched a
	// watch of it: the oldest its apiserver's watch cache still holds.
	floors sync.Map
}

func newRuleSet(mark time.Time, rules []Rule) *ruleSet {
	rs := &ruleSet{mark: mark}
	for _, r := range rules {
		rs.rules = append(rs.rules, &ruleState{Rule: r})
	}
	return rs
}

// event is what event rules match on.
type event struct {
	client, resource, typ, namespace, name string
}

// verdict is a rule's decision about an event or a request.
type verdict struct {
	rule    int           // index of the deciding rule; -1 for none
	action  Action        // meaningful when rule >= 0
	release time.Time     // events: when it may be released (ignoring order)
	asOf    time.Time     // Rewind: the moment whose state a list is served at
	rv      string        // Rewind: the exact resourceVersion, when the rule names one
	hold    time.Duration // Slow: how long the answer is held
	code    int           // Reject: the status answered
}

func (rs *ruleSet) inWindow(r *ruleState, t time.Time, client, resource, namespace, name string) bool {
	since := t.Sub(rs.mark)
	return since >= r.From && (r.To == 0 || since < r.To) &&
		(r.Client == "" || r.Client == client) &&
		(r.Resource == "" || r.Resource == resource) &&
		(r.Namespace == "" || r.Namespace == namespace) &&
		(r.Name == "" || r.Name == name)
}

// after counts a match for r and reports whether it is past r.After.
func (r *ruleState) after() bool {
	return r.After == 0 || r.matched.Add(1) > int64(r.After)
}

// decide returns the verdict of the first event rule matching e arriving at
// t. No match: rule -1 and release t.
func (rs *ruleSet) decide(e event, t time.Time) verdict {
	if rs == nil {
		return verdict{rule: -1, release: t}
	}
	for i, r := range rs.rules {
		if !r.Action.onEvents() || !rs.inWindow(r, t, e.client, e.resource, e.namespace, e.name) ||
			(len(r.Types) > 0 && !slices.Contains(r.Types, e.typ)) || !r.after() {
			continue
		}
		v := verdict{rule: i, action: r.Action, release: t}
		switch r.Action {
		case Hold:
			v.release = rs.mark.Add(r.To)
		case Delay:
			v.release = t.Add(r.Delay)
		case Break:
			if _, done := r.fired.LoadOrStore(e.client+"|"+e.resource, true); done {
				continue // this watch was broken once already: the replay passes
			}
		}
		return v
	}
	return verdict{rule: -1, release: t}
}

// call is what request rules match on.
type call struct {
	client, verb, resource, subresource, namespace, name string

	watchList bool   // a watch with sendInitialEvents=true
	resumes   bool   // a watch from a resourceVersion (not "" or "0")
	rv        uint64 // the resourceVersion it resumes from, when numeric
	continues bool   // a list page after the first
	dryRun    bool   // a write with dryRun=All: nothing is persisted
}

// decideRequest returns the verdict of the first request rule matching q
// starting at t, latest being the newest resourceVersion the proxy has
// seen (0: none). No match: rule -1.
func (rs *ruleSet) decideRequest(q call, t time.Time, latest uint64) verdict {
	if rs == nil {
		return verdict{rule: -1}
	}
	for i, r := range rs.rules {
		ns, name := q.namespace, q.name
		if r.Action == Expire || r.Action == Rewind {
			// A list or watch across all namespaces (or of the whole
			// collection) includes the rule's namespace (and object): a 410,
			// or a list from a lagging apiserver, covers it too. Cluster-wide
			// informers (kube-controller-manager's) make such requests.
			if ns == "" {
				ns = r.Namespace
			}
			if name == "" {
				name = r.Name
			}
		}
		if r.Action.onEvents() || !rs.inWindow(r, t, q.client, q.resource, ns, name) {
			continue
		}
		switch r.Action {
		case Expire:
			if q.verb != "watch" || q.watchList || !q.resumes {
				continue
			}
			// An apiserver answers 410 to a watch from a resourceVersion
			// older than its watch cache holds: the first such watch in
			// the window sets where that cache begins (everything the
			// proxy had seen by then, as after a compaction), and a watch
			// from there or later (after the client relisted) is served.
			// Without this floor a relist's fresh resourceVersion met 410
			// again for the whole window, an outage no apiserver makes.
			f, _ := r.floors.LoadOrStore(q.client+"|"+q.resource, latest)
			if q.rv != 0 && q.rv >= f.(uint64) {
				continue
			}
		case Rewind:
			if !(q.verb == "list" && !q.continues) && !(q.verb == "watch" && q.watchList) {
				continue
			}
		case Freeze, Cut, Lose, Reset, Slow, Reject:
			if !isWrite(q.verb) || q.dryRun || (len(r.Verbs) > 0 && !slices.Contains(r.Verbs, q.verb)) ||
				(r.Subresource == "-" && q.subresource != "") ||
				(r.Subresource != "" && r.Subresource != "-" && r.Subresource != q.subresource) {
				continue
			}
			if _, done := r.fired.Load(q.client); done {
				continue
			}
		}
		if !r.after() {
			continue
		}
		if r.Action.onWrites() {
			if _, done := r.fired.LoadOrStore(q.client, true); done {
				continue
			}
		}
		v := verdict{rule: i, action: r.Action, asOf: rs.mark.Add(r.From), rv: r.ResourceVersion, hold: r.Delay, code: r.code()}
		if r.Ago > 0 {
			v.asOf = t.Add(-r.Ago)
		}
		return v
	}
	return verdict{rule: -1}
}

func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}
