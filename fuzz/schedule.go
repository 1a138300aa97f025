package fuzz

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
)

const (
	// MaxSteps is the most lag windows a schedule has; input beyond them is
	// ignored.
	MaxSteps = 6
	// MinLength is the shortest lag window.
	MinLength = 50 * time.Millisecond
	// stepBytes is the width of one step record in LagOnly and LagAndLoss.
	stepBytes = 5
	// realisticStepBytes is the width of one step record in Realistic.
	realisticStepBytes = 6
	// maxAfter bounds Step.After in Realistic records.
	maxAfter = 16
)

// Fault allowances of the Realistic space: how long after its window a fault
// step may still be playing out, so that budgets hold by construction.
const (
	// RestartBudget bounds one controller restart: stopping it, starting it
	// again and its caches syncing. An overrun is a harness error.
	RestartBudget = 1000 * time.Millisecond
	// RelistBackoff is the longest client-go v0.37's reflector waits before
	// it relists after a watch ended in error, the first time: 0.8 s with a
	// jitter of 1.0 (reflector.go defaultBackoffInit, defaultBackoffJitter).
	RelistBackoff = 1600 * time.Millisecond
	// MaxSlowAnswer is the longest a Composed schedule holds a write's
	// answer (proxy.Slow): as long as a relist's backoff, so that a slow
	// answer fits the allowance any fault has (Bounds.faultAllowance).
	MaxSlowAnswer = RelistBackoff
)

// Bounds limit a scenario's lag windows. Together with the engine's phase
// budgets they make every execution finish within Budget by construction:
// NewEnv refuses bounds that do not fit. Durations decode as fractions of
// these bounds, so changing a scenario's bounds rescales its corpus.
type Bounds struct {
	// MaxStart is the latest a lag window starts, after the mark.
	MaxStart time.Duration
	// MaxLength is the longest window.
	MaxLength time.Duration
	// MaxLagEnd is the latest any window ends: longer windows are cut there.
	MaxLagEnd time.Duration
	// MaxDelay bounds a Delay step's per-event delay, so every event has been
	// released by MaxLagEnd+MaxDelay.
	MaxDelay time.Duration
	// MaxFaultEnd is, in the Realistic space, the latest a fault's window
	// (break, relist, restart) ends: longer ones are cut there, so that the
	// fault's aftermath (a relist backoff, a restart) fits the budget while
	// lag windows may last until MaxLagEnd. Zero: MaxLagEnd.
	MaxFaultEnd time.Duration
}

// faultEnd is MaxFaultEnd or its default.
func (b Bounds) faultEnd() time.Duration {
	if b.MaxFaultEnd == 0 {
		return b.MaxLagEnd
	}
	return b.MaxFaultEnd
}

// DefaultBounds are Scenario.Bounds' zero value.
var DefaultBounds = Bounds{MaxStart: 1500 * time.Millisecond, MaxLength: 2000 * time.Millisecond, MaxLagEnd: 2500 * time.Millisecond, MaxDelay: 1000 * time.Millisecond}

func (b Bounds) orDefault() Bounds {
	if b == (Bounds{}) {
		return DefaultBounds
	}
	return b
}

// fits reports whether an execution under these bounds, with the phase
// budgets, finishes within Budget in the given space.
func (b Bounds) fits(space Space) error { return b.fitsWithin(space, Budget) }

// fitsWithin reports whether an execution under these bounds, with the
// phase budgets, finishes within budget (a long scenario's, Scenario.Long)
// in the given space.
func (b Bounds) fitsWithin(space Space, budget time.Duration) error {
	lagBudget := func() time.Duration { return lagBudgetOf(budget) }
	if b.MaxStart <= 0 || b.MaxLength < MinLength || b.MaxLagEnd <= b.MaxStart || b.MaxDelay < 0 ||
		b.faultEnd() <= b.MaxStart || b.faultEnd() > b.MaxLagEnd {
		return fmt.Errorf("bounds %+v: want 0 < MaxStart < MaxFaultEnd <= MaxLagEnd, MaxLength >= %v, MaxDelay >= 0", b, MinLength)
	}
	lagOver := max(b.MaxLagEnd+b.MaxDelay, b.faultEnd()+b.faultAllowance(space))
	if lagOver <= lagBudget() {
		return nil
	}
	// Say which bound to lower, and to what.
	var fix []string
	if over := b.MaxLagEnd + b.MaxDelay - lagBudget(); over > 0 {
		fix = append(fix, fmt.Sprintf("MaxLagEnd+MaxDelay (%v+%v) must be at most %v: lower MaxLagEnd or MaxDelay by %v", b.MaxLagEnd, b.MaxDelay, lagBudget(), over))
	}
	if allowance := b.faultAllowance(space); b.faultEnd()+allowance > lagBudget() {
		most := lagBudget() - allowance
		fix = append(fix, fmt.Sprintf("a fault's window must end by %v, leaving %v for what it sets off (client-go's relist backoff %v or a restart %v, then a lag of up to MaxDelay %v): set MaxFaultEnd to %v or less (it is %v)",
			lagBudget(), allowance, RelistBackoff, RestartBudget, b.MaxDelay, most, b.faultEnd()))
		if most <= b.MaxStart {
			fix = append(fix, fmt.Sprintf("MaxFaultEnd must also exceed MaxStart (%v): lower MaxStart, or MaxDelay to shorten the allowance", b.MaxStart))
		}
	}
	return fmt.Errorf("bounds %+v: an execution could take %v in space %v, over the %v budget of one execution (%s)",
		b, StartBudget+DriveBudget+lagOver+SettleBudget+StopBudget, space, budget, strings.Join(fix, "; "))
}

