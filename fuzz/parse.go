package fuzz

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
)

// ParseSchedule reads a schedule in words: what Schedule.String prints (a
// finding's "schedule:" line, a false alarm's), so that a person can replay
// or edit one without reading the input layout. Parts are separated by
// semicolons:
//
//	knob=N                      a knob's value, by index (0 when left out)
//	no lag                      nothing else
//	[WINDOW] latency D on every watch of (CLIENT|every client)
//	[WINDOW] delay D TARGET for CLIENT
//	[WINDOW] hold TARGET for CLIENT
//	[WINDOW] drop TARGET for CLIENT
//	[WINDOW] break the watch at TARGET for CLIENT
//	[WINDOW] break the watch (410 on re-watch: relist) at TARGET for CLIENT[, relisting from an apiserver D behind]
//	[WINDOW] restart CLIENT (right after|before it sees the answer to) its Nth WRITES[, reconnecting to an apiserver that has not seen that write, D behind]
//	[WINDOW] (lose|reset) the answer to CLIENT's Nth WRITES
//	[WINDOW] slow the answer to CLIENT's Nth WRITES by D
//	[WINDOW] reject CLIENT's Nth WRITES with (429|500|503)
//
// WINDOW is "t+A–B" in seconds ("t+0.00s–2.10s"; a hyphen does for the
// dash); left out, the whole lag window (from the mark to the shorter of
// Bounds.MaxLength and MaxLagEnd). D is a duration ("0.03s", "30ms").
// TARGET is [TYPES ]RESOURCE[/OBJECT][ after the first N], TYPES joined by
// "+" (ADDED+MODIFIED). WRITES is "write" or a verb (create, update, patch,
// delete), then optionally " RESOURCE", " RESOURCE/status" or " RESOURCE
// (not a subresource)". Every name must be the scenario's (Clients,
// Resources, Objects, Knobs). The result is what the words say; whether
// the scenario's space can hold it exactly is EncodeExactly's to say.
func (s Scenario) ParseSchedule(text string) (Schedule, error) {
	sched := Schedule{Knobs: map[string]int{}}
	for _, k := range s.Knobs {
		sched.Knobs[k.Name] = 0
	}
	b := s.Bounds.orDefault()
	for _, part := range strings.Split(text, ";") {
		part = strings.TrimSpace(part)
		switch {
		case part == "" || part == "no lag":
			continue
		case knobRE.MatchString(part):
			m := knobRE.FindStringSubmatch(part)
			i := slices.IndexFunc(s.Knobs, func(k Knob) bool { return k.Name == m[1] })
			if i < 0 {
				return Schedule{}, fmt.Errorf("%q: no knob %q (the scenario's: %s)", part, m[1], names(s.Knobs))
			}
			v, _ := strconv.Atoi(m[2])
			if v >= s.Knobs[i].Values {
				return Schedule{}, fmt.Errorf("%q: knob %s has values 0 to %d", part, m[1], s.Knobs[i].Values-1)
			}
			sched.Knobs[m[1]] = v
			continue
		}
		st, err := s.parseStep(part, b)
		if err != nil {
			return Schedule{}, fmt.Errorf("%q: %w", part, err)
		}
		sched.Steps = append(sched.Steps, st)
	}
	return sched, nil
}

var (
	knobRE    = regexp.MustCompile(`^([A-Za-z0-9_.-]+)=(\d+)$`)
	windowRE  = regexp.MustCompile(`^t\+([0-9.]+)s?\s*[–-]\s*([0-9.]+)s\s+`)
	latencyRE = regexp.MustCompile(`^latency (\S+) on every watch of (.+)$`)
	restartRE = regexp.MustCompile(`^restart (\S+) (right after|before it sees the answer to) its (\d+)(?:st|nd|rd|th) (.+?)(?:, reconnecting to an apiserver that has not seen that write, (\S+) behind)?$`)
	answerRE  = regexp.MustCompile(`^(?:(lose|reset|slow) the answer to|(reject)) (\S+?)'s (\d+)(?:st|nd|rd|th) (.+?)(?: by (\S+)| with (\d+))?$`)
	actionRE  = regexp.MustCompile(`^(delay (\S+)|hold|drop|break the watch \(410 on re-watch: relist\) at|break the watch at) (.+) for (\S+?)(?:, relisting from an apiserver (\S+) behind)?$`)
	targetRE  = regexp.MustCompile(`^(?:([A-Z+]+) )?([a-z0-9.-]+)(?:/(\S+))?(?: after the first (\d+))?$`)
)

