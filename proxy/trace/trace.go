package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Request is one request a client sent through the proxy.
type Request struct {
	Client      string `json:"client"`
	Verb        string `json:"verb"` // get, list, watch, create, update, patch, delete, ... (apiserver RequestInfo verbs)
	APIGroup    string `json:"group,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	// Name is the object's name from the request's path; for a create,
	// which has none, the name of the object the apiserver created (a
	// generateName create's too), read from its answer.
	Name  string    `json:"name,omitempty"`
	Path  string    `json:"path,omitempty"` // set for non-resource requests only
	Start time.Time `json:"start"`
	// DryRun says the request asked for a dry run (dryRun=All in the query,
	// or, for a delete, in its DeleteOptions body): a write the apiserver
	// validates, admits and answers as usual but never persists. Audits and
	// oracles must not count it as a write.
	DryRun bool `json:"dryRun,omitempty"`
	// Latency is until the whole response arrived from the apiserver for an
	// API object (the proxy holds it whole and records it before forwarding
	// it); for a watch (the stream itself is recorded as Events), an upgrade
	// and any other streamed response (a log, proxied pod traffic), until its
	// response headers arrived.
	Latency time.Duration `json:"latency"`
	// Held is how long the proxy held the answer after it arrived (a Slow
	// rule): the client got it at Start+Latency+Held (Answered).
	Held time.Duration `json:"held,omitempty"`
	Code int           `json:"code"`
	// SentRV is the resourceVersion the request carried: the resourceVersion
	// query parameter of a read, or metadata.resourceVersion of a write's body
	// (a precondition). Empty on a write means it had no optimistic lock.
	SentRV string `json:"sentRV,omitempty"`
	// Selected says a read (a list, a watch) carried a label or field
	// selector: it shows only the objects that match.
	Selected bool `json:"selected,omitempty"`
	// ReturnedRV is metadata.resourceVersion of the response object or list.
	ReturnedRV string `json:"returnedRV,omitempty"`
	// Fields holds the values of Proxy.Fields in the response object (absent
	// paths are left out), JSON-encoded, credentials redacted (package
	// proxy/redact).
	Fields map[string]string `json:"fields,omitempty"`
	// ContentType is the response's media type, for watches: it tells JSON
	// from protobuf streams.
	ContentType string `json:"contentType,omitempty"`
	// FaultKind is what the proxy did to this request beyond forwarding it
	// (a rule's Expire, Rewind, Freeze or Cut, or holding a frozen client's
	// request); empty when it forwarded it untouched. Code that acts on
	// faults reads this, never Fault.
	FaultKind FaultKind `json:"faultKind,omitempty"`
	// Fault says the same in words, for people: what was done and why.
	Fault string `json:"fault,omitempty"`
	// RelayError is why the proxy could not relay the request or its
	// answer (the upstream connection failed, the answer could not be
	// read) while its client was still waiting: the proxy answered 502
	// Bad Gateway itself, and a write may have been applied all the same.
	// No rule asked for it: an execution with one is not judged.
	RelayError string `json:"relayError,omitempty"`
	// Abandoned says the client gave up on the request (its context ended:
	// a controller cancelling its own call, or a client killed by a
	// restart) before the answer came: Code is what the proxy wrote to no
	// one, and a write may have been applied all the same (its watch event
	// tells).
	Abandoned bool `json:"abandoned,omitempty"`
	// Rule is the index of the rule that decided Fault; -1 or absent for
	// none.
	Rule *int `json:"rule,omitempty"`
	// Caller is the call site the client reported for a write: the first
	// stack frame outside client-go, controller-runtime and apimachinery,
	// as "scenarios/contention/controller.go:70 (*Reconciler).Reconcile"
	// (paths in the main module relative to it). Set for in-process clients
	// built from Client.Config; empty when unknown.
	Caller string `json:"caller,omitempty"`
	// Write describes a write's body and options; nil for reads.
	Write *Write `json:"write,omitempty"`
}

// IsWrite reports whether r writes an object: a create, update, patch,
// delete or deletecollection, but not a connection to a pod (a create or get
// of exec, attach, portforward or proxy), which writes nothing. A dry run is
// a write that the apiserver does not persist (see DryRun).
func (r *Request) IsWrite() bool {
	switch r.Subresource {
	case "exec", "attach", "portforward", "proxy":
		return false
	}
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// FaultKind names what the proxy did to a request beyond forwarding it.
type FaultKind string

const (
	// FaultExpire: the proxy answered a watch itself with the 410 Expired
	// a kube-apiserver sends for a resourceVersion its watch cache no
	// longer holds; the client's watch is down until it relists.
	FaultExpire FaultKind = "expire"
	// FaultRewind: a LIST served from the past (resourceVersionMatch=Exact),
	// or a WatchList refused as by an apiserver without WatchList so that
	// the client lists instead.
	FaultRewind FaultKind = "rewind"
	// FaultFreeze: a write answered, after which every later request of
	// the client is held unanswered.
	FaultFreeze FaultKind = "freeze"
	// FaultCut: a write applied by the apiserver whose answer was withheld
	// from the client, which is then frozen as by FaultFreeze.
	FaultCut FaultKind = "cut"
	// FaultFrozen: a request of a frozen client, held unanswered and never
	// forwarded.
	FaultFrozen FaultKind = "frozen"
	// FaultLose: a write applied by the apiserver (Code is its answer)
	// whose client was answered 504 Timeout instead; it keeps running.
	FaultLose FaultKind = "lose"
	// FaultReset: a write applied by the apiserver (Code is its answer)
	// whose client's stream was reset instead; it keeps running.
	FaultReset FaultKind = "reset"
	// FaultSlow: a write whose answer reached its client Held after the
	// apiserver gave it.
	FaultSlow FaultKind = "slow"
	// FaultReject: a write the proxy refused itself, never forwarded: Code
	// is what it answered (429, 500, 503).
	FaultReject FaultKind = "reject"
)

// Unanswered reports whether the client never learned the apiserver's
// answer to r (Code): a Cut or Lose or Reset answer, an abandoned request.
func (r *Request) Unanswered() bool {
	switch r.FaultKind {
	case FaultCut, FaultLose, FaultReset:
		return true
	}
	return r.Abandoned
}

// Answered is when the client got the answer: the apiserver's, plus what a
// Slow rule held it.
func (r *Request) Answered() time.Time { return r.Start.Add(r.Latency + r.Held) }

// faultKindOf recovers the kind from the words of a trace written before
// FaultKind existed: each began with the kind and a colon.
func faultKindOf(fault string) FaultKind {
	w, _, ok := strings.Cut(fault, ":")
	if !ok {
		return ""
	}
	switch k := FaultKind(w); k {
	case FaultExpire, FaultRewind, FaultFreeze, FaultCut, FaultFrozen:
		return k
	}
	return ""
}

// Write is what a write request asked for, read from its query and body.
type Write struct {
	// Patch is a patch's type: "merge", "strategic-merge", "json" or
	// "apply" (server-side apply); empty for other verbs.
	Patch string `json:"patch,omitempty"`
	// Force is server-side apply's force=true.
	Force bool `json:"force,omitempty"`
	// Manager is the fieldManager query parameter.
	Manager string `json:"fieldManager,omitempty"`
	// UID is a precondition on the object's uid (a delete's
	// preconditions.uid, or metadata.uid in a patch or update body).
	UID string `json:"uid,omitempty"`
	// Set maps each field the body sets to its JSON value, by dotted path
	// ("status.plan.id"). Objects are flattened to their leaves; a list is
	// one value (a merge patch replaces it whole); a JSON patch op's path
	// is converted; null means removed. A write to the status subresource
	// keeps status only. Metadata the apiserver owns (resourceVersion,
	// uid, generation, managedFields, creationTimestamp) and
	// apiVersion/kind are left out. Credentials are redacted (package
	// proxy/redact): equal values still compare equal within the process
	// that recorded them. At most MaxSet paths (Truncated says some were
	// left out); a value over MaxValue bytes is cut, with a digest of the
	// whole, so that equal values still compare equal.
	Set       map[string]string `json:"set,omitempty"`
	Truncated bool              `json:"truncated,omitempty"`
}

// Bounds of Write.Set.
const (
	MaxSet   = 64
	MaxValue = 256
)

// Fate is what became of a watch event.
type Fate string

const (
	Pending  Fate = "pending"  // held or delayed at the proxy, not yet released
	Released Fate = "released" // handed to the client's connection
	Dropped  Fate = "dropped"  // never forwarded (a Drop rule)
	Broken   Fate = "broken"   // its stream was ended just before it (a Break rule); a re-watch replays it
	Aborted  Fate = "aborted"  // the stream ended while it was pending
)

// Event is one watch event the apiserver sent on a client's stream.
type Event struct {
	Client          string    `json:"client"`
	Stream          uint64    `json:"stream"`          // identifies the watch request within the proxy's life
	Group           string    `json:"group,omitempty"` // API group of the watch request, "" for the core group
	Resource        string    `json:"resource"`        // of the watch request, e.g. "configmaps"
	Type            string    `json:"type"`            // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR; "" for bytes passed through unparsed
	Kind            string    `json:"kind,omitempty"`
	Namespace       string    `json:"namespace,omitempty"`
	Name            string    `json:"name,omitempty"`
	ResourceVersion string    `json:"rv,omitempty"`
	InitialEnd      bool      `json:"initialEventsEnd,omitempty"`
	Arrived         time.Time `json:"arrived"`
	Fate            Fate      `json:"fate"`
	Released        time.Time `json:"released,omitzero"`
	Rule            int       `json:"rule"` // index of the rule that decided its fate, -1 for none
}

// Rules records a change of the rules in force (proxy.Proxy.SetRules or
// AddRules), so that a trace says which window each rule had.
type Rules struct {
	At time.Time `json:"at"` // when they were put in force
	// Mark is the zero of their windows.
	Mark time.Time `json:"mark"`
	// Added is true when they were appended to the rules in force
	// (AddRules); false when they replaced them all (SetRules).
	Added bool   `json:"added,omitempty"`
	Rules []Rule `json:"rules,omitempty"`
}

// Rule is one rule as recorded in Rules.
type Rule struct {
	Index  int    `json:"index"` // as in Event.Rule and Request.Rule
	Client string `json:"client,omitempty"`
	Action string `json:"action"`
	Text   string `json:"text"` // the rule in words (proxy.Rule.String)
	// From and To are its window after Mark; To zero: it never ends.
	From time.Duration `json:"from"`
	To   time.Duration `json:"to,omitempty"`
}

// Entry is one line of the JSONL form: exactly one of Request, Event and
// Rules is set.
type Entry struct {
	Request *Request `json:"request,omitempty"`
	Event   *Event   `json:"event,omitempty"`
	Rules   *Rules   `json:"rules,omitempty"`
	Restart *Restart `json:"restart,omitempty"`
}

// Trace is a snapshot of a Log.
type Trace struct {
	Requests []Request
	Events   []Event
	Rules    []Rules
	// Restarts are the clients' restarts: a new instance of a client has
	// seen nothing its predecessor was shown (Views).
	Restarts []Restart
}

// Restart says a client's instance was stopped at At; what runs as that
// client from then on is a new instance.
type Restart struct {
	Client string    `json:"client"`
	At     time.Time `json:"at"`
}

// Cursor marks a point in a Log; Since returns what was recorded after it.
type Cursor struct {
	gen                                         uint64
	requests, events, releases, rules, restarts int
}

// Log records requests and events. The zero value is an empty log, which
// keeps everything in memory until Reset; Spill bounds it.
type Log struct {
	mu       sync.Mutex
	gen      uint64
	requests []Request
	rules    []Rules
	restarts []Restart // kept in memory even when bounded: they are few
	events   chunks    // events are many and updated in place: never copied to grow
	releases []int     // indexes of events, in the order they were released
	spill    *spill    // non-nil once bounded: the fields above stay empty
}

// chunkSize is how many events one chunk holds.
const chunkSize = 1024

// chunks is an append-only sequence stored in fixed-size chunks, so that
// appending never copies what is already there (a watch burst appends
// thousands of events while the proxy streams them).
type chunks struct {
	c []*[chunkSize]Event
	n int
}

func (c *chunks) append(e Event) int {
	if c.n == len(c.c)*chunkSize {
		c.c = append(c.c, new([chunkSize]Event))
	}
	c.c[c.n/chunkSize][c.n%chunkSize] = e
	c.n++
	return c.n - 1
}

func (c *chunks) at(i int) *Event { return &c.c[i/chunkSize][i%chunkSize] }

// since copies the events from index i on.
func (c *chunks) since(i int) []Event {
	out := make([]Event, 0, max(0, c.n-i))
	for ; i < c.n; i++ {
		out = append(out, *c.at(i))
	}
	return out
}

// EventID refers to a recorded event so that its fate can be updated.
type EventID struct {
	gen uint64
	idx int
}

// AddRequest records r.
func (l *Log) AddRequest(r Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.spill; s != nil {
		s.requests++
		s.add(Entry{Request: &r})
		return
	}
	l.requests = append(l.requests, r)
}

// AddRules records a change of the rules in force.
func (l *Log) AddRules(r Rules) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.spill; s != nil {
		s.rules++
		s.add(Entry{Rules: &r})
		return
	}
	l.rules = append(l.rules, r)
}

// AddEvent records e and returns a handle for SetFate.
func (l *Log) AddEvent(e Event) EventID {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.spill; s != nil {
		i := s.events
		s.addEvent(i, e)
		return EventID{gen: l.gen, idx: i}
	}
	i := l.events.append(e)
	if e.Fate == Released {
		l.releases = append(l.releases, i)
	}
	return EventID{gen: l.gen, idx: i}
}

// SetFate records what became of an event. Updates to events recorded before
// the last Reset are ignored.
func (l *Log) SetFate(id EventID, f Fate, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.spill; s != nil && id.gen == l.gen {
		s.setFate(id.idx, f, at)
		return
	}
	if id.gen != l.gen || id.idx >= l.events.n {
		return
	}
	ev := l.events.at(id.idx)
	if f == Released && ev.Fate != Released {
		l.releases = append(l.releases, id.idx)
	}
	ev.Fate = f
	if f == Released {
		ev.Released = at
	}
}

// Reset forgets everything recorded so far, so that a long campaign's memory
// stays bounded. Cursors taken before it see an empty log. A bounded Log
// (Spill) writes the events it still holds first, as they are.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spill != nil {
		l.spill.reset()
	}
	l.gen++
	l.requests, l.events, l.releases, l.rules, l.restarts = nil, chunks{}, nil, nil, nil
}

// AddRestart records that a client's instance was stopped (Restart).
func (l *Log) AddRestart(r Restart) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.restarts = append(l.restarts, r)
}

// Cursor returns the current end of the log.
func (l *Log) Cursor() Cursor {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end()
}

func (l *Log) end() Cursor {
	if s := l.spill; s != nil {
		c := s.end(l.gen)
		c.restarts = len(l.restarts)
		return c
	}
	return Cursor{gen: l.gen, requests: len(l.requests), events: l.events.n, releases: len(l.releases), rules: len(l.rules), restarts: len(l.restarts)}
}

// Since returns a copy of what was recorded after c (everything, for the zero
// Cursor or one from before a Reset). A bounded Log (Spill) returns only the
// events after c still pending; Log.WriteJSONL writes all of it.
func (l *Log) Since(c Cursor) Trace {
	t, _ := l.Next(c)
	return t
}

// Next returns what was recorded after c and the cursor just past it, read
// together, so that a caller polling the log misses nothing between calls.
// A bounded Log (Spill) returns only the events after c still pending.
func (l *Log) Next(c Cursor) (Trace, Cursor) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next(c)
}

func (l *Log) next(c Cursor) (Trace, Cursor) {
	if c.gen != l.gen {
		c = Cursor{}
	}
	restarts := slices.Clone(l.restarts[min(c.restarts, len(l.restarts)):])
	if s := l.spill; s != nil {
		return Trace{Events: s.pendingSince(c.events), Restarts: restarts}, l.end()
	}
	return Trace{
		Requests: slices.Clone(l.requests[min(c.requests, len(l.requests)):]),
		Events:   l.events.since(c.events),
		Rules:    slices.Clone(l.rules[min(c.rules, len(l.rules)):]),
		Restarts: restarts,
	}, l.end()
}

// NextReleased returns the events released to clients after c, in the order
// they were released (an event held at the proxy is recorded when it arrives
// and released later: Next returns it once, as it was when recorded), and
// the cursor just past them. It is how a poller waits for what a client has
// been sent. A bounded Log (Spill) has written released events out: it
// returns none.
func (l *Log) NextReleased(c Cursor) ([]Event, Cursor) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.gen != l.gen {
		c = Cursor{}
	}
	if l.spill != nil {
		return nil, l.end()
	}
	var out []Event
	for _, i := range l.releases[min(c.releases, len(l.releases)):] {
		out = append(out, *l.events.at(i))
	}
	return out, l.end()
}

// Entries merges requests (by Start), events (by Arrived) and rule changes
// (by At) in time order.
func (t Trace) Entries() []Entry {
	out := make([]Entry, 0, len(t.Requests)+len(t.Events)+len(t.Rules)+len(t.Restarts))
	for i := range t.Requests {
		out = append(out, Entry{Request: &t.Requests[i]})
	}
	for i := range t.Events {
		out = append(out, Entry{Event: &t.Events[i]})
	}
	for i := range t.Rules {
		out = append(out, Entry{Rules: &t.Rules[i]})
	}
	for i := range t.Restarts {
		out = append(out, Entry{Restart: &t.Restarts[i]})
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return a.Time().Compare(b.Time()) })
	return out
}

// Time is when the entry began: a request's Start, an event's arrival, a rule
// change's or a restart's At.
func (e Entry) Time() time.Time {
	switch {
	case e.Request != nil:
		return e.Request.Start
	case e.Rules != nil:
		return e.Rules.At
	case e.Restart != nil:
		return e.Restart.At
	}
	return e.Event.Arrived
}

// WriteJSONL writes t as one JSON Entry per line, in time order.
func (t Trace) WriteJSONL(w io.Writer) error {
	enc := json.NewEncoder(w)
	var line []byte
	for _, e := range t.Entries() {
		if e.Event != nil {
			var ok bool
			if line, ok = appendEventEntry(line[:0], e.Event); ok {
				line = append(line, '\n')
				if _, err := w.Write(line); err != nil {
					return fmt.Errorf("unable to write trace entry: %w", err)
				}
				continue
			}
		}
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("unable to write trace entry: %w", err)
		}
	}
	return nil
}

// ReadJSONL reads what WriteJSONL wrote.
func ReadJSONL(r io.Reader) (Trace, error) {
	var t Trace
	dec := json.NewDecoder(r)
	for {
		var e Entry
		err := dec.Decode(&e)
		if err == io.EOF {
			t.backfillGroups()
			return t, nil
		}
		if err != nil {
			return t, fmt.Errorf("unable to read trace entry %d: %w", len(t.Requests)+len(t.Events)+1, err)
		}
		switch {
		case e.Request != nil:
			if e.Request.FaultKind == "" {
				e.Request.FaultKind = faultKindOf(e.Request.Fault)
			}
			t.Requests = append(t.Requests, *e.Request)
		case e.Event != nil:
			t.Events = append(t.Events, *e.Event)
		case e.Rules != nil:
			t.Rules = append(t.Rules, *e.Rules)
		case e.Restart != nil:
			t.Restarts = append(t.Restarts, *e.Restart)
		}
	}
}

// backfillGroups gives the events of a trace written before Event.Group
// existed the group of their watch: an event without a group whose client
// watched its resource in exactly one group, not the core group, is of
// that group.
func (t *Trace) backfillGroups() {
	type key struct{ client, resource string }
	groups := map[key]map[string]bool{}
	for _, r := range t.Requests {
		if r.Verb == "watch" {
			k := key{r.Client, r.Resource}
			if groups[k] == nil {
				groups[k] = map[string]bool{}
			}
			groups[k][r.APIGroup] = true
		}
	}
	for i := range t.Events {
		ev := &t.Events[i]
		if g := groups[key{ev.Client, ev.Resource}]; ev.Group == "" && len(g) == 1 {
			for group := range g {
				ev.Group = group
			}
		}
	}
}