// faultAllowance is how long after the end of its window a fault step of the
// space may still be playing out: a relist waits for client-go's backoff, a
// restart takes up to RestartBudget, and a lagging apiserver then delays the
// events by its lag (at most MaxDelay).
func (b Bounds) faultAllowance(space Space) time.Duration {
	if !space.faults() {
		return 0
	}
	return max(RelistBackoff, RestartBudget) + b.MaxDelay
}

// Space is the set of actions a schedule may use.
type Space int

const (
	// LagOnly schedules delay and hold events, with finite windows: every
	// event is eventually delivered, as a real (slow) watch would.
	LagOnly Space = iota
	// LagAndLoss schedules may also drop events, which no real cluster does:
	// a real informer only misses events when a watch breaks, and then it
	// relists.
	LagAndLoss
	// Realistic schedules use only faults a real cluster produces: lag,
	// broken watches, relists after 410 Gone, relists from a lagging
	// apiserver, and controller restarts between two writes or before a
	// write's answer, optionally reconnecting to a lagging apiserver. Its
	// records are 6 bytes wide and can anchor a fault to the Nth matching
	// event or write (see codec.decode).
	Realistic
	// AnchoredLoss schedules have LagAndLoss's actions (delay, hold, drop)
	// in Realistic's 6-byte records, so that each step can be anchored to
	// the Nth matching event: one mutated byte moves a drop from one event
	// to the next, and a finding anchored that way survives timing changes.
	// No real cluster drops an event (see LagAndLoss).
	AnchoredLoss
	// RealisticLatency is Realistic with ordinary latency besides: a
	// record whose action is 6 delays every watch event of its client (7:
	// of every client), of every resource, in its window, by its delay:
	// what a slow or busy apiserver does to every watch at once, the most
	// common condition of a real cluster, where a race that needs no fault
	// shows (Step.IsLatency). In Realistic those two actions are holds, so
	// it is a space of its own: Realistic's corpus keeps its meaning there,
	// and a Realistic input without action 6 or 7 means the same here.
	RealisticLatency
	// OrdinaryLatency has ordinary latency only: every record is a latency
	// step, of every client when its action's low 3 bits are 7, else of
	// the record's client (RealisticLatency's records 6 and 7 mean the
	// same here, so its latency-only inputs replay alike). No fault, no
	// targeted lag: what a healthy, busy cluster does, to measure what a
	// controller does under that alone.
	OrdinaryLatency
	// Composed is RealisticLatency with faults on a write's answer, and
	// two faults in one schedule: besides one break, relist or restart,
	// one answer lost after the write was applied (proxy.Lose, Reset),
	// held (proxy.Slow, up to MaxSlowAnswer) or refused before it
	// (proxy.Reject: 429, 500, 503), anchored like a restart to its
	// client's Nth matching write. A restart record (action 4 or 5) whose
	// after byte's high nibble is 1 to 6 is such a fault (see
	// codec.decodeRealistic); a RealisticLatency input whose after bytes'
	// high nibbles are 0 (as every committed and seeded one's are) means
	// the same here.
	Composed
)

// anchored reports whether the space's records can anchor a step to the Nth
// matching event or write (6-byte records).
func (sp Space) anchored() bool {
	return sp == Realistic || sp == AnchoredLoss || sp == RealisticLatency || sp == OrdinaryLatency || sp == Composed
}

// latency reports whether the space has ordinary latency steps.
func (sp Space) latency() bool {
	return sp == RealisticLatency || sp == OrdinaryLatency || sp == Composed
}

// faults reports whether the space has faults: broken watches, relists,
// restarts.
func (sp Space) faults() bool { return sp == Realistic || sp == RealisticLatency || sp == Composed }

func (sp Space) String() string {
	switch sp {
	case LagOnly:
		return "lag-only"
	case LagAndLoss:
		return "lag-and-loss"
	case Realistic:
		return "realistic"
	case AnchoredLoss:
		return "anchored-lag-and-loss"
	case RealisticLatency:
		return "realistic-latency"
	case OrdinaryLatency:
		return "ordinary-latency"
	case Composed:
		return "composed"
	}
	return fmt.Sprintf("Space(%d)", int(sp))
}

