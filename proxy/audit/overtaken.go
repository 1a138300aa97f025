package audit

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Overtaken is a write's answer that reached its client after the client
// had already been shown a newer version of the object (its watch event or
// GET at a higher resourceVersion): another write, committed after this one,
// overtook its answer. By itself it harms nothing, as a client's cache is
// fed by its watch. It matters to a client that puts a write's answer into
// its cache (an informer write-back: `GetIndexer().Update(answer)`, which
// compares no resourceVersions): its cache then goes back to an older
// object than it had, and stays there until the object is shown to it
// again (Lasting when it never was). Argo Rollouts v1.7's write-backs of
// ReplicaSets right after its patches (rollout/replicaset.go:42, :71,
// controller.go:1023 at v1.7.2; removed by argo-rollouts#4044) are this
// case. A write-back made later, at the end of a reconcile (its Rollouts
// until v1.10, argo-rollouts#4073), is not: the trace does not show when it
// happens, and its answer was not overtaken when it came. A slow answer (a
// Slow rule, APF queueing, a slow webhook) is what opens the window; under
// ordinary latency it needs another writer within the answer's flight.
type Overtaken struct {
	// At is when the answer reached its client; Sent when the write was sent.
	At   time.Time `json:"at"`
	Sent time.Time `json:"sent"`
	WriteRef
	// RV is the answer's resourceVersion; View the newest version of the
	// object itself the client had been shown when the answer came.
	RV   string `json:"rv"`
	View string `json:"view"`
	// Held is how long a Slow rule held the answer (0: none did).
	Held time.Duration `json:"held,omitempty"`
	// Next is when the client was next shown the object (an event, a GET,
	// a list of its scope); zero when it never was. Restarted says the
	// client was restarted after the answer (its cache went with it).
	Next      time.Time `json:"next,omitzero"`
	Restarted bool      `json:"restarted,omitempty"`
}

// Lasting reports whether nothing after the answer showed its client the
// object again, and the client was not restarted: a cache that took the
// answer in holds it to the end of the trace.
func (o Overtaken) Lasting() bool { return o.Next.IsZero() && !o.Restarted }

func (o Overtaken) String() string {
	obj, verb, site := describe(o.Resource, o.Namespace, o.Name, o.Verb, o.Subresource, o.Caller)
	held := ""
	if o.Held > 0 {
		held = fmt.Sprintf(", held %.3fs by a slow-answer fault", o.Held.Seconds())
	}
	after := "it was never shown the object again: a cache that takes its answers in (a write-back) holds rv " + o.RV + " to the end"
	switch {
	case !o.Next.IsZero():
		after = fmt.Sprintf("it was shown the object again %.3fs later", o.Next.Sub(o.At).Seconds())
	case o.Restarted:
		after = "it was restarted before it was shown the object again"
	}
	return fmt.Sprintf("%s %s %s%s: its answer, rv %s, arrived %.3fs after it was sent%s, when the client had been shown rv %s; %s",
		o.Client, verb, obj, site, o.RV, o.At.Sub(o.Sent).Seconds(), held, o.View, after)
}

// overtaken finds the Overtaken answers of tr, in the order they arrived:
// every stored create, update or patch of a named object (not a dry run)
// whose answer its client received (trace.Request.Unanswered is false) at a
// moment when views showed that client, by the same instance, the object
// itself at a higher resourceVersion than the answer's. An answer that came
// after its client had been shown the object's deletion is left out (a
// patch that removed its last finalizer is overtaken by its own DELETED
// event): the object is gone.
func overtaken(tr trace.Trace, views *trace.Views) []Overtaken {
	// The DELETED events each client was shown of each object (a name can
	// be deleted and made again).
	type deletion struct {
		at time.Time
		rv uint64
	}
	deleted := map[string][]deletion{}
	for i := range tr.Events {
		e := &tr.Events[i]
		if _, rv, ok := e.Shown(); ok && e.Type == "DELETED" {
			k := e.Client + "|" + e.Object().String()
			deleted[k] = append(deleted[k], deletion{e.Released, rv})
		}
	}
	out := []Overtaken{}
	for i := range tr.Requests {
		r := &tr.Requests[i]
		if !r.IsWrite() || r.DryRun || r.Name == "" || r.Code/100 != 2 || r.Unanswered() {
			continue
		}
		if r.Verb != "create" && r.Verb != "update" && r.Verb != "patch" {
			continue
		}
		rv, err := strconv.ParseUint(r.ReturnedRV, 10, 64)
		if err != nil {
			continue
		}
		obj, at := r.Object(), r.Answered()
		if views.Instance(r.Client, at) != views.Instance(r.Client, r.Start) {
			continue // the instance that sent it is gone
		}
		view := views.SeenItself(r.Client, obj, at)
		if view <= rv {
			continue
		}
		if slices.ContainsFunc(deleted[r.Client+"|"+obj.String()], func(d deletion) bool { return d.at.Before(at) && d.rv > rv }) {
			continue // overtaken by the object's deletion (its last finalizer removed): it is gone
		}
		o := Overtaken{
			At: at, Sent: r.Start, WriteRef: refOf(r), RV: r.ReturnedRV, View: rvString(view), Held: r.Held,
		}
		if next, ok := views.ShownAfter(r.Client, obj, at); ok {
			o.Next = next
		}
		for _, rs := range tr.Restarts {
			if rs.Client == r.Client && rs.At.After(at) {
				o.Restarted = true
			}
		}
		out = append(out, o)
	}
	slices.SortStableFunc(out, func(a, b Overtaken) int { return a.At.Compare(b.At) })
	return out
}

// maxOvertakenShown bounds the answers WriteTable lists one by one.
const maxOvertakenShown = 10

// writeOvertaken writes the overtaken answers for a terminal: the lasting
// ones first (up to maxOvertakenShown), then a count of the rest.
func (r Report) writeOvertaken(w io.Writer) error {
	if len(r.Overtaken) == 0 {
		_, err := fmt.Fprintln(w, "no write's answer reached its client after a newer version of the object had")
		return err
	}
	lasting := 0
	for _, o := range r.Overtaken {
		if o.Lasting() {
			lasting++
		}
	}
	fmt.Fprintf(w, "answers older than what their client had already been shown (%d; %d never followed by a newer version of the object):\n", len(r.Overtaken), lasting)
	shown := 0
	for _, pass := range []bool{true, false} {
		for _, o := range r.Overtaken {
			if o.Lasting() != pass || shown == maxOvertakenShown {
				continue
			}
			shown++
			if _, err := fmt.Fprintf(w, "  t%+.3fs %s\n", o.At.Sub(r.Start).Seconds(), o); err != nil {
				return err
			}
		}
	}
	if n := len(r.Overtaken) - shown; n > 0 {
		_, err := fmt.Fprintf(w, "  ... and %d more (each in --json and the picture)\n", n)
		return err
	}
	return nil
}
