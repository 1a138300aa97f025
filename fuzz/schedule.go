package fuzz

import (
	"fmt"
	"math"
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
	// stepBytes is the width of one step record.
	stepBytes = 5
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
// budgets, finishes within Budget.
func (b Bounds) fits() error {
	if b.MaxStart <= 0 || b.MaxLength < MinLength || b.MaxLagEnd <= b.MaxStart || b.MaxDelay < 0 {
		return fmt.Errorf("bounds %+v: want 0 < MaxStart < MaxLagEnd, MaxLength >= %v, MaxDelay >= 0", b, MinLength)
	}
	if total := StartBudget + DriveBudget + b.MaxLagEnd + b.MaxDelay + SettleBudget + StopBudget; total > Budget {
		return fmt.Errorf("bounds %+v: an execution could take %v, over the %v budget", b, total, Budget)
	}
	return nil
}

// Space is the set of actions a schedule may use.
type Space int

const (
	// LagOnly schedules delay and hold events, with finite windows: every
	// event is eventually delivered, as a real (slow) watch would.
	LagOnly Space = iota
	// LagAndLoss schedules may also drop events, which a real informer only
	// sees when a watch breaks and it relists.
	LagAndLoss
)

// Step is one lag window: events of Resource, for Client, within Scope, that
// arrive in [Start, Start+Length) after the mark, are delayed, held until the
// window ends, or dropped.
type Step struct {
	Client   string
	Resource string
	Object   string   // "" for every object in the namespace
	Types    []string // event types; empty for every type
	Start    time.Duration
	Length   time.Duration
	Action   proxy.Action
	Delay    time.Duration // for proxy.Delay
	// After lets the first After matching events pass (proxy.Rule.After),
	// placing the window right after a given write. Decode never sets it: it
	// is for hand-written schedules in specs, and Encode drops it.
	After int
}

// End is when the window closes, after the mark.
func (s Step) End() time.Duration { return s.Start + s.Length }

func (s Step) String() string {
	act := s.Action.String()
	if s.Action == proxy.Delay {
		act = fmt.Sprintf("delay %.2fs", s.Delay.Seconds())
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
	return fmt.Sprintf("t+%.2fs–%.2fs %s %s for %s", s.Start.Seconds(), s.End().Seconds(), act, what, s.Client)
}

// Rule is the proxy rule for the step in namespace ns.
func (s Step) Rule(ns string) proxy.Rule {
	return proxy.Rule{
		Client: s.Client, Resource: s.Resource, Namespace: ns, Name: s.Object, Types: s.Types,
		From: s.Start, To: s.End(), Action: s.Action, Delay: s.Delay, After: s.After,
	}
}

// Schedule is one decoded fuzz input: the scenario's knob settings and the lag
// windows.
type Schedule struct {
	Knobs map[string]int
	Steps []Step
}

// LagEnd is when the last event a step touches has been released, after the
// mark: no lag remains after it.
func (s Schedule) LagEnd() time.Duration {
	var end time.Duration
	for _, st := range s.Steps {
		e := st.End()
		if st.Action == proxy.Delay {
			e += st.Delay
		}
		end = max(end, e)
	}
	return end
}

func (s Schedule) String() string {
	var parts []string
	for _, k := range sortedKeys(s.Knobs) {
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

// encode writes s in the layout decode reads, choosing for each duration the
// byte that decodes to the nearest value. decode(encode(s)) == s for every s
// that decode produced.
func (c codec) encode(s Schedule) []byte {
	var b []byte
	for _, k := range c.knobs {
		b = append(b, byte(s.Knobs[k.Name]))
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

func unquad(d, lo, hi time.Duration) byte {
	return nearest(d, 255, func(b byte) time.Duration { return quad(b, lo, hi) }, lo, hi)
}

func unquad6(d, hi time.Duration) byte {
	return nearest(d, 63, func(b byte) time.Duration { return quad6(b, hi) }, 0, hi)
}

// nearest finds the byte in [0, n] whose decoded value is closest to d.
func nearest(d time.Duration, n int, dec func(byte) time.Duration, lo, hi time.Duration) byte {
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