// parseStep reads one step (ParseSchedule).
func (s Scenario) parseStep(part string, b Bounds) (Step, error) {
	st := Step{Length: min(b.MaxLength, b.MaxLagEnd)}
	if m := windowRE.FindStringSubmatch(part); m != nil {
		from, err1 := seconds(m[1])
		to, err2 := seconds(m[2])
		if err1 != nil || err2 != nil || to < from {
			return Step{}, fmt.Errorf("window %q: want t+A–Bs with A <= B", strings.TrimSpace(m[0]))
		}
		st.Start, st.Length = from, to-from
		part = part[len(m[0]):]
	}
	if m := latencyRE.FindStringSubmatch(part); m != nil {
		d, err := duration(m[1])
		if err != nil {
			return Step{}, err
		}
		st.Action, st.Delay = proxy.Delay, d
		if m[2] != "every client" {
			if st.Client, err = s.client(m[2]); err != nil {
				return Step{}, err
			}
		}
		return st, nil
	}
	if m := restartRE.FindStringSubmatch(part); m != nil {
		var err error
		if st.Client, err = s.client(m[1]); err != nil {
			return Step{}, err
		}
		st.Action = proxy.Freeze
		if m[2] != "right after" {
			st.Action = proxy.Cut
		}
		if err := s.parseNthWrite(&st, m[3], m[4]); err != nil {
			return Step{}, err
		}
		if m[5] != "" {
			if st.Lag, err = lag(m[5]); err != nil {
				return Step{}, err
			}
		}
		return st, nil
	}
	if m := answerRE.FindStringSubmatch(part); m != nil {
		return s.parseAnswer(st, m)
	}
	m := actionRE.FindStringSubmatch(part)
	if m == nil {
		return Step{}, fmt.Errorf("not a step: want latency, delay, hold, drop, break, relist, restart, lose, reset, slow or reject as Schedule.String writes them (\"t+0.00s–2.10s latency 0.030s on every watch of every client\")")
	}
	var err error
	switch {
	case strings.HasPrefix(m[1], "delay "):
		st.Action = proxy.Delay
		if st.Delay, err = duration(m[2]); err != nil {
			return Step{}, err
		}
	case m[1] == "hold":
		st.Action = proxy.Hold
	case m[1] == "drop":
		st.Action = proxy.Drop
	case strings.Contains(m[1], "410"):
		st.Action = proxy.Expire
	default:
		st.Action = proxy.Break
	}
	if m[5] != "" {
		if st.Action != proxy.Expire {
			return Step{}, fmt.Errorf("only a relist lists from a lagging apiserver")
		}
		if st.Lag, err = lag(m[5]); err != nil {
			return Step{}, err
		}
	}
	if st.Client, err = s.client(m[4]); err != nil {
		return Step{}, err
	}
	t := targetRE.FindStringSubmatch(m[3])
	if t == nil {
		return Step{}, fmt.Errorf("target %q: want [TYPES ]RESOURCE[/OBJECT][ after the first N]", m[3])
	}
	if t[1] != "" {
		for _, typ := range strings.Split(t[1], "+") {
			if !slices.Contains(eventTypes, typ) {
				return Step{}, fmt.Errorf("event type %q: want %s", typ, strings.Join(eventTypes, ", "))
			}
			st.Types = append(st.Types, typ)
		}
	}
	if st.Resource, err = s.resource(t[2]); err != nil {
		return Step{}, err
	}
	if t[3] != "" {
		if !slices.Contains(s.Objects, t[3]) {
			return Step{}, fmt.Errorf("object %q: not one of the scenario's objects (%s)", t[3], strings.Join(s.Objects, ", "))
		}
		st.Object = t[3]
	}
	if t[4] != "" {
		st.After, _ = strconv.Atoi(t[4])
	}
	return st, nil
}

