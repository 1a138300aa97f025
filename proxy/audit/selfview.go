package audit

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// SelfStale is a write sent from a view older than its writer's own last
// acknowledged write to the same object: its cache had not yet shown it
// what it had itself written, and it acted anyway. It is the stale-cache
// bug controller-runtime's read-your-writes cache exists for, and the most
// common one: a reconcile that starts from a cached object older than the
// previous reconcile's status write. Whether it lost anything is in
// Replaced: a write that met 409 Conflict (a locked write from that view)
// stored nothing, and one that set only other fields replaced none of the
// writer's own.
type SelfStale struct {
	At time.Time `json:"at"`
	WriteRef
	Code   int    `json:"code"`             // its answer
	SentRV string `json:"sentRV,omitempty"` // its precondition, "" for none
	RV     string `json:"rv,omitempty"`     // what it stored, "" when it stored nothing
	View   string `json:"view"`             // the newest of the object its writer had been sent ("" for none)
	// Own is the writer's own last acknowledged write to the object: its
	// resourceVersion, when its answer came, and what it was.
	Own            string    `json:"own"`
	OwnAt          time.Time `json:"ownAt"`
	OwnVerb        string    `json:"ownVerb"`
	OwnSubresource string    `json:"ownSubresource,omitempty"`
	OwnCaller      string    `json:"ownCaller,omitempty"`
	// Replaced are the fields the write stored with a value other than
	// the one the writer's own unseen writes had given them.
	Replaced []Replaced `json:"replaced,omitempty"`
}

// Replaced is one field a SelfStale write replaced.
type Replaced struct {
	Path  string `json:"path"`
	Value string `json:"value"` // what the stale write set
	Own   string `json:"own"`   // the value its own unseen write had set
	OwnRV string `json:"ownRV"` // that write's resourceVersion
	// Restored says a later stored write (by any client) set the field
	// back to Own: the loss did not last.
	Restored bool `json:"restored,omitempty"`
}

// Stored reports whether the write was applied.
func (s SelfStale) Stored() bool { return s.RV != "" }

func (s SelfStale) String() string {
	var b strings.Builder
	b.WriteString(s.header())
	for _, r := range s.Replaced {
		b.WriteString("; " + r.change(0))
	}
	return b.String()
}

// header names the write, its view and the own write it had not seen.
func (s SelfStale) header() string {
	obj, verb, site := describe(s.Resource, s.Namespace, s.Name, s.Verb, s.Subresource, s.Caller)
	lock := "no precondition"
	if s.SentRV != "" {
		lock = "precondition rv " + s.SentRV
	}
	outcome := fmt.Sprintf("answered %d", s.Code)
	if s.Stored() {
		outcome = "stored at rv " + s.RV
	}
	own := s.OwnVerb
	if s.OwnSubresource != "" {
		own += " " + s.OwnSubresource
	}
	if s.OwnCaller != "" {
		own += " at " + s.OwnCaller
	}
	if s.View == "" {
		return fmt.Sprintf("%s %s %s%s (%s, %s) sent having been shown no version of it, though its own %s had stored rv %s",
			s.Client, verb, obj, site, lock, outcome, own, s.Own)
	}
	return fmt.Sprintf("%s %s %s%s (%s, %s) sent from a view at rv %s, older than its own %s at rv %s",
		s.Client, verb, obj, site, lock, outcome, s.View, own, s.Own)
}

func (r Replaced) change(width int) string {
	v, o := r.Value, r.Own
	if width > 0 {
		v, o = cutAround(v, o, width)
	}
	restored := ""
	if r.Restored {
		restored = " (restored later)"
	}
	return fmt.Sprintf("%s=%s replaced its own %s of rv %s%s", r.Path, v, o, r.OwnRV, restored)
}

// ack is a stored write: its resourceVersion, and when its answer came.
type ack struct {
	r        *trace.Request
	rv       uint64
	answered time.Time
}