// Step is one lag window or fault: events of Resource, for Client, within
// Scope, that arrive in [Start, Start+Length) after the mark, are delayed,
// held until the window ends, dropped, or end the watch; or the client's
// watch breaks and relists; or the client restarts after a write.
//
// Actions: proxy.Delay, Hold and Drop as their rules; proxy.Break: the
// client's watch ends just before the first matching event (after After),
// and it re-watches; proxy.Expire: the same, and its re-watch meets 410 Gone,
// so it relists (a relist); proxy.Freeze: the client is restarted right after
// its After+1st matching write in the window (a restart); proxy.Cut: the same
// write is applied but the client never sees the answer, then it is
// restarted. A relist with Lag relists from an apiserver lagging Lag: within
// the window its lists are served Lag in the past (never older than the
// resourceVersion a list carries, as no apiserver serves one: proxy.Rewind)
// and its events come Lag late. A restart with Lag reconnects to an apiserver that has not yet seen
// the write that fired it (Sieve's time travel): its lists are served at that
// write's resourceVersion minus one, and its events come Lag late while it
// syncs.
type Step struct {
	Client   string
	Resource string
	Object   string   // "" for every object in the namespace
	Types    []string // event types; empty for every type
	Start    time.Duration
	Length   time.Duration
	Action   proxy.Action
	Delay    time.Duration // for proxy.Delay
	// After lets the first After matching events (for a restart: writes)
	// pass (proxy.Rule.After), placing the fault right after a given event or
	// write, whatever the timing. Realistic records set it; in LagOnly and
	// LagAndLoss, Decode never sets it (it is for hand-written schedules) and
	// Encode drops it.
	After int
	// Verbs and Subresource narrow the writes a restart counts
	// (proxy.Rule.Verbs and Subresource); a restart's Resource empty counts
	// writes to every resource.
	Verbs       []string
	Subresource string
	// Lag is, for a relist or a restart, how far behind the apiserver it
	// reconnects to is (see above). Zero: not at all.
	Lag time.Duration
	// Code is, for proxy.Reject, the status the write is refused with
	// (proxy.Rule.Code). An answer fault (proxy.Lose, Reset, Slow,
	// Reject; IsAnswer) counts writes as a restart does (After, Verbs,
	// Subresource, Resource), and a Slow one holds the answer Delay.
	Code int
}

// End is when the window closes, after the mark.
func (s Step) End() time.Duration { return s.Start + s.Length }

// IsFault reports whether the step breaks a watch, restarts a client or
// is a fault on a write's answer.
func (s Step) IsFault() bool {
	switch s.Action {
	case proxy.Break, proxy.Expire, proxy.Freeze, proxy.Cut:
		return true
	}
	return s.IsAnswer()
}

// IsAnswer reports whether the step is a fault on a write's answer: lost
// after the write was applied, held, or refused before it (the client
// keeps running).
func (s Step) IsAnswer() bool { return s.Action.IsAnswer() }

// countsWrites reports whether the step is anchored to its client's writes (a
// restart, an answer fault), not to events.
func (s Step) countsWrites() bool { return s.IsRestart() || s.IsAnswer() }

// IsLatency reports whether the step is ordinary latency: every watch
// event of its client (of every client, when Client is empty), of every
// resource and object, delayed by Delay in its window. It is no fault: a
// slow or busy apiserver does it to every watch at once. Its rules come
// after every other step's, so that a fault or a targeted lag on the same
// events still decides them.
func (s Step) IsLatency() bool { return s.Action == proxy.Delay && s.Resource == "" }

// Kind names what the step does, as Known.Faults does: latency, delay,
// hold, drop, break, relist, restart, restart-before-answer, lose, reset,
// slow or reject.
func (s Step) Kind() string {
	switch {
	case s.IsLatency():
		return "latency"
	case s.Action == proxy.Expire:
		return "relist"
	case s.Action == proxy.Freeze:
		return "restart"
	case s.Action == proxy.Cut:
		return "restart-before-answer"
	}
	return s.Action.String()
}

// IsRestart reports whether the step restarts its client.
func (s Step) IsRestart() bool { return s.Action == proxy.Freeze || s.Action == proxy.Cut }