// parseAnswer reads a fault on an answer from answerRE's match m.
func (s Scenario) parseAnswer(st Step, m []string) (Step, error) {
	var err error
	if st.Client, err = s.client(m[3]); err != nil {
		return Step{}, err
	}
	if err := s.parseNthWrite(&st, m[4], m[5]); err != nil {
		return Step{}, err
	}
	switch {
	case m[2] == "reject":
		if m[7] == "" || m[6] != "" {
			return Step{}, fmt.Errorf("reject: say the status, \"with 429\" (429, 500 or 503)")
		}
		st.Action, st.Code = proxy.Reject, atoi(m[7])
		if !slices.Contains(proxy.RejectCodes, st.Code) {
			return Step{}, fmt.Errorf("reject with %d: want one of %v", st.Code, proxy.RejectCodes)
		}
	case m[1] == "slow":
		if m[6] == "" {
			return Step{}, fmt.Errorf("slow: say for how long, \"by 1.20s\"")
		}
		st.Action = proxy.Slow
		if st.Delay, err = duration(m[6]); err != nil {
			return Step{}, err
		}
	default:
		if m[6] != "" || m[7] != "" {
			return Step{}, fmt.Errorf("%s takes no \"by\" or \"with\"", m[1])
		}
		st.Action = map[string]proxy.Action{"lose": proxy.Lose, "reset": proxy.Reset}[m[1]]
	}
	return st, nil
}

func atoi(v string) int {
	n, _ := strconv.Atoi(v)
	return n
}

// parseNthWrite reads the write a restart or an answer fault is anchored
// to: its ordinal's number nth ("2" of "2nd") and its writes.
func (s Scenario) parseNthWrite(st *Step, nth, writes string) error {
	n, _ := strconv.Atoi(nth)
	if n < 1 {
		return fmt.Errorf("the 0th write: count writes from 1st")
	}
	st.After = n - 1
	return s.parseWrites(st, writes)
}

// parseWrites reads a restart's writes: "write" or a verb, then
// optionally the resource, its status, or the resource itself.
func (s Scenario) parseWrites(st *Step, words string) error {
	what, rest, _ := strings.Cut(words, " ")
	if what != "write" {
		if !slices.Contains(writeVerbs, what) {
			return fmt.Errorf("writes %q: want write or a verb (%s)", words, strings.Join(writeVerbs, ", "))
		}
		st.Verbs = []string{what}
	}
	if rest == "" {
		return nil
	}
	res, notSub := strings.CutSuffix(rest, " (not a subresource)")
	res, status := strings.CutSuffix(res, "/status")
	var err error
	if st.Resource, err = s.resource(res); err != nil {
		return err
	}
	switch {
	case notSub:
		st.Subresource = "-"
	case status:
		st.Subresource = "status"
	}
	return nil
}

func (s Scenario) client(name string) (string, error) {
	if !slices.Contains(s.Clients, name) {
		return "", fmt.Errorf("client %q: not one of the scenario's clients (%s)", name, strings.Join(s.Clients, ", "))
	}
	return name, nil
}

func (s Scenario) resource(name string) (string, error) {
	if !slices.Contains(s.Resources, name) {
		return "", fmt.Errorf("resource %q: not one of the scenario's resources (%s)", name, strings.Join(s.Resources, ", "))
	}
	return name, nil
}

// seconds reads "1.25" as seconds, to the millisecond.
func seconds(v string) (time.Duration, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "s"), 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%q: want seconds", v)
	}
	return time.Duration(f*1000+0.5) * time.Millisecond, nil
}

// lag reads a lagging apiserver's lag: a duration, and at least 1 ms (the
// words say it lags: "0.00s behind" is a lag under 5 ms).
func lag(v string) (time.Duration, error) {
	d, err := duration(v)
	return max(d, time.Millisecond), err
}

// duration reads "0.03s" or "30ms".
func duration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: want a duration (0.03s, 30ms)", v)
	}
	return d.Round(time.Millisecond), nil
}