// selfStale finds the SelfStale writes of tr, in the order they were sent.
//
// A write W (an update or patch, not a dry run, answered) by client C to
// object O of a resource C reads at all (a watch event of it released to C,
// or a GET or LIST of it answered: one C never reads, an event recorder's
// Events, has no cache to be behind), sent at t, is one when C's view of O at t (trace.Views, or W's
// resourceVersion precondition if newer: its writer had that version) is
// older than C's own last write to O acknowledged before t: stored, its answer
// received by C before t (not withheld by a Cut, not abandoned), by the same
// instance of C (a restarted instance did not write what its predecessor
// did), and by the same writer (sameWriter: a server-side apply is behind
// only its own field manager's applies). For a stored W, each field path W
// set is Replaced when the newest stored write to O after C's view and
// before W that set that path (or a path inside or around it) was the same
// writer's and set another value; for an apply, other managers' applies
// are passed over (the apiserver merged them).
func selfStale(tr trace.Trace, views *trace.Views, hasStatus map[string]bool) []selfStaleWrite {
	// Stored writes per object, by resourceVersion.
	stored := map[trace.Object][]ack{}
	var writes []*trace.Request
	for i := range tr.Requests {
		r := &tr.Requests[i]
		if !r.IsWrite() || r.DryRun || r.Code == 0 || r.Name == "" {
			continue
		}
		if r.Verb == "update" || r.Verb == "patch" {
			writes = append(writes, r)
		}
		if rv, err := strconv.ParseUint(r.ReturnedRV, 10, 64); err == nil && r.Code/100 == 2 {
			stored[r.Object()] = append(stored[r.Object()], ack{r, rv, r.Answered()})
		}
	}
	for _, acks := range stored {
		slices.SortFunc(acks, func(a, b ack) int { return cmp.Compare(a.rv, b.rv) })
	}
	// A resource its writer never reads (an event recorder's Events,
	// created then patched) has no cache to be behind.
	reads := trace.NewReaders(tr)
	slices.SortStableFunc(writes, func(a, b *trace.Request) int { return a.Start.Compare(b.Start) })
	acknowledged := func(a ack, w *trace.Request) bool {
		return a.r != w && sameWriter(a.r, w) && !a.r.Unanswered() &&
			a.answered.Before(w.Start) && views.Instance(w.Client, a.answered) == views.Instance(w.Client, w.Start)
	}
	var out []selfStaleWrite
	for _, w := range writes {
		if !reads.Read(w.Client, w.Object()) {
			continue
		}
		obj := w.Object()
		acks := stored[obj]
		// A precondition proves its writer had that version: a write
		// built on its own last write's answer (kube-controller-manager's
		// Job controller updates status on the object its previous update
		// returned) is not behind it, whatever its cache shows.
		view := views.Seen(w.Client, obj, w.Start)
		if sent, err := strconv.ParseUint(w.SentRV, 10, 64); err == nil {
			view = max(view, sent)
		}
		var own *ack
		for i := range acks {
			if acknowledged(acks[i], w) && (own == nil || acks[i].rv > own.rv) {
				own = &acks[i]
			}
		}
		if own == nil || own.rv <= view {
			continue
		}
		s := SelfStale{
			At: w.Start, WriteRef: refOf(w), Code: w.Code, SentRV: w.SentRV, View: rvString(view),
			Own: own.r.ReturnedRV, OwnAt: own.answered, OwnVerb: own.r.Verb, OwnSubresource: own.r.Subresource, OwnCaller: own.r.Caller,
		}
		rv, err := strconv.ParseUint(w.ReturnedRV, 10, 64)
		if err == nil && w.Code/100 == 2 {
			s.RV = w.ReturnedRV
			s.Replaced = replacedOwn(w, rv, view, acks, hasStatus)
		}
		out = append(out, selfStaleWrite{s, w})
	}
	return out
}

// selfStaleWrite is a SelfStale and its request.
type selfStaleWrite struct {
	SelfStale
	w *trace.Request
}