func (s Step) String() string {
	window := fmt.Sprintf("t+%.2fs–%.2fs", s.Start.Seconds(), s.End().Seconds())
	lag := ""
	switch {
	case s.Lag > 0 && s.IsRestart():
		lag = fmt.Sprintf(", reconnecting to an apiserver that has not seen that write, %.2fs behind", s.Lag.Seconds())
	case s.Lag > 0:
		lag = fmt.Sprintf(", relisting from an apiserver %.2fs behind", s.Lag.Seconds())
	}
	if s.countsWrites() {
		what := "write"
		if len(s.Verbs) > 0 {
			what = strings.Join(s.Verbs, "/")
		}
		if s.Resource != "" {
			what += " " + s.Resource
			switch s.Subresource {
			case "":
			case "-":
				what += " (not a subresource)"
			default:
				what += "/" + s.Subresource
			}
		}
		nth := ordinal(s.After+1) + " " + what
		switch s.Action {
		case proxy.Lose, proxy.Reset:
			return fmt.Sprintf("%s %s the answer to %s's %s", window, s.Action, s.Client, nth)
		case proxy.Slow:
			return fmt.Sprintf("%s slow the answer to %s's %s by %.2fs", window, s.Client, nth, s.Delay.Seconds())
		case proxy.Reject:
			return fmt.Sprintf("%s reject %s's %s with %d", window, s.Client, nth, s.code())
		}
		when := "right after"
		if s.Action == proxy.Cut {
			when = "before it sees the answer to"
		}
		return fmt.Sprintf("%s restart %s %s its %s%s", window, s.Client, when, nth, lag)
	}
	if s.IsLatency() {
		who := s.Client
		if who == "" {
			who = "every client"
		}
		return fmt.Sprintf("%s latency %.3fs on every watch of %s", window, s.Delay.Seconds(), who)
	}
	act := s.Action.String()
	switch s.Action {
	case proxy.Delay:
		act = fmt.Sprintf("delay %.2fs", s.Delay.Seconds())
	case proxy.Break:
		act = "break the watch at"
	case proxy.Expire:
		act = "break the watch (410 on re-watch: relist) at"
	}
	what := s.Resource
	if s.Object != "" {
		what += "/" + s.Object
	}
	if len(s.Types) > 0 {
		what = strings.Join(s.Types, "+") + " " + what
	}
	if s.After > 0 {
		what += fmt.Sprintf(" after the first %d", s.After)
	}
	return fmt.Sprintf("%s %s %s for %s%s", window, act, what, s.Client, lag)
}

// Cause says what in a real cluster does what the step does, or that
// nothing does (the README's table of faults).
func (s Step) Cause() string {
	lagging := ""
	if s.Lag > 0 {
		lagging = "; the lag: an HA apiserver whose watch cache lags etcd (LIST resourceVersion=0 served from it)"
	}
	switch {
	case s.IsLatency():
		return "real: ordinary latency, every watch a little late (a busy apiserver or etcd, API Priority and Fairness queueing, a congested network): the most common condition of a real cluster"
	}
	switch s.Action {
	case proxy.Delay, proxy.Hold:
		return "real: a slow or overloaded apiserver, a congested network or a slow client"
	case proxy.Drop:
		return "NOT REAL: no real cluster drops an event on an open watch; client-go only misses events across a relist"
	case proxy.Break:
		return "real: the apiserver's watch timeout, an apiserver restart, a load balancer reset"
	case proxy.Expire:
		return "real: a watch broken (apiserver restart, timeout) whose re-watch meets 410 Gone (compaction, a restarted apiserver's watch cache)" + lagging
	case proxy.Freeze:
		return "real: the controller killed between two writes (OOM kill, eviction, rollout)" + lagging
	case proxy.Cut:
		return "real: the controller killed after sending a write and before reading the answer" + lagging
	case proxy.Lose:
		return "real: the apiserver's request timeout (504, 60 s by default) while etcd or an admission webhook is slow, the write committing after the client was answered; a load balancer's 504"
	case proxy.Reset:
		return "real: the connection reset after the write was sent (a load balancer, an apiserver shutting down, a network partition): applied, the client gets a transport error"
	case proxy.Slow:
		return "real: a slow way back for an answer already committed (a CPU-starved client, a congested connection, a slow conversion webhook, a busy apiserver encoding it): its watch event may arrive first"
	case proxy.Reject:
		switch s.code() {
		case 500:
			return "real: etcd's \"request timed out\" for a proposal that never committed (slow disk, a leader election)"
		case 503:
			return "real: an apiserver restarting behind a load balancer"
		}
		return "real: API Priority and Fairness refusing a request its priority level cannot queue (429, Retry-After: 1; client-go retries it)"
	}
	return "unknown"
}

// code is a Reject step's status.
func (s Step) code() int {
	if s.Code == 0 {
		return 429
	}
	return s.Code
}

