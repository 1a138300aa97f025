package fuzz

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Bounds of the seeds derived from reference runs (the corpus is replayed at
// every campaign start, so they must stay few).
const (
	// MaxReferenceSettings is how many knob settings get a reference run:
	// the first ones, in declaration order with the first knob varying
	// fastest.
	MaxReferenceSettings = 4
	// MaxReferencePositions is how many positions (the client's first
	// MODIFIED events of a resource, or its first writes) a reference run
	// gives, per client, resource and knob setting.
	MaxReferencePositions = 8
	// MaxReferenceSeeds bounds the seeds of one target.
	MaxReferenceSeeds = 40
	// ReferenceSeedsReplay is about how long replaying a target's reference
	// seeds may take: fewer seeds for a scenario whose executions are long
	// (at least MinReferenceSeeds).
	ReferenceSeedsReplay = time.Minute
	MinReferenceSeeds    = 8
)

// referenceSeeds runs the scenario once without lag for each of the first
// knob settings and derives, from each run's trace, one schedule per client,
// watched resource and position in the clean run (right after its Nth
// MODIFIED, ADDED or DELETED event, or its Nth write) for each action of the
// space (families): in AnchoredLoss drop, then hold; in Realistic first
// the client's own writes seen late (every event of a resource it writes
// held from just before its Nth write of it), then relist, restart right
// after, restart before the answer, a relist across a DELETED event, ADDED
// events held, each of the first three onto an apiserver Bounds.MaxDelay
// behind (Sieve's time travel), break, hold, then DELETED events held, and
// a restart before the answer onto a lagging apiserver at the client's Nth
// create of each watched resource; in Composed the answer faults besides,
// and a lost answer at its Nth create of each watched resource. Each holds
// its window for Bounds.MaxLength (the scenario's retry span), cut as
// decoding cuts it. The actions take turns: every action at its first
// position, stronger actions first, then every action at its next, so that
// a campaign replaying its corpus meets the likeliest seeds early and a cut
// list still has every action; within an action, the first knob setting's
// positions come before the next setting's. The own writes' first turn is
// every resource each client writes, at its first write of it, and at each
// later create of one, besides the limit. The list is cut so that replaying it takes about
// ReferenceSeedsReplay (a reference run's time plus a window per seed),
// between MinReferenceSeeds and MaxReferenceSeeds. This is Sieve's learning
// run, fed to go test -fuzz as seed corpus. In RealisticLatency the first
// turn is followed by the ordinary-latency seeds (latencySeeds, from the
// reference runs' median watch latency up), besides that limit.
func referenceSeeds(ctx context.Context, e *Env) ([]Schedule, error) {
	type ref struct {
		knobs   map[string]int
		tr      trace.Trace
		mark    time.Time
		latency []time.Duration
	}
	var refs []ref
	var took time.Duration
	for _, knobs := range knobSettings(e.s.Knobs, MaxReferenceSettings) {
		// A run the learned oracles' references already made serves.
		res := e.refRuns[fmt.Sprint(knobs)]
		if res == nil {
			var err error
			if res, err = e.Run(ctx, Schedule{Knobs: knobs}, Retries(3)); err != nil {
				return nil, fmt.Errorf("reference run %v: %w", knobs, err)
			}
		}
		refs = append(refs, ref{knobs, res.Trace, res.Mark, watchLatencies(res)})
		took += res.Elapsed
	}
	b := e.s.Bounds.orDefault()
	// A seed's execution: a reference run's, plus its window.
	each := took/time.Duration(max(1, len(refs))) + min(b.MaxLength, b.MaxLagEnd)
	limit := min(MaxReferenceSeeds, max(MinReferenceSeeds, int(ReferenceSeedsReplay/each)))
	byFamily := make([][]Schedule, len(e.families()))
	for _, r := range refs {
		for i, seeds := range e.Anchored(r.knobs, r.tr, r.mark, MaxReferencePositions) {
			byFamily[i] = append(byFamily[i], seeds...)
		}
	}
	// The actions take turns. In RealisticLatency, ordinary latency
	// (latencySeeds, at what the reference runs measured) comes after the
	// first turn.
	var latencies []time.Duration
	for _, r := range refs {
		latencies = append(latencies, r.latency...)
	}
	slices.Sort(latencies)
	// The own family's first turn is every resource each client writes, at
	// its first write of it in the first reference run, and each later
	// create of one, besides the limit.
	first := make([]int, len(byFamily))
	for i, fam := range e.families() {
		first[i] = 1
		if fam.own && len(refs) > 0 {
			_, n := e.ownHeld(refs[0].knobs, refs[0].tr, refs[0].mark, MaxReferencePositions)
			first[i] = max(1, n)
			limit += n
		}
	}
	out := takeTurns(byFamily, first, limit, e.s.latencySeeds(median(latencies)))
	return out, nil
}

// takeTurns lists the families' seeds taking turns, stronger families
// first: family i gives first[i] seeds in the first turn, one in each
// later one, until limit seeds are listed or none is left; afterFirst
// follows the first turn, besides the limit.
func takeTurns(byFamily [][]Schedule, first []int, limit int, afterFirst []Schedule) []Schedule {
	next := make([]int, len(byFamily)) // each family's next seed
	var out []Schedule
	for n := 0; len(out) < limit; n++ {
		more := false
		for i, seeds := range byFamily {
			take := 1
			if n == 0 {
				take = first[i]
			}
			for ; take > 0 && next[i] < len(seeds) && len(out) < limit; take-- {
				out = append(out, seeds[next[i]])
				next[i]++
				more = true
			}
		}
		if n == 0 {
			out = append(out, afterFirst...)
			limit += len(afterFirst)
		}
		if !more {
			break
		}
	}
	return out
}

// family is one kind of anchored schedule the reference runs give.
type family struct {
	act    proxy.Action
	writes bool          // anchored to the client's writes, else to its events of typ
	lag    time.Duration // onto an apiserver this far behind; a Slow answer's hold
	typ    string        // the event type anchored to: "" is MODIFIED
	code   int           // a Reject's status
	// creates anchors a writes family to the client's creates of each
	// watched resource in turn (Step.Resource, Verbs create), not to its
	// writes of any kind: a controller's creates of its children come
	// after its status writes and its Events, often past the first
	// positions, and a create whose answer is lost, or whose writer
	// restarts before its answer, is the classic source of duplicates
	// (generateName).
	creates bool
	// own anchors a Hold to the client's own writes of each watched
	// resource: every event of that resource (ADDED, MODIFIED, DELETED) the
	// client is sent from just before its Nth write of it is held, so that
	// the event of that write, and everything after it on that watch,
	// reaches the client late: the writer's cache without its own last
	// write, the window controller expectations exist for (a create whose
	// ADDED event is late, a status write whose MODIFIED event is late).
	// Its seeds run resources before positions: every resource the client
	// writes at its first write of it and at each later create of one,
	// then at its second write, its third.
	own bool
}

// eventKinds are the types an own family's Hold holds: every event that
// carries an object (not a BOOKMARK, which the trace does not count).
var eventKinds = []string{"ADDED", "MODIFIED", "DELETED"}

// families are the kinds of anchored schedules of the scenario's space,
// stronger ones first; none outside AnchoredLoss and Realistic's spaces.
// Besides MODIFIED events and writes, faults are anchored to ADDED and
// DELETED events: a relist across a DELETED event (the informer's
// tombstone, DeletedFinalStateUnknown), the ADDED and DELETED events of a
// controller's own creations and deletions arriving late (the window
// controller expectations exist for). In Composed, faults on the answers
// to writes too: lost after it was applied, slow, refused with etcd's 500.
func (e *Env) families() []family {
	b := e.s.Bounds.orDefault()
	switch e.s.Space {
	case AnchoredLoss:
		return []family{{act: proxy.Drop}, {act: proxy.Hold}}
	case Realistic, RealisticLatency, Composed:
		fams := []family{{act: proxy.Hold, own: true}, {act: proxy.Expire}, {act: proxy.Freeze, writes: true}, {act: proxy.Cut, writes: true}}
		if e.s.Space == Composed {
			fams = append(fams, family{act: proxy.Lose, writes: true}, family{act: proxy.Slow, writes: true, lag: MaxSlowAnswer},
				family{act: proxy.Lose, writes: true, creates: true})
		}
		fams = append(fams, family{act: proxy.Expire, typ: "DELETED"}, family{act: proxy.Hold, typ: "ADDED"},
			family{act: proxy.Freeze, writes: true, lag: b.MaxDelay}, family{act: proxy.Cut, writes: true, lag: b.MaxDelay},
			family{act: proxy.Cut, writes: true, creates: true, lag: b.MaxDelay},
			family{act: proxy.Expire, lag: b.MaxDelay}, family{act: proxy.Break}, family{act: proxy.Hold},
			family{act: proxy.Hold, typ: "DELETED"})
		if e.s.Space == Composed {
			fams = append(fams, family{act: proxy.Reject, writes: true, code: 500}, family{act: proxy.Reset, writes: true})
		}
		return fams
	}
	return nil
}

// Anchored derives, from one no-fault run at knobs (its trace and mark),
// the one-step schedules of each family of the scenario's space (in the
// families' order), per client, watched resource and position (right after
// the Nth MODIFIED, ADDED or DELETED event, or the Nth write), at most
// positions of them, each holding its window for Bounds.MaxLength cut as
// decoding cuts it: the reference seeds' schedules, and a truth table's
// patterns (package fuzz/truthtable).
func (e *Env) Anchored(knobs map[string]int, tr trace.Trace, mark time.Time, positions int) [][]Schedule {
	b := e.s.Bounds.orDefault()
	fams := e.families()
	out := make([][]Schedule, len(fams))
	for i, fam := range fams {
		if fam.own {
			out[i], _ = e.ownHeld(knobs, tr, mark, positions)
			continue
		}
		for _, c := range e.s.Clients {
			for _, res := range e.s.Resources {
				typ := or(fam.typ, "MODIFIED")
				n := countEvents(tr, c, res, typ, mark)
				switch {
				case fam.creates:
					n = countCreates(tr, c, res, mark)
				case fam.writes:
					n = countWrites(tr, c, mark)
				}
				for pos := range min(n, positions) {
					st := Step{Client: c, Action: fam.act, After: pos, Length: min(b.MaxLength, b.MaxLagEnd), Lag: fam.lag, Code: fam.code}
					if fam.act.IsAnswer() {
						st.Lag, st.Delay = 0, fam.lag
					}
					switch {
					case fam.creates:
						st.Resource, st.Verbs, st.Subresource = res, []string{"create"}, "-"
					case !fam.writes:
						st.Resource, st.Types = res, []string{typ}
					}
					if st.IsFault() {
						st.Length = min(st.Length, b.faultEnd())
					}
					out[i] = append(out[i], Schedule{Knobs: knobs, Steps: []Step{st}})
				}
				if fam.writes && !fam.creates {
					break // writes are the client's, whatever the resource
				}
			}
		}
	}
	return out
}

// ownHeld derives the own family's seeds from one no-fault run: a Hold of
// every event of a watched resource the client is sent from just before
// one of its writes of that resource, for Bounds.MaxLength cut as decoding
// cuts it. The first turn (its length is first) is each client's first
// write of each resource it wrote, then each of its later creates of one
// (the ADDED event of a controller's own creation late, the window
// controller expectations exist for: a create past the first is often a
// second child, an experiment's ReplicaSet after the canary's); then its
// 2nd write of each resource, its 3rd, ..., each write given once, at
// most positions writes or creates per client and resource.
func (e *Env) ownHeld(knobs map[string]int, tr trace.Trace, mark time.Time, positions int) (out []Schedule, first int) {
	b := e.s.Bounds.orDefault()
	type key struct{ client, resource string }
	var keys []key
	writes := map[key][]ownWrite{}
	for _, c := range e.s.Clients {
		for _, res := range e.s.Resources {
			k := key{c, res}
			keys = append(keys, k)
			writes[k] = ownWrites(tr, c, res, mark)
		}
	}
	given := map[key]map[int]bool{}
	give := func(k key, pos int) {
		if given[k] == nil {
			given[k] = map[int]bool{}
		}
		if given[k][pos] {
			return
		}
		given[k][pos] = true
		st := Step{Client: k.client, Resource: k.resource, Types: eventKinds, Action: proxy.Hold,
			After: eventsBefore(tr, k.client, k.resource, mark, writes[k][pos].start), Length: min(b.MaxLength, b.MaxLagEnd)}
		out = append(out, Schedule{Knobs: knobs, Steps: []Step{st}})
	}
	for _, k := range keys {
		if len(writes[k]) > 0 && positions > 0 {
			give(k, 0)
		}
	}
	for _, k := range keys {
		creates := 0
		for pos, w := range writes[k] {
			if !w.create {
				continue
			}
			if creates++; creates > positions {
				break
			}
			give(k, pos)
		}
	}
	first = len(out)
	for pos := range positions {
		for _, k := range keys {
			if pos < len(writes[k]) {
				give(k, pos)
			}
		}
	}
	return out, first
}

// ownWrite is one of a client's writes of a resource: when it was sent,
// and whether it created an object (not a subresource).
type ownWrite struct {
	start  time.Time
	create bool
}

// ownWrites are the client's writes of resource (any verb, subresources
// too, not a dry run) after the mark, in the order they were sent.
func ownWrites(tr trace.Trace, client, resource string, mark time.Time) []ownWrite {
	var out []ownWrite
	for i := range tr.Requests {
		r := &tr.Requests[i]
		if r.Client == client && r.Resource == resource && r.IsWrite() && !r.DryRun && !r.Start.Before(mark) {
			out = append(out, ownWrite{start: r.Start, create: r.Verb == "create" && r.Subresource == ""})
		}
	}
	slices.SortFunc(out, func(a, b ownWrite) int { return a.start.Compare(b.start) })
	return out
}

// eventsBefore is how many events of resource (ADDED, MODIFIED, DELETED)
// the client was sent after the mark and before t.
func eventsBefore(tr trace.Trace, client, resource string, mark, t time.Time) int {
	n := 0
	for _, ev := range tr.Events {
		if ev.Client == client && ev.Resource == resource && slices.Contains(eventKinds, ev.Type) &&
			ev.Fate == trace.Released && !ev.Arrived.Before(mark) && ev.Arrived.Before(t) {
			n++
		}
	}
	return n
}

// countEvents is how many events of typ of resource the client was sent
// after the mark.
func countEvents(tr trace.Trace, client, resource, typ string, mark time.Time) int {
	n := 0
	for _, ev := range tr.Events {
		if ev.Client == client && ev.Resource == resource && ev.Type == typ && ev.Fate == trace.Released && !ev.Arrived.Before(mark) {
			n++
		}
	}
	return n
}

// countWrites is how many writes the client sent after the mark.
func countWrites(tr trace.Trace, client string, mark time.Time) int {
	n := 0
	for i := range tr.Requests {
		r := &tr.Requests[i]
		if r.Client == client && r.IsWrite() && !r.DryRun && !r.Start.Before(mark) {
			n++
		}
	}
	return n
}

// countCreates is how many objects of resource the client created (not a
// subresource, not a dry run) after the mark.
func countCreates(tr trace.Trace, client, resource string, mark time.Time) int {
	n := 0
	for i := range tr.Requests {
		r := &tr.Requests[i]
		if r.Client == client && r.Verb == "create" && r.Resource == resource && r.Subresource == "" && !r.DryRun && !r.Start.Before(mark) {
			n++
		}
	}
	return n
}

// KnobSettings lists at most max of the scenario's knob settings, those with
// the fewest knobs away from their first value first; the first is every
// knob at its first value (an empty map).
func (e *Env) KnobSettings(max int) []map[string]int { return knobSettings(e.s.Knobs, max) }

// knobSettings lists max knob settings, those with the fewest knobs away from
// zero first.
func knobSettings(knobs []Knob, max int) []map[string]int {
	out := []map[string]int{{}}
	for _, k := range knobs {
		var next []map[string]int
		for v := range k.Values {
			for _, c := range out {
				m := map[string]int{k.Name: v}
				for kk, vv := range c {
					m[kk] = vv
				}
				next = append(next, m)
			}
		}
		out = next
	}
	slices.SortStableFunc(out, func(a, b map[string]int) int { return weight(a) - weight(b) })
	return out[:min(len(out), max)]
}

// weight orders settings: fewest knobs away from zero first.
func weight(m map[string]int) int {
	n := 0
	for _, v := range m {
		if v != 0 {
			n++
		}
	}
	return n
}

// referenceSeedsFile is where the coordinator lists the reference seeds (hex,
// one per line) for the workers, which report where a finding's input came
// from.
func referenceSeedsFile(target string) string {
	return filepath.Join(campaignDir(), "reference-seeds-"+target+".hex")
}

func writeReferenceSeeds(target string, inputs [][]byte) {
	var b strings.Builder
	for _, in := range inputs {
		b.WriteString(hex.EncodeToString(in) + "\n")
	}
	if os.MkdirAll(campaignDir(), 0o700) == nil {
		_ = os.WriteFile(referenceSeedsFile(target), []byte(b.String()), 0o600)
	}
}

// referenceSeedIndex is the index of input among the reference seeds the
// coordinator listed, or -1.
func referenceSeedIndex(target string, input []byte) int {
	b, err := os.ReadFile(referenceSeedsFile(target))
	if err != nil {
		return -1
	}
	return slices.Index(strings.Fields(string(b)), hex.EncodeToString(input))
}
