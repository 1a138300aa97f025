package trace_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// at is t0 plus ms milliseconds.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func released(client, group, resource, ns, name, rv string, ms int) trace.Event {
	return trace.Event{Client: client, Group: group, Resource: resource, Type: "MODIFIED", Namespace: ns, Name: name,
		ResourceVersion: rv, Arrived: at(ms), Fate: trace.Released, Released: at(ms), Rule: -1}
}

var (
	widgetA = trace.Object{Group: "example.com", Resource: "widgets", Namespace: "ns", Name: "a"}
	cmA     = trace.Object{Resource: "configmaps", Namespace: "ns", Name: "a"}
)

func TestViewsEventsGetsAndLists(t *testing.T) {
	tr := trace.Trace{
		Events: []trace.Event{
			released("c", "example.com", "widgets", "ns", "a", "10", 100),
			// Held, never released: not seen.
			{Client: "c", Group: "example.com", Resource: "widgets", Namespace: "ns", Name: "a", ResourceVersion: "50", Arrived: at(110), Fate: trace.Pending, Rule: 0},
			// Dropped: not seen.
			{Client: "c", Group: "example.com", Resource: "widgets", Namespace: "ns", Name: "a", ResourceVersion: "51", Arrived: at(120), Fate: trace.Dropped, Rule: 0},
			// Another client's event: not c's.
			released("other", "example.com", "widgets", "ns", "a", "60", 130),
		},
		Requests: []trace.Request{
			// c's GET of the object, answered at 300.
			{Client: "c", Verb: "get", APIGroup: "example.com", Resource: "widgets", Namespace: "ns", Name: "a", Start: at(200), Latency: 100 * time.Millisecond, Code: 200, ReturnedRV: "20"},
			// c's own write: its answer is not a view.
			{Client: "c", Verb: "patch", APIGroup: "example.com", Resource: "widgets", Subresource: "status", Namespace: "ns", Name: "a", Start: at(400), Latency: 10 * time.Millisecond, Code: 200, ReturnedRV: "25"},
			// A relist of the namespace at 30, answered at 600.
			{Client: "c", Verb: "list", APIGroup: "example.com", Resource: "widgets", Namespace: "ns", Start: at(500), Latency: 100 * time.Millisecond, Code: 200, ReturnedRV: "30"},
			// A list across namespaces at 40, answered at 800.
			{Client: "c", Verb: "list", APIGroup: "example.com", Resource: "widgets", Start: at(700), Latency: 100 * time.Millisecond, Code: 200, ReturnedRV: "40"},
			// A failed list and a list of another namespace: no view.
			{Client: "c", Verb: "list", APIGroup: "example.com", Resource: "widgets", Namespace: "ns", Start: at(900), Latency: time.Millisecond, Code: 500, ReturnedRV: "90"},
			{Client: "c", Verb: "list", APIGroup: "example.com", Resource: "widgets", Namespace: "elsewhere", Start: at(900), Latency: time.Millisecond, Code: 200, ReturnedRV: "91"},
		},
	}
	v := trace.NewViews(tr)
	for _, tc := range []struct {
		what string
		ms   int
		want uint64
	}{
		{"before anything was released", 100, 0},
		{"after the released event (held and dropped ones do not count)", 150, 10},
		{"while the GET is in flight", 250, 10},
		{"after the GET's answer", 301, 20},
		{"after its own write's answer (not a view)", 450, 20},
		{"after the relist of its namespace", 601, 30},
		{"after the list across namespaces", 801, 40},
		{"after a failed list and a list of another namespace", 1000, 40},
	} {
		if got := v.Seen("c", widgetA, at(tc.ms)); got != tc.want {
			t.Errorf("%s: Seen(c, %s, t+%dms) = %d, want %d", tc.what, widgetA, tc.ms, got, tc.want)
		}
	}
	if got := v.Seen("other", widgetA, at(1000)); got != 60 {
		t.Errorf("Seen(other, %s) = %d, want 60 (its own event)", widgetA, got)
	}
}

// Two kinds may share a name: what a client saw of one says nothing of the
// other.
func TestViewsKeepKindsWithOneNameApart(t *testing.T) {
	tr := trace.Trace{
		Events: []trace.Event{released("c", "", "configmaps", "ns", "a", "70", 100)},
		Requests: []trace.Request{
			{Client: "c", Verb: "get", APIGroup: "", Resource: "configmaps", Namespace: "ns", Name: "a", Start: at(200), Latency: time.Millisecond, Code: 200, ReturnedRV: "80"},
			// Same plural, another group.
			{Client: "c", Verb: "list", APIGroup: "other.example.com", Resource: "widgets", Namespace: "ns", Start: at(300), Latency: time.Millisecond, Code: 200, ReturnedRV: "90"},
		},
	}
	v := trace.NewViews(tr)
	if got := v.Seen("c", widgetA, at(1000)); got != 0 {
		t.Errorf("Seen(c, %s) = %d, want 0: only a ConfigMap of that name and widgets of another group were seen", widgetA, got)
	}
	if got := v.Seen("c", cmA, at(1000)); got != 80 {
		t.Errorf("Seen(c, %s) = %d, want 80", cmA, got)
	}
}