// OnDefaults says whether a cluster on Kubernetes 1.37's defaults
// (WatchList, consistent lists) can do what the step does: "yes"; "only
// without WatchList" for a relist or restart onto a lagging apiserver,
// whose stale list WatchList's consistent initial events rule out (a client
// on client-go before 0.35, or with WatchList off, still lists from the
// watch cache); "no" for what no cluster does.
func (s Step) OnDefaults() string {
	switch {
	case s.Action == proxy.Drop:
		return "no"
	case s.Lag > 0 && (s.Action == proxy.Expire || s.IsRestart()):
		return "only without WatchList"
	}
	return "yes"
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// Rules are the proxy rules for the step in namespace ns. A relist is a
// Break and an Expire in the same window; with Lag, also a Rewind of the
// lists and a Delay of the events by Lag. A restart is one Freeze or Cut
// rule: the engine restarts the client when it fires.
func (s Step) Rules(ns string) []proxy.Rule {
	r := proxy.Rule{
		Client: s.Client, Resource: s.Resource, Namespace: ns, Name: s.Object, Types: s.Types,
		From: s.Start, To: s.End(), Action: s.Action, Delay: s.Delay, After: s.After,
	}
	switch s.Action {
	case proxy.Expire:
		r.Action = proxy.Break
		rules := []proxy.Rule{r, {Client: s.Client, Resource: s.Resource, Namespace: ns, From: s.Start, To: s.End(), Action: proxy.Expire}}
		if s.Lag > 0 {
			rules = append(rules,
				proxy.Rule{Client: s.Client, Resource: s.Resource, Namespace: ns, From: s.Start, To: s.End(), Action: proxy.Rewind, Ago: s.Lag},
				proxy.Rule{Client: s.Client, Resource: s.Resource, Namespace: ns, From: s.Start, To: s.End(), Action: proxy.Delay, Delay: s.Lag})
		}
		return rules
	case proxy.Freeze, proxy.Cut, proxy.Lose, proxy.Reset, proxy.Slow, proxy.Reject:
		r.Name, r.Types = "", nil
		r.Verbs, r.Subresource = s.Verbs, s.Subresource
		if s.Action != proxy.Slow {
			r.Delay = 0
		}
		if s.Action == proxy.Reject {
			r.Code = s.Code
		}
	}
	return []proxy.Rule{r}
}

// Schedule is one decoded fuzz input: the scenario's knob settings and the lag
// windows.
type Schedule struct {
	Knobs map[string]int
	Steps []Step
}

// LagEnd is when the last event a step touches has been released, after the
// mark: no lag remains after it, but for what a fault set off (a relist
// waiting for its backoff, a restart), which the engine follows as it
// happens.
//
// A restart step's window only bounds when its write may come: the engine
// counts the step as over once its restart is done, or when its window ends
// without one, so LagEnd leaves restart steps out.
func (s Schedule) LagEnd() time.Duration {
	var end time.Duration
	for _, st := range s.Steps {
		if st.IsRestart() {
			continue
		}
		e := st.End()
		switch st.Action {
		case proxy.Delay, proxy.Slow:
			e += st.Delay
		case proxy.Expire:
			e += st.Lag
		}
		end = max(end, e)
	}
	return end
}

// LatencyOnly reports whether the schedule has steps and every one is
// ordinary latency (Step.IsLatency): a run a healthy, busy cluster gives.
func (s Schedule) LatencyOnly() bool {
	for _, st := range s.Steps {
		if !st.IsLatency() {
			return false
		}
	}
	return len(s.Steps) > 0
}

// HasFault reports whether a step breaks a watch or restarts a client.
func (s Schedule) HasFault() bool {
	for _, st := range s.Steps {
		if st.IsFault() {
			return true
		}
	}
	return false
}

func (s Schedule) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.Knobs)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, s.Knobs[k]))
	}
	for _, st := range s.Steps {
		parts = append(parts, st.String())
	}
	if len(s.Steps) == 0 {
		parts = append(parts, "no lag")
	}
	return strings.Join(parts, "; ")
}

// Knob is a scenario setting the fuzzer chooses, from 0 to Values-1 (for
// example when a user action happens, or how many replicas run).
type Knob struct {
	Name   string
	Values int // at least 1; larger values are reduced modulo Values
}

// codec maps bytes to schedules for one scenario's declared clients,
// resources, objects and knobs.
type codec struct {
	bounds    Bounds
	knobs     []Knob
	clients   []string
	resources []string
	objects   []string
	space     Space
}

func (s *Scenario) codec(space Space) codec {
	return codec{bounds: s.Bounds.orDefault(), knobs: s.Knobs, clients: s.Clients, resources: s.Resources, objects: s.Objects, space: space}
}

// Decode turns any byte string into a valid schedule; it never fails.
//
// Layout: one byte per knob, in declaration order (value = byte mod Values),
// then up to MaxSteps records of 5 bytes:
//
//	[0] client    low nibble: index into Clients, mod len;
//	              high nibble: event types, 0 = every type, else a mask of
//	              1 ADDED, 2 MODIFIED, 4 DELETED, 8 BOOKMARK
//	[1] target    low nibble: index into Resources, mod len;
//	              high nibble: 0 = every object, i = Objects[(i-1) mod len]
//	[2] start     quadratic in [0, Bounds.MaxStart]
//	[3] length    quadratic in [MinLength, Bounds.MaxLength], cut at Bounds.MaxLagEnd
//	[4] action    low 2 bits: 0 delay, 1 hold, 2 drop (hold in LagOnly), 3 hold;
//	              high 6 bits: delay, quadratic in [0, Bounds.MaxDelay]
//
// A missing knob byte is 0; a trailing partial record is no step: exhausted
// input means no more lag. One mutated byte changes one field of one step, and
// adding knobs or fields never changes what existing corpus bytes mean for the
// fields that were there (new fields go at the end of a record's width only
// through a new scenario).
func (c codec) decode(b []byte) Schedule {
	s := Schedule{Knobs: map[string]int{}}
	for _, k := range c.knobs {
		v := 0
		if len(b) > 0 {
			v = int(b[0]) % max(1, k.Values)
			b = b[1:]
		}
		s.Knobs[k.Name] = v
	}
	if len(c.clients) == 0 || len(c.resources) == 0 {
		return s
	}
	if c.space.anchored() {
		return c.decodeRealistic(s, b)
	}
	for len(b) >= stepBytes && len(s.Steps) < MaxSteps {
		r := b[:stepBytes]
		b = b[stepBytes:]
		st := Step{
			Client:   c.clients[int(r[0]&0x0f)%len(c.clients)],
			Types:    typesOf(r[0] >> 4),
			Resource: c.resources[int(r[1]&0x0f)%len(c.resources)],
			Start:    quad(r[2], 0, c.bounds.MaxStart),
			Length:   quad(r[3], MinLength, c.bounds.MaxLength),
		}
		if obj := int(r[1] >> 4); obj > 0 && len(c.objects) > 0 {
			st.Object = c.objects[(obj-1)%len(c.objects)]
		}
		if st.End() > c.bounds.MaxLagEnd {
			st.Length = c.bounds.MaxLagEnd - st.Start
		}
		switch r[4] & 3 {
		case 0:
			st.Action = proxy.Delay
			st.Delay = quad6(r[4]>>2, c.bounds.MaxDelay)
		case 2:
			st.Action = proxy.Drop
			if c.space == LagOnly {
				st.Action = proxy.Hold
			}
		default:
			st.Action = proxy.Hold
		}
		s.Steps = append(s.Steps, st)
	}
	return s
}