// replacedOwn lists the fields w (stored at rv, from a view at view) set to
// a value other than the one its writer's own newest write to that field
// after the view had set; acks are the object's stored writes by
// resourceVersion.
func replacedOwn(w *trace.Request, rv, view uint64, acks []ack, hasStatus map[string]bool) []Replaced {
	if w.Write == nil {
		return nil
	}
	var out []Replaced
	for _, path := range slices.Sorted(maps.Keys(w.Write.Set)) {
		if skipPath(w, path, hasStatus) {
			continue
		}
		value := w.Write.Set[path]
		// The newest stored write to the path between the view and w.
		for j := len(acks) - 1; j >= 0; j-- {
			x := acks[j]
			if x.rv <= view {
				break
			}
			if x.rv >= rv || x.r.Write == nil {
				continue
			}
			xPath, xVal, ok := overlapping(x.r, path, hasStatus)
			if !ok || (applies(x.r) && applies(w) && !sameWriter(x.r, w)) {
				// Another field manager's apply is merged with w's, not
				// replaced by it.
				continue
			}
			if sameWriter(x.r, w) && !(xPath == path && xVal == value) {
				r := Replaced{Path: path, Value: value, Own: xVal, OwnRV: x.r.ReturnedRV}
				// Restored: a later stored write set it back.
				for _, l := range acks {
					if l.rv > rv && l.r.Write != nil {
						if v, ok := l.r.Write.Set[xPath]; ok && !skipPath(l.r, xPath, hasStatus) && v == xVal {
							r.Restored = true
						}
					}
				}
				out = append(out, r)
			}
			break
		}
	}
	return out
}

// sameWriter reports whether a and b were written by one writer: the same
// client and, where either is a server-side apply, both applies of the same
// field manager. A client that runs several controllers, each applying the
// fields it owns under a manager of its own (cert-manager's certificates
// controllers), is several writers: the apiserver merges one manager's
// apply with another's fields (a list of conditions keyed by type keeps
// the items the other manager owns), so an apply cannot replace a value
// another manager applied, and it is behind only its own manager's writes.
func sameWriter(a, b *trace.Request) bool {
	if a.Client != b.Client {
		return false
	}
	if !applies(a) && !applies(b) {
		return true
	}
	return applies(a) && applies(b) && a.Write.Manager == b.Write.Manager
}

// applies reports whether r is a server-side apply.
func applies(r *trace.Request) bool { return r.Write != nil && r.Write.Patch == "apply" }

// behind is the row's BEHIND OWN WRITE cell: its writes sent from a view
// older than the writer's own last write, and how many of them replaced
// that write's values.
func (r Row) behind() string { return r.Behind() }

// Behind is the row's writes sent from a view older than the writer's own
// last write, and how many of them replaced that write's values: "0", or
// "3 (1 replaced own)".
func (r Row) Behind() string {
	if r.SelfStale == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%d replaced own)", r.SelfStale, r.SelfReplaced)
}

// writeSelfStale writes, for a terminal, the writes sent from a view older
// than their writer's own last write: the first of each writer, call site,
// verb and object whole (with the fields it replaced), the others like it
// counted.
func (r Report) writeSelfStale(w io.Writer) error {
	if len(r.SelfStale) == 0 {
		_, err := fmt.Fprintln(w, "no write was sent from a view older than its writer's own last write")
		return err
	}
	stored, replaced := 0, 0
	for _, s := range r.SelfStale {
		if s.Stored() {
			stored++
		}
		if len(s.Replaced) > 0 {
			replaced++
		}
	}
	fmt.Fprintf(w, "writes sent from a view older than the writer's own last write (%d: %d stored, %d replaced values of that own write):\n", len(r.SelfStale), stored, replaced)
	// Those that replaced own values first: they are the ones that lose.
	order := slices.Clone(r.SelfStale)
	slices.SortStableFunc(order, func(a, b SelfStale) int { return cmp.Compare(len(b.Replaced), len(a.Replaced)) })
	type kind struct {
		overwriteKind
		stored bool
	}
	shown := map[kind]bool{}
	more := map[kind]int{}
	var kinds []kind
	for _, s := range order {
		k := kind{overwriteKind{s.Client, s.Caller, s.Verb, s.Subresource, s.Resource, s.Namespace, s.Name}, s.Stored()}
		if shown[k] {
			more[k]++
			continue
		}
		shown[k] = true
		kinds = append(kinds, k)
		fmt.Fprintf(w, "  t%+.3fs %s\n", s.At.Sub(r.Start).Seconds(), s.header())
		for _, c := range s.Replaced {
			if _, err := fmt.Fprintf(w, "      %s\n", c.change(48)); err != nil {
				return err
			}
		}
	}
	for _, k := range kinds {
		if n := more[k]; n > 0 {
			what := "stored"
			if !k.stored {
				what = "not stored"
			}
			if _, err := fmt.Fprintf(w, "  ... and %d more like it (%s): %s (each in --json and the picture)\n", n, what, k.overwriteKind); err != nil {
				return err
			}
		}
	}
	return nil
}