// WatchList initial events are events like any other; a cluster-scoped
// object is seen through lists of its resource.
func TestViewsInitialEventsAndClusterScoped(t *testing.T) {
	node := trace.Object{Resource: "nodes", Name: "n1"}
	initial := released("c", "example.com", "widgets", "ns", "a", "5", 100)
	initial.Type = "ADDED"
	tr := trace.Trace{
		Events: []trace.Event{initial, {Client: "c", Group: "example.com", Resource: "widgets", Type: "BOOKMARK", ResourceVersion: "6", InitialEnd: true, Arrived: at(101), Fate: trace.Released, Released: at(101), Rule: -1}},
		Requests: []trace.Request{
			{Client: "c", Verb: "list", Resource: "nodes", Start: at(200), Latency: time.Millisecond, Code: 200, ReturnedRV: "9"},
		},
	}
	v := trace.NewViews(tr)
	if got := v.Seen("c", widgetA, at(150)); got != 5 {
		t.Errorf("Seen(c, %s) = %d, want 5 from its initial event", widgetA, got)
	}
	if got := v.Seen("c", node, at(300)); got != 9 {
		t.Errorf("Seen(c, %s) = %d, want 9 from the list of nodes", node, got)
	}
}

// A trace written before events carried their group reads back with the
// group of their watch, so that old traces are judged as new ones.
func TestReadJSONLBackfillsOldTraces(t *testing.T) {
	old := `{"request":{"client":"c","verb":"watch","group":"example.com","resource":"widgets","namespace":"ns","start":"2026-01-01T00:00:00Z","latency":0,"code":200}}
{"event":{"client":"c","stream":1,"resource":"widgets","type":"MODIFIED","namespace":"ns","name":"a","rv":"10","arrived":"2026-01-01T00:00:00.1Z","fate":"released","released":"2026-01-01T00:00:00.1Z","rule":-1}}
{"request":{"client":"c","verb":"watch","group":"example.com","resource":"widgets","namespace":"ns","start":"2026-01-01T00:00:01Z","latency":0,"code":200,"fault":"expire: answered 410 Expired (too old resource version: 10 (12))"}}
`
	tr, err := trace.ReadJSONL(bytes.NewBufferString(old))
	if err != nil {
		t.Fatal(err)
	}
	if got := trace.NewViews(tr).Seen("c", widgetA, at(1000)); got != 10 {
		t.Errorf("old trace: Seen(c, %s) = %d, want 10 (the event's group from its watch)", widgetA, got)
	}
	if got := tr.Requests[1].FaultKind; got != trace.FaultExpire {
		t.Errorf("old trace: FaultKind = %q, want %q from the words of its fault", got, trace.FaultExpire)
	}
}

// A restarted client is a new process: what its predecessor was shown (an
// event released to the old instance's watch just before it was stopped)
// is not in the new instance's view, which starts with its own list; the
// restart survives the JSONL round trip.
func TestViewsStartAfreshAtARestart(t *testing.T) {
	tr := trace.Trace{
		Events: []trace.Event{
			released("c", "example.com", "widgets", "ns", "a", "30", 100), // to the old instance
			released("c", "example.com", "widgets", "ns", "a", "40", 500), // to the new one, late
		},
		Requests: []trace.Request{
			// The new instance lists from a lagging apiserver, as of 20.
			{Client: "c", Verb: "list", APIGroup: "example.com", Resource: "widgets", Namespace: "ns", Start: at(250), Latency: 10 * time.Millisecond, Code: 200, ReturnedRV: "20"},
		},
		Restarts: []trace.Restart{{Client: "c", At: at(200)}},
	}
	var b bytes.Buffer
	if err := tr.WriteJSONL(&b); err != nil {
		t.Fatal(err)
	}
	read, err := trace.ReadJSONL(&b)
	if err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]trace.Trace{"in memory": tr, "read back from JSONL": read} {
		v := trace.NewViews(tr)
		for _, tc := range []struct {
			what string
			ms   int
			want uint64
		}{
			{"the old instance, after its event", 150, 30},
			{"the new instance, before anything", 210, 0},
			{"the new instance, after its lagging list", 300, 20},
			{"the new instance, after its own late event", 600, 40},
		} {
			if got := v.Seen("c", widgetA, at(tc.ms)); got != tc.want {
				t.Errorf("%s: %s: Seen(c, %s, t+%dms) = %d, want %d", name, tc.what, widgetA, tc.ms, got, tc.want)
			}
		}
	}
}