// decodeRealistic reads the step records of the Realistic space, after the
// knob bytes. Each record is 6 bytes:
//
//	[0] client    low nibble: index into Clients, mod len;
//	              high nibble: for lag and watch faults, the event types as in
//	              the other spaces; for restarts, the write verb counted:
//	              0 any, 1 create, 2 update, 3 patch, 4 delete, mod 5
//	[1] target    low nibble: index into Resources, mod len;
//	              high nibble: for lag and watch faults, the object as in the
//	              other spaces; for restarts, which writes count: 0 the
//	              client's every write, 1 writes to the resource, 2 to its
//	              status subresource, 3 to the resource itself, mod 4
//	[2] start     quadratic in [0, Bounds.MaxStart]
//	[3] length    quadratic in [MinLength, Bounds.MaxLength], cut at Bounds.MaxLagEnd
//	[4] action    low 3 bits: 0 delay, 1 hold, 2 break (the watch ends; the
//	              client re-watches), 3 relist (the watch ends and the
//	              re-watch meets 410 Gone), 4 restart right after a write,
//	              5 restart before a write's answer, 6 and 7 hold;
//	              high 5 bits: quadratic in [0, Bounds.MaxDelay], the delay
//	              of a delay, the Lag of a relist or restart
//	[5] after     mod 16: the first N matching events (restarts: writes) pass
//
// In AnchoredLoss the action's low 3 bits are 0 delay, 1 hold, 2 drop, 3 to 7
// hold: there are no faults, and the high 5 bits are a delay's delay.
//
// In RealisticLatency the action's low 3 bits 6 and 7 are ordinary latency
// (Step.IsLatency): every watch event of the record's client (7: of every
// client), of every resource and object, delayed by the high 5 bits in the
// window; the types, the target's object nibble and after are not used. In
// OrdinaryLatency every action is: 7 of every client, the others of the
// record's client.
//
// In Composed a restart record (action 4 or 5) whose after byte's high
// nibble is 1 to 6 is a fault on the answer to the client's
// After+1st matching write instead (the write scope as a restart's): 1 lost
// (the apiserver's 504), 2 reset, 3 slow (held by the action's high 5 bits,
// quadratic in [0, MaxSlowAnswer]), 4 refused with 429, 5 with 500, 6 with
// 503; 0 and 7 to 15 keep the restart (so that a mutated byte leaves most
// restart records restarts).
//
// Only the first fault (break, relist, restart) of a schedule is one: a
// later fault record decodes to a hold of the same window and target, so
// that every execution has at most one relist or restart and fits the
// budget by construction (Bounds.faultAllowance). In Composed the first
// answer fault is one besides (two faults at once); a later one decodes to
// a hold. Each fault's aftermath (a relist's backoff, a restart, a slow
// answer, client-go's retry after a 429) fits the same allowance, and all
// of them start before Bounds.MaxFaultEnd.
func (c codec) decodeRealistic(s Schedule, b []byte) Schedule {
	fault, answered := false, false
	for len(b) >= realisticStepBytes && len(s.Steps) < MaxSteps {
		r := b[:realisticStepBytes]
		b = b[realisticStepBytes:]
		st := Step{
			Client: c.clients[int(r[0]&0x0f)%len(c.clients)],
			Start:  quad(r[2], 0, c.bounds.MaxStart),
			Length: quad(r[3], MinLength, c.bounds.MaxLength),
			After:  int(r[5]) % maxAfter,
		}
		if st.End() > c.bounds.MaxLagEnd {
			st.Length = c.bounds.MaxLagEnd - st.Start
		}
		resource := c.resources[int(r[1]&0x0f)%len(c.resources)]
		param := quad5(r[4]>>3, c.bounds.MaxDelay)
		act := r[4] & 7
		kind := 0 // Composed: a fault on an answer, 1 to 6 (answerKinds)
		if c.space == Composed && (act == 4 || act == 5) {
			if kind = int(r[5] >> 4); kind > len(answerKinds) {
				kind = 0
			}
		}
		switch {
		case kind > 0 && answered:
			act, kind = 1, 0 // one answer fault per schedule
		case kind == 0 && act >= 2 && act <= 5 && fault:
			act = 1 // one break, relist or restart per schedule
		}
		if c.space == AnchoredLoss {
			switch act {
			case 0:
				st.Action, st.Delay = proxy.Delay, param
			case 2:
				st.Action = proxy.Drop
			default:
				st.Action = proxy.Hold
			}
			st.Resource, st.Types = resource, typesOf(r[0]>>4)
			if obj := int(r[1] >> 4); obj > 0 && len(c.objects) > 0 {
				st.Object = c.objects[(obj-1)%len(c.objects)]
			}
			s.Steps = append(s.Steps, st)
			continue
		}
		if c.space == OrdinaryLatency && act < 6 {
			act = 6
		}
		if c.space.latency() && act >= 6 {
			st.Action, st.Delay, st.After = proxy.Delay, param, 0
			if act == 7 {
				st.Client = ""
			}
			s.Steps = append(s.Steps, st)
			continue
		}
		switch {
		case kind > 0:
			a := answerKinds[kind-1]
			st.Action, st.Code = a.action, a.code
			if a.action == proxy.Slow {
				st.Delay = quad5(r[4]>>3, MaxSlowAnswer)
			}
			answered = true
		case act == 0:
			st.Action, st.Delay = proxy.Delay, param
		case act == 2:
			st.Action = proxy.Break
		case act == 3:
			st.Action, st.Lag = proxy.Expire, param
		case act == 4:
			st.Action, st.Lag = proxy.Freeze, param
		case act == 5:
			st.Action, st.Lag = proxy.Cut, param
		default:
			st.Action = proxy.Hold
		}
		fault = fault || (st.IsFault() && !st.IsAnswer())
		if st.IsFault() && st.End() > c.bounds.faultEnd() {
			st.Length = c.bounds.faultEnd() - st.Start
		}
		if st.countsWrites() {
			if v := int(r[0]>>4) % 5; v > 0 {
				st.Verbs = []string{writeVerbs[v-1]}
			}
			switch (r[1] >> 4) % 4 {
			case 1:
				st.Resource = resource
			case 2:
				st.Resource, st.Subresource = resource, "status"
			case 3:
				st.Resource, st.Subresource = resource, "-"
			}
		} else {
			st.Resource = resource
			st.Types = typesOf(r[0] >> 4)
			if obj := int(r[1] >> 4); obj > 0 && len(c.objects) > 0 {
				st.Object = c.objects[(obj-1)%len(c.objects)]
			}
		}
		s.Steps = append(s.Steps, st)
	}
	return s
}

