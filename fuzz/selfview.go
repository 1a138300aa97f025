package fuzz

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/stalefuzz/stalefuzz/proxy/audit"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// SelfViewStats counts, in one execution, the writes sent from a view
// older than their writer's own last acknowledged write to the object
// (audit.SelfStale), by how much they can have lost: what the
// stale-self-view oracle's false-alarm measurement reports.
type SelfViewStats struct {
	// Writes are every such write, stored or not (a locked one met 409).
	Writes int `json:",omitempty"`
	// Replacing are those that replaced a value of the writer's own unseen
	// write; Lasting, those of them where no later write restored one of
	// those values; Judged, those of them where such a field is one the
	// controllers never rewrote in the no-fault reference runs of the knob
	// setting, on a resource the writer reads (the rule of
	// Scenario.LostUpdatesAnyField).
	Replacing, Lasting, Judged int `json:",omitempty"`
}

// Add sums two counts.
func (s SelfViewStats) Add(o SelfViewStats) SelfViewStats {
	return SelfViewStats{s.Writes + o.Writes, s.Replacing + o.Replacing, s.Lasting + o.Lasting, s.Judged + o.Judged}
}

// selfViews sorts the SelfStale writes of tr (audit.Of's) by what they can
// have lost, rewritten being the fields the no-fault reference runs
// rewrote (nil: not known), and returns the violations of the
// stale-self-view oracle: each stored write that replaced a value of its
// writer's own unseen write that no later write restored.
func selfViews(tr trace.Trace, rep audit.Report, rewritten map[string]bool) (SelfViewStats, []Violation, []selfViewWrite) {
	var st SelfViewStats
	var out []Violation
	var writes []selfViewWrite
	reads := trace.NewReaders(tr)
	for _, s := range rep.SelfStale {
		st.Writes++
		if len(s.Replaced) == 0 {
			continue
		}
		st.Replacing++
		var lasting []audit.Replaced
		judged := false
		for _, r := range s.Replaced {
			if r.Restored {
				continue
			}
			lasting = append(lasting, r)
			o := s.Object()
			if rewritten != nil && !rewritten[anyFieldKey(o, r.Path)] && reads.Read(s.Client, o) {
				judged = true
			}
		}
		if len(lasting) == 0 {
			continue
		}
		st.Lasting++
		if judged {
			st.Judged++
		}
		v := Violation{Oracle: "stale-self-view", Subject: s.Object().String(), At: s.At, Message: selfViewMessage(s, lasting)}
		out = append(out, v)
		writes = append(writes, selfViewWrite{kindOf(s, lasting), v.Message})
	}
	return st, out, writes
}

// SelfViewKind is one kind of write behind its writer's own that replaced
// that write's values for good (the stale-self-view oracle's case): the
// writer, its write and the own write it had not seen, each by verb,
// subresource, resource and call site. A false-alarm measurement groups
// such writes by kind (FalseAlarms.SelfViewKinds) so that each kind is read
// once, at its call sites: whether it lost something or only recomputed
// what its own write had set.
type SelfViewKind struct {
	Client string
	// Write and Own are the write and the writer's own unseen write:
	// "patch status certificates.cert-manager.io at sync.go:120".
	Write, Own string
	// Paths are the fields the kind's writes replaced, list indexes
	// dropped, sorted.
	Paths []string
	// Writes and Executions count the writes of this kind and the
	// executions with one.
	Writes, Executions int `json:",omitempty"`
	// First is the message of the first write of this kind
	// (stale-self-view's), FirstExecution its execution (from 1).
	First          string `json:",omitempty"`
	FirstExecution int    `json:",omitempty"`
}

// key is what makes two writes one kind.
func (k SelfViewKind) key() string {
	return k.Client + "\x00" + k.Write + "\x00" + k.Own
}

func (k SelfViewKind) String() string {
	return fmt.Sprintf("%s's %s, behind its own %s, replaced %s", k.Client, k.Write, k.Own, strings.Join(k.Paths, ", "))
}

// selfViewWrite is one write of the stale-self-view oracle's case in an
// execution, with its kind and message.
type selfViewWrite struct {
	kind    SelfViewKind
	message string
}

// listIndex is a list index in a field path.
var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

// kindOf is the kind of s, lasting being what it replaced for good.
func kindOf(s audit.SelfStale, lasting []audit.Replaced) SelfViewKind {
	res := s.Resource
	if s.Group != "" {
		res += "." + s.Group
	}
	site := func(verb, sub, caller string) string {
		out := verb
		if sub != "" {
			out += " " + sub
		}
		out += " " + res
		if caller != "" {
			out += " at " + caller
		}
		return out
	}
	k := SelfViewKind{Client: s.Client, Write: site(s.Verb, s.Subresource, s.Caller), Own: site(s.OwnVerb, s.OwnSubresource, s.OwnCaller)}
	for _, r := range lasting {
		k.Paths = append(k.Paths, listIndex.ReplaceAllString(r.Path, "[]"))
	}
	slices.Sort(k.Paths)
	k.Paths = slices.Compact(k.Paths)
	return k
}

// addSelfViewKinds counts the writes of execution i by kind into kinds,
// keeping their order of first appearance.
func addSelfViewKinds(kinds []SelfViewKind, i int, writes []selfViewWrite) []SelfViewKind {
	seen := map[string]bool{}
	for _, w := range writes {
		key := w.kind.key()
		j := slices.IndexFunc(kinds, func(k SelfViewKind) bool { return k.key() == key })
		if j < 0 {
			k := w.kind
			k.Paths = slices.Clone(k.Paths)
			k.First, k.FirstExecution = w.message, i
			kinds = append(kinds, k)
			j = len(kinds) - 1
		}
		kinds[j].Paths = slices.Compact(slices.Sorted(slices.Values(append(kinds[j].Paths, w.kind.Paths...))))
		kinds[j].Writes++
		if !seen[key] {
			seen[key] = true
			kinds[j].Executions++
		}
	}
	return kinds
}

// judgeSelfViews counts res's writes behind their writer's own
// (Result.SelfViews) and, with Scenario.StaleSelfView, records the
// oracle's violations. The fields the reference runs rewrote are known
// only when the learned oracles made those runs already.
func (e *Env) judgeSelfViews(res *Result) {
	var rewritten map[string]bool
	if ref := e.learnedRefs[fmt.Sprint(res.Schedule.Knobs)]; ref != nil {
		rewritten = ref.rewritten
	}
	var vs []Violation
	res.SelfViews, vs, res.selfViewWrites = selfViews(res.Trace, res.Audit(), rewritten)
	if e.s.StaleSelfView {
		res.Violations = append(res.Violations, vs...)
	}
}

// selfViewMessage says what a stale self-view write replaced for good.
func selfViewMessage(s audit.SelfStale, lasting []audit.Replaced) string {
	var fields []string
	for _, r := range lasting {
		fields = append(fields, fmt.Sprintf("%s=%s over its own %s", r.Path, clip(r.Value), clip(r.Own)))
	}
	view := "having been shown no version of it"
	if s.View != "" {
		view = "from a view at resourceVersion " + s.View
	}
	verb := s.Verb
	if s.Subresource != "" {
		verb += " " + s.Subresource
	}
	return fmt.Sprintf("%s: %s's %s (stored at resourceVersion %s) was sent %s, older than its own write at resourceVersion %s, and replaced %s; no later write restored it",
		s.Object(), s.Client, verb, s.RV, view, s.Own, strings.Join(fields, "; "))
}

// clip cuts a value for a one-line message.
func clip(v string) string {
	if len(v) > 80 {
		return v[:77] + "..."
	}
	return v
}
