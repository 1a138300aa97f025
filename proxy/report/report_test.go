package report_test

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/report"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

func TestWriteDrawsTheTrace(t *testing.T) {
	out := render(t, lostUpdate())
	doc := parse(t, out)
	checkLostUpdate(t, doc)
	checkOffline(t, doc)
	if bytes.Contains(out, []byte("http://")) || bytes.Contains(out, []byte("https://")) {
		t.Errorf("page %q mentions a URL; it must refer to nothing outside itself", lostUpdate().Title)
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	p := lostUpdate()
	// Many keys, so that map iteration order would show.
	set := map[string]string{}
	fields := map[string]string{}
	for i := range 40 {
		set["data.k"+strconv.Itoa(i)] = strconv.Quote(strconv.Itoa(i))
		fields["status.f"+strconv.Itoa(i)] = strconv.Itoa(i)
	}
	p.Trace.Requests[2].Write.Set = set
	p.Trace.Requests[2].Fields = fields
	p.Objects = []string{ns + "/plan", ns + "/unrelated", "cluster-scoped"}
	first := render(t, p)
	for i := range 20 {
		if again := render(t, p); !bytes.Equal(first, again) {
			t.Fatalf("page %q: rendering %d differs from the first", p.Title, i+2)
		}
	}
}

func TestWriteEscapesTheTrace(t *testing.T) {
	const (
		client = `<script>alert("client")</script>`
		call   = `"><img src=x onerror=alert(1)>`
		name   = `</title><script>alert(2)</script>`
		value  = `"</svg><iframe src=https://evil.example/></iframe>"`
		msg    = `<a href="https://evil.example/">lost</a>`
	)
	p := lostUpdate()
	p.Title = `<b onmouseover=alert(3)>schedule</b>`
	p.Notes = []string{`<script src="https://evil.example/x.js"></script>`}
	p.Trace.Requests[2].Client = client
	p.Trace.Requests[2].Caller = call
	p.Trace.Requests[2].Name = name
	p.Trace.Requests[2].Write.Set["data.plan"] = value
	p.Trace.Requests[3].Fault = `cut: <style>@import url(https://evil.example/s.css)</style>`
	p.Trace.Events[4].Client = client
	p.Trace.Events[4].Name = name
	p.Trace.Events[4].ResourceVersion = `"><script>alert(4)</script>`
	p.Bands[0].Label = `<svg onload=alert(5)>`
	p.Bands[0].Cause = `</title><image href="https://evil.example/i.png"/>`
	p.Violations[0].Message = msg
	p.Violations[0].Oracle = `<u>oracle</u>`

	out := render(t, p)
	doc := parse(t, out)
	checkOffline(t, doc)
	for _, tag := range []string{"<script", "<img", "<iframe", "<image", "<b ", "<u>", "<a href=\"https"} {
		if bytes.Contains(bytes.ToLower(out), []byte(tag)) {
			t.Errorf("page with hostile trace strings contains %s unescaped", tag)
		}
	}
	// The strings survive as text.
	lane := laneByClient(t, doc, client)
	w := one(t, "write in the hostile lane", find(lane, "write"))
	if c, _ := attr(w, "data-caller"); c != call {
		t.Errorf("write: want data-caller %q, got %q", call, c)
	}
	if h := titleOf(w); !strings.Contains(h, name) || !strings.Contains(h, value) {
		t.Errorf("write hover %q: want the object's name and the value as text", h)
	}
	if got := text(one(t, "h1.title", find(doc, "title"))); got != p.Title {
		t.Errorf("title: want %q as text, got %q", p.Title, got)
	}
	if h := titleOf(one(t, "violation", find(doc, "violation"))); !strings.Contains(h, msg) {
		t.Errorf("violation hover %q: want %q as text", h, msg)
	}
	if s, _ := attr(one(t, "band", find(doc, "band")), "data-step"); s != p.Bands[0].Label {
		t.Errorf("band: want data-step %q, got %q", p.Bands[0].Label, s)
	}
}

func TestWriteThinsPassThroughEvents(t *testing.T) {
	const n = 5000
	p := lostUpdate()
	for i := range n {
		c := "replica-" + strconv.Itoa(i%2)
		a := at(0.1 + 3.0*float64(i)/n)
		p.Trace.Events = append(p.Trace.Events, trace.Event{Client: c, Stream: uint64(1 + i%2), Resource: "configmaps", Type: "MODIFIED",
			Namespace: ns, Name: "plan", ResourceVersion: strconv.Itoa(2000 + i), Arrived: a, Fate: trace.Released, Released: a, Rule: -1})
	}
	out := render(t, p)
	if len(out) > 400<<10 {
		t.Errorf("page with %d pass-through events is %d KiB; want it light", n, len(out)>>10)
	}
	doc := parse(t, out)
	agg := find(doc, "event", "released", "aggregate")
	if len(agg) == 0 || len(agg) > 2*1400/4 {
		t.Fatalf("want the %d pass-through events aggregated into at most one mark per 4 px per lane, got %d marks", n+2, len(agg))
	}
	total := 0
	for _, e := range agg {
		c, _ := attr(e, "data-count")
		k, err := strconv.Atoi(c)
		if err != nil || k < 1 {
			t.Fatalf("aggregate mark: data-count %q", c)
		}
		total += k
	}
	if total != n+2 {
		t.Errorf("aggregate marks count %d events; want %d", total, n+2)
	}
	if !strings.Contains(text(one(t, "summary", find(doc, "summary"))), "aggregated") {
		t.Errorf("the page does not say that it aggregated events")
	}
	// What matters is still drawn one by one.
	if len(find(doc, "event", "held")) != 1 || len(find(doc, "event", "dropped")) != 1 || len(find(doc, "write", "conflict")) != 1 {
		t.Errorf("aggregation hid a held event, a dropped event or a conflict")
	}
}

func TestWriteObjectsLimitsEvents(t *testing.T) {
	p := lostUpdate()
	p.Objects = []string{ns + "/unrelated"}
	doc := parse(t, render(t, p))
	evs := find(doc, "event")
	if len(evs) != 1 {
		t.Fatalf("Objects %v: want the one event of that object, got %d events", p.Objects, len(evs))
	}
	if o, _ := attr(evs[0], "data-object"); o != "configmaps "+ns+"/unrelated" {
		t.Errorf("Objects %v: drew the event of %q", p.Objects, o)
	}
	if len(find(doc, "write")) != 2 {
		t.Errorf("Objects %v: want every write still drawn", p.Objects)
	}
}

func TestWriteMarksPendingAndAbortedEvents(t *testing.T) {
	p := lostUpdate()
	p.Trace.Events = append(p.Trace.Events,
		trace.Event{Client: "replica-0", Stream: 1, Resource: "configmaps", Type: "MODIFIED", Namespace: ns, Name: "plan", ResourceVersion: "1050", Arrived: at(3.1), Fate: trace.Pending, Rule: 0},
		trace.Event{Client: "replica-1", Stream: 2, Resource: "configmaps", Type: "DELETED", Namespace: ns, Name: "plan", ResourceVersion: "1051", Arrived: at(3.2), Fate: trace.Aborted, Rule: 0})
	doc := parse(t, render(t, p))
	pending := one(t, "pending event", find(laneByClient(t, doc, "replica-0"), "event", "pending"))
	if !hasClass(pending, "held") || !strings.Contains(titleOf(pending), "still held") {
		t.Errorf("pending event: class %q, hover %q", classOf(pending), titleOf(pending))
	}
	aborted := one(t, "aborted event", find(laneByClient(t, doc, "replica-1"), "event", "aborted"))
	if !strings.Contains(titleOf(aborted), "DELETED") {
		t.Errorf("aborted event hover %q: want its type", titleOf(aborted))
	}
}

func TestWriteEmptyPage(t *testing.T) {
	doc := parse(t, render(t, report.Page{}))
	if got := text(one(t, "h1.title", find(doc, "title"))); got != "stalefuzz trace" {
		t.Errorf("empty page: title %q", got)
	}
	if n := len(find(doc, "lane")); n != 0 {
		t.Errorf("empty page: %d lanes", n)
	}
	// Only bands and a violation: still a picture.
	p := report.Page{Bands: []report.Band{{Start: at(1), End: at(2), Label: "lag all"}}, Violations: []report.Violation{{At: at(3), Oracle: "O", Message: "m"}}}
	doc = parse(t, render(t, p))
	if len(find(doc, "band")) != 1 || len(find(doc, "violation")) != 1 {
		t.Errorf("page of bands and violations only: want them drawn")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteReportsWriterErrors(t *testing.T) {
	err := report.Write(failWriter{}, lostUpdate())
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Write to a failing writer: want its error, got %v", err)
	}
}

func ExampleWrite() {
	mark := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	p := report.Page{
		Title: "schedule [lag replica-1 watch configmaps t+1.00s–3.00s]",
		Mark:  mark,
		Trace: trace.Trace{Requests: []trace.Request{{
			Client: "replica-1", Verb: "update", Resource: "configmaps", Namespace: "default", Name: "plan",
			Start: mark.Add(2 * time.Second), Code: 409, SentRV: "1040",
		}}},
	}
	var b bytes.Buffer
	if err := report.Write(&b, p); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Contains(b.String(), `class="write conflict locked"`))
	// Output: true
}

func TestBandsFromRecordedRules(t *testing.T) {
	mark := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tr := trace.Trace{
		Rules: []trace.Rules{
			{At: mark.Add(-time.Second), Mark: mark.Add(-time.Second)}, // no rules yet
			{At: mark, Mark: mark, Rules: []trace.Rule{{Index: 0, Client: "watcher", Action: "hold", Text: "hold configmaps for watcher during t+0s–3s", To: 3 * time.Second}}},
			{At: mark.Add(time.Second), Mark: mark, Added: true, Rules: []trace.Rule{{Index: 1, Client: "watcher", Action: "drop", Text: "drop configmaps for watcher from t+0s"}}},
			{At: mark.Add(2 * time.Second), Mark: mark.Add(2 * time.Second)}, // all rules replaced by none
		},
		Requests: []trace.Request{{Client: "watcher", Verb: "patch", Resource: "configmaps", Namespace: "ns", Name: "cm", Start: mark.Add(500 * time.Millisecond), Latency: time.Millisecond, Code: 200}},
	}
	var b strings.Builder
	if err := report.Write(&b, report.Page{Trace: tr}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"rule 0: hold configmaps for watcher", "rule 1: drop configmaps for watcher", "a slow or overloaded apiserver"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if n := strings.Count(page, `<g class="band"`); n != 2 {
		t.Errorf("want 2 bands (each rule while it was in force), got %d", n)
	}
}

// TestWriteShowsAnAnswersFate: a write whose answer the client lost is
// labelled applied with its answer's fate, and a held answer is drawn from
// the apiserver's answer to the client's.
func TestWriteShowsAnAnswersFate(t *testing.T) {
	p := lostUpdate()
	lost, slow := &p.Trace.Requests[2], &p.Trace.Requests[4]
	lost.FaultKind, lost.Fault = trace.FaultLose, "lose: answered 200 by the apiserver; the client was told 504 Timeout"
	slow.FaultKind, slow.Held, slow.Fault = trace.FaultSlow, 700*time.Millisecond, "slow: answer held 700ms"
	out := string(render(t, p))
	for _, want := range []string{"(applied, answer lose)", "(answer held 700ms)", `class="c-`} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if !strings.Contains(out, "latency held") {
		t.Error("the held answer is not drawn")
	}
}