// writeVerbs are the verbs a restart record can count, by value.
var writeVerbs = []string{"create", "update", "patch", "delete"}

// answerKinds are Composed's faults on answers, by the value of a restart
// record's after-byte high nibble (1 to 6).
var answerKinds = []struct {
	action proxy.Action
	code   int
}{{proxy.Lose, 0}, {proxy.Reset, 0}, {proxy.Slow, 0}, {proxy.Reject, 429}, {proxy.Reject, 500}, {proxy.Reject, 503}}

// answerKind is st's value in answerKinds, from 1; 0 for no answer fault.
func answerKind(st Step) byte {
	for i, a := range answerKinds {
		if a.action == st.Action && (a.code == 0 || a.code == st.code()) {
			return byte(i + 1)
		}
	}
	return 0
}

// encodeRealistic writes steps in the layout decodeRealistic reads.
func (c codec) encodeRealistic(b []byte, steps []Step) []byte {
	for _, st := range steps {
		var r [realisticStepBytes]byte
		r[0] = byte(max(0, index(c.clients, st.Client)))
		r[1] = byte(max(0, index(c.resources, st.Resource)))
		r[2] = unquad(st.Start, 0, c.bounds.MaxStart)
		r[3] = unquad(st.Length, MinLength, c.bounds.MaxLength)
		if st.End() == c.bounds.MaxLagEnd || (st.IsFault() && st.End() == c.bounds.faultEnd()) {
			r[3] = 255 // decode cuts it there again
		}
		r[5] = byte(st.After % maxAfter)
		var act, param byte
		switch {
		case st.IsLatency() && st.Client == "":
			act, param = 7, unquad5(st.Delay, c.bounds.MaxDelay)
		case st.IsLatency():
			act, param = 6, unquad5(st.Delay, c.bounds.MaxDelay)
		case st.Action == proxy.Delay:
			act, param = 0, unquad5(st.Delay, c.bounds.MaxDelay)
		case st.Action == proxy.Break:
			act = 2
		case st.Action == proxy.Expire:
			act, param = 3, unquad5(st.Lag, c.bounds.MaxDelay)
		case st.Action == proxy.Freeze:
			act, param = 4, unquad5(st.Lag, c.bounds.MaxDelay)
		case st.Action == proxy.Cut:
			act, param = 5, unquad5(st.Lag, c.bounds.MaxDelay)
		case st.IsAnswer():
			act = 4
			r[5] |= answerKind(st) << 4
			if st.Action == proxy.Slow {
				param = unquad5(st.Delay, MaxSlowAnswer)
			}
		case st.Action == proxy.Drop:
			act = 2 // AnchoredLoss only
		default:
			act = 1
		}
		r[4] = act | param<<3
		if st.countsWrites() {
			if len(st.Verbs) > 0 {
				r[0] |= byte(index(writeVerbs, st.Verbs[0])+1) << 4
			}
			scope := byte(0)
			switch {
			case st.Resource == "":
			case st.Subresource == "status":
				scope = 2
			case st.Subresource == "-":
				scope = 3
			default:
				scope = 1
			}
			r[1] |= scope << 4
		} else {
			r[0] |= maskOf(st.Types) << 4
			if st.Object != "" {
				r[1] |= byte(index(c.objects, st.Object)+1) << 4
			}
		}
		b = append(b, r[:]...)
	}
	return b
}