// EncodeText is the input of the scenario's space for a schedule in words
// (ParseSchedule), and the schedule it decodes to: the nearest the layout
// holds. A schedule Schedule.String printed (a report's) encodes to one
// that prints the same; a duration the layout cannot hold (latency 30ms
// where it holds 26 ms and 37 ms) becomes the nearest it can, which the
// returned schedule shows. An error names the part the space cannot hold
// at all (ordinary latency outside RealisticLatency, a fault outside
// Realistic's spaces, a second fault, more than MaxSteps steps) and what
// it would replay as instead.
func (s Scenario) EncodeText(text string) ([]byte, Schedule, error) {
	want, err := s.ParseSchedule(text)
	if err != nil {
		return nil, Schedule{}, err
	}
	b := s.Encode(want)
	got := s.Decode(b)
	for k, v := range want.Knobs {
		if got.Knobs[k] != v {
			return nil, got, fmt.Errorf("knob %s=%d would replay as %d", k, v, got.Knobs[k])
		}
	}
	if len(want.Steps) > MaxSteps {
		return nil, got, fmt.Errorf("space %v holds at most %d steps: %q is not held", s.Space, MaxSteps, want.Steps[MaxSteps])
	}
	for i, st := range want.Steps {
		if i >= len(got.Steps) || !sameShape(st, got.Steps[i]) {
			instead := "nothing"
			if i < len(got.Steps) {
				instead = fmt.Sprintf("%q", got.Steps[i])
			}
			return nil, got, fmt.Errorf("space %v cannot hold step %d, %q: it would replay as %s", s.Space, i+1, st, instead)
		}
		if got.Steps[i].String() != st.String() {
			s.nudge(b, i, st)
		}
	}
	return b, s.Decode(b), nil
}

// sameShape reports whether two steps differ at most in their durations.
func sameShape(a, b Step) bool {
	a.Start, a.Length, a.Delay, a.Lag = 0, 0, 0, 0
	b.Start, b.Length, b.Delay, b.Lag = 0, 0, 0, 0
	return reflect.DeepEqual(normalized(Schedule{Steps: []Step{a}}), normalized(Schedule{Steps: []Step{b}}))
}

// nudge looks, among the bytes of step i's start, length and delay (or
// lag) in b, for a record that prints as want does: the nearest byte for
// each alone can print a window's end 10 ms off, and a start printed as
// 0.00s may be any of the first dozen bytes.
func (s Scenario) nudge(b []byte, i int, want Step) {
	width, param := stepBytes, byte(2) // LagOnly, LagAndLoss: 6 bits above bit 2
	if s.Space.anchored() {
		width, param = realisticStepBytes, 3 // 5 bits above bit 3
	}
	off := len(s.Knobs) + i*width
	if off+width > len(b) {
		return
	}
	bd := s.Bounds.orDefault()
	cs := func(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }
	var starts, lengths []byte
	for v := 0; v <= 255; v++ {
		if cs(quad(byte(v), 0, bd.MaxStart)) == cs(want.Start) {
			starts = append(starts, byte(v))
		}
	}
	for v := 0; v <= 255; v++ {
		for _, st := range starts {
			if cs(quad(st, 0, bd.MaxStart)+quad(byte(v), MinLength, bd.MaxLength)) == cs(want.End()) || v == 255 {
				lengths = append(lengths, byte(v))
				break
			}
		}
	}
	r := b[off : off+width]
	start, length, act := r[2], r[3], r[4]
	low := act & (1<<param - 1)
	text := want.String()
	for dp := 0; dp <= 4; dp++ {
		p := int(act>>param) + []int{0, -1, 1, -2, 2}[dp]
		r[4] = low | clampByte(p, 255>>param)<<param
		for _, st := range starts {
			for _, l := range lengths {
				r[2], r[3] = st, l
				if steps := s.Decode(b).Steps; i < len(steps) && steps[i].String() == text {
					return
				}
			}
		}
	}
	r[2], r[3], r[4] = start, length, act
}

func clampByte(v, most int) byte { return byte(min(max(v, 0), most)) }