// encode writes s in the layout decode reads, choosing for each duration the
// byte that decodes to the nearest value. decode(encode(s)) == s for every s
// that decode produced.
func (c codec) encode(s Schedule) []byte {
	var b []byte
	for _, k := range c.knobs {
		b = append(b, byte(s.Knobs[k.Name]))
	}
	if c.space.anchored() {
		return c.encodeRealistic(b, s.Steps)
	}
	for _, st := range s.Steps {
		target := byte(max(0, index(c.resources, st.Resource)))
		if st.Object != "" {
			target |= byte(index(c.objects, st.Object)+1) << 4
		}
		lb := unquad(st.Length, MinLength, c.bounds.MaxLength)
		if st.End() == c.bounds.MaxLagEnd {
			lb = 255 // decode cuts it at MaxLagEnd again
		}
		var act byte
		switch st.Action {
		case proxy.Delay:
			act = unquad6(st.Delay, c.bounds.MaxDelay) << 2
		case proxy.Hold:
			act = 1
		case proxy.Drop:
			act = 2
		}
		b = append(b, byte(max(0, index(c.clients, st.Client)))|maskOf(st.Types)<<4, target, unquad(st.Start, 0, c.bounds.MaxStart), lb, act)
	}
	return b
}

// quad maps a byte to [lo, hi], quadratically, so that most values are short:
// short windows make fast executions, and the fuzzer can still reach long ones.
// Values are whole milliseconds so that schedules print and round-trip exactly.
func quad(b byte, lo, hi time.Duration) time.Duration {
	f := float64(b) / 255
	return lo + (time.Duration(f*f*float64(hi-lo)) / time.Millisecond * time.Millisecond)
}

func quad6(b byte, hi time.Duration) time.Duration {
	f := float64(b&63) / 63
	return time.Duration(f*f*float64(hi)) / time.Millisecond * time.Millisecond
}

func quad5(b byte, hi time.Duration) time.Duration {
	f := float64(b&31) / 31
	return time.Duration(f*f*float64(hi)) / time.Millisecond * time.Millisecond
}

func unquad5(d, hi time.Duration) byte {
	return nearest(d, 31, func(b byte) time.Duration { return quad5(b, hi) }, 0, hi)
}

func unquad(d, lo, hi time.Duration) byte {
	return nearest(d, 255, func(b byte) time.Duration { return quad(b, lo, hi) }, lo, hi)
}

func unquad6(d, hi time.Duration) byte {
	return nearest(d, 63, func(b byte) time.Duration { return quad6(b, hi) }, 0, hi)
}

// nearest finds the byte in [0, n] whose decoded value is closest to d.
func nearest(d time.Duration, n int, dec func(byte) time.Duration, lo, hi time.Duration) byte {
	if hi <= lo {
		return 0
	}
	d = min(max(d, lo), hi)
	guess := int(math.Round(float64(n) * math.Sqrt(float64(d-lo)/float64(hi-lo))))
	best, bestDiff := byte(0), time.Duration(math.MaxInt64)
	for g := max(0, guess-2); g <= min(n, guess+2); g++ {
		diff := dec(byte(g)) - d
		if diff < 0 {
			diff = -diff
		}
		if diff < bestDiff {
			best, bestDiff = byte(g), diff
		}
	}
	return best
}

// eventTypes are the types a step's type mask selects, by bit.
var eventTypes = []string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK"}

func typesOf(mask byte) []string {
	var ts []string
	for i, t := range eventTypes {
		if mask&(1<<i) != 0 {
			ts = append(ts, t)
		}
	}
	return ts
}

func maskOf(types []string) byte {
	var m byte
	for _, t := range types {
		if i := index(eventTypes, t); i >= 0 {
			m |= 1 << i
		}
	}
	return m
}

func index(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
