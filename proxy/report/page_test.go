package report_test

import (
	"bytes"
	"fmt"
	"html/template"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/stalefuzz/stalefuzz/proxy/report"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// base is the mark of the synthetic trace.
var base = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return base.Add(time.Duration(sec * float64(time.Second))) }

const (
	ns     = "stalefuzz-7"
	caller = "scenarios/contention/controller.go:70 (*Reconciler).Reconcile"
)

// lostUpdate is a synthetic but realistic finding: replica-1's informer is
// held back for two seconds, replica-0 patches the plan blind (200),
// replica-1 then updates it with the resourceVersion it last saw (409), and
// the oracle finds replica-1's choice lost.
func lostUpdate() report.Page {
	rule0 := 0
	reqs := []trace.Request{
		{Client: "replica-0", Verb: "list", Resource: "configmaps", Namespace: ns, Start: at(0.01), Latency: 3 * time.Millisecond, Code: 200, ReturnedRV: "1000"},
		{Client: "replica-1", Verb: "list", Resource: "configmaps", Namespace: ns, Start: at(0.02), Latency: 3 * time.Millisecond, Code: 200, ReturnedRV: "1000"},
		{Client: "replica-0", Verb: "patch", Resource: "configmaps", Namespace: ns, Name: "plan", Start: at(1.1), Latency: 8 * time.Millisecond,
			Code: 200, ReturnedRV: "1043", Caller: caller,
			Write:  &trace.Write{Patch: "merge", Manager: "contention", Set: map[string]string{"data.owner": `"replica-0"`, "data.plan": `"a"`}},
			Fields: map[string]string{"data.plan": `"a"`}},
		{Client: "replica-1", Verb: "list", Resource: "configmaps", Namespace: ns, Start: at(1.5), Latency: 2 * time.Millisecond, Code: 410,
			FaultKind: trace.FaultExpire, Fault: "expire: answered 410 Expired (too old resource version: 1000 (1040)), as a kube-apiserver whose watch cache no longer holds it", Rule: &rule0},
		{Client: "replica-1", Verb: "update", Resource: "configmaps", Namespace: ns, Name: "plan", Start: at(2.0), Latency: 6 * time.Millisecond,
			Code: 409, SentRV: "1040", Caller: "scenarios/contention/controller.go:91 (*Reconciler).claim",
			Write: &trace.Write{Set: map[string]string{"data.owner": `"replica-1"`, "data.plan": `"b"`}}},
	}
	evs := []trace.Event{
		{Client: "replica-0", Stream: 1, Resource: "configmaps", Type: "ADDED", Namespace: ns, Name: "plan", ResourceVersion: "1000",
			Arrived: at(0.05), Fate: trace.Released, Released: at(0.05).Add(200 * time.Microsecond), Rule: -1},
		{Client: "replica-1", Stream: 2, Resource: "configmaps", Type: "ADDED", Namespace: ns, Name: "plan", ResourceVersion: "1000",
			Arrived: at(0.06), Fate: trace.Released, Released: at(0.06).Add(300 * time.Microsecond), Rule: -1},
		// Not involved: nobody wrote it and nothing held it.
		{Client: "replica-0", Stream: 1, Resource: "configmaps", Type: "ADDED", Namespace: ns, Name: "unrelated", ResourceVersion: "1001",
			Arrived: at(0.07), Fate: trace.Released, Released: at(0.07), Rule: -1},
		// replica-1's copy of replica-0's patch is held by the lag rule.
		{Client: "replica-1", Stream: 2, Resource: "configmaps", Type: "MODIFIED", Namespace: ns, Name: "plan", ResourceVersion: "1043",
			Arrived: at(1.2), Fate: trace.Released, Released: at(2.7), Rule: 0},
		// replica-0's own copy is dropped.
		{Client: "replica-0", Stream: 1, Resource: "configmaps", Type: "MODIFIED", Namespace: ns, Name: "plan", ResourceVersion: "1043",
			Arrived: at(1.2), Fate: trace.Dropped, Rule: 1},
		// replica-1's stream is broken before the next one.
		{Client: "replica-1", Stream: 2, Resource: "configmaps", Type: "MODIFIED", Namespace: ns, Name: "plan", ResourceVersion: "1044",
			Arrived: at(2.8), Fate: trace.Broken, Rule: 2},
	}
	return report.Page{
		Title: "schedule [lag replica-1 watch configmaps t+1.00s–3.00s]",
		Notes: []string{"scenario contention (two replicas claim one plan)"},
		Mark:  base,
		Trace: trace.Trace{Requests: reqs, Events: evs},
		Bands: []report.Band{{Client: "replica-1", Start: at(1.0), End: at(3.0),
			Label: "lag replica-1 watch configmaps t+1.00s–3.00s", Cause: "a watch cache behind etcd after a restart"}},
		Violations: []report.Violation{{At: at(3.5), Oracle: "LostUpdate",
			Message: `configmap stalefuzz-7/plan: data.plan = "a", replica-1's "b" lost`}},
		Sections: []report.Section{{Title: "Blind writes", HTML: template.HTML(`<p class="audit">1 blind patch</p>`)}},
	}
}

func render(t testing.TB, p report.Page) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := report.Write(&b, p); err != nil {
		t.Fatalf("page %q: Write: %v", p.Title, err)
	}
	return b.Bytes()
}

func parse(t testing.TB, doc []byte) *html.Node {
	t.Helper()
	n, err := html.Parse(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("unable to parse the page: %v", err)
	}
	return n
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func hasClass(n *html.Node, classes ...string) bool {
	v, _ := attr(n, "class")
	have := strings.Fields(v)
	for _, c := range classes {
		found := false
		for _, h := range have {
			if h == c {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// find returns the elements below n (in document order) that have all the
// classes.
func find(n *html.Node, classes ...string) []*html.Node {
	return findFunc(n, func(m *html.Node) bool { return hasClass(m, classes...) })
}

func findTag(n *html.Node, tag string) []*html.Node {
	return findFunc(n, func(m *html.Node) bool { return m.Data == tag })
}

func findFunc(n *html.Node, pred func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && pred(c) {
			out = append(out, c)
		}
		out = append(out, findFunc(c, pred)...)
	}
	return out
}

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// titleOf is the hover text of a mark: its <title> child.
func titleOf(n *html.Node) string {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == "title" {
			return text(c)
		}
	}
	return ""
}

func num(t testing.TB, n *html.Node, key string) float64 {
	t.Helper()
	v, ok := attr(n, key)
	if !ok {
		t.Fatalf("<%s class=%q> has no %s", n.Data, classOf(n), key)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("<%s class=%q> %s=%q: %v", n.Data, classOf(n), key, v, err)
	}
	return f
}

func classOf(n *html.Node) string { v, _ := attr(n, "class"); return v }

func one(t testing.TB, what string, ns []*html.Node) *html.Node {
	t.Helper()
	if len(ns) != 1 {
		t.Fatalf("want exactly one %s, got %d", what, len(ns))
	}
	return ns[0]
}

// laneByClient returns the lane of client c.
func laneByClient(t testing.TB, doc *html.Node, c string) *html.Node {
	t.Helper()
	for _, l := range find(doc, "lane") {
		if v, _ := attr(l, "data-client"); v == c {
			return l
		}
	}
	t.Fatalf("no lane for client %q", c)
	return nil
}

// checkLostUpdate asserts that doc (the page of lostUpdate, as written or as
// a browser's DOM) shows what the trace holds.
func checkLostUpdate(t testing.TB, doc *html.Node) {
	t.Helper()
	p := lostUpdate()

	if got := strings.TrimSpace(text(one(t, "h1.title", find(doc, "title")))); got != p.Title {
		t.Errorf("page title: want %q, got %q", p.Title, got)
	}
	if got := text(one(t, "<title>", findFunc(doc, func(n *html.Node) bool { return n.Data == "title" && n.Parent.Data == "head" }))); got != p.Title {
		t.Errorf("document title: want %q, got %q", p.Title, got)
	}

	// One lane per client, by name.
	var clients []string
	for _, l := range find(doc, "lane") {
		c, _ := attr(l, "data-client")
		clients = append(clients, c)
	}
	if fmt.Sprint(clients) != "[replica-0 replica-1]" {
		t.Errorf("lanes: want [replica-0 replica-1], got %v", clients)
	}
	r0, r1 := laneByClient(t, doc, "replica-0"), laneByClient(t, doc, "replica-1")

	// The band shades replica-1's lane from 1.0 s to 3.0 s.
	band := one(t, "band", find(doc, "band"))
	if c, _ := attr(band, "data-client"); c != "replica-1" {
		t.Errorf("band: want data-client replica-1, got %q", c)
	}
	if s, _ := attr(band, "data-step"); s != p.Bands[0].Label {
		t.Errorf("band: want data-step %q, got %q", p.Bands[0].Label, s)
	}
	if h := titleOf(band); !strings.Contains(h, p.Bands[0].Cause) || !strings.Contains(h, p.Bands[0].Label) {
		t.Errorf("band hover %q: want the label and the cause %q", h, p.Bands[0].Cause)
	}
	if !strings.Contains(text(band), "lag replica-1") {
		t.Errorf("band: the label is not drawn: %q", text(band))
	}
	shade := one(t, "band shade", find(band, "c-band"))
	bandX0 := num(t, shade, "x")
	bandX1 := bandX0 + num(t, shade, "width")
	laneBg := laneRect(t, doc, 1)
	if y, h := num(t, shade, "y"), num(t, shade, "height"); y != num(t, laneBg, "y") || h != num(t, laneBg, "height") {
		t.Errorf("band shade y=%v h=%v: want replica-1's lane, y=%v h=%v", y, h, num(t, laneBg, "y"), num(t, laneBg, "height"))
	}
	// x is linear in time: 1.0 s and 3.0 s give the scale.
	xOf := func(sec float64) float64 { return bandX0 + (sec-1.0)*(bandX1-bandX0)/2.0 }
	near := func(what string, got, want float64) {
		t.Helper()
		if got < want-1.5 || got > want+1.5 {
			t.Errorf("%s: want x≈%.1f, got %.1f", what, want, got)
		}
	}

	// The held event: a bar from 1.2 s to 2.7 s in replica-1's lane.
	held := one(t, "held event in replica-1's lane", find(r1, "event", "held"))
	if rv, _ := attr(held, "data-rv"); rv != "1043" {
		t.Errorf("held event: want data-rv 1043, got %q", rv)
	}
	if h := titleOf(held); !strings.Contains(h, "MODIFIED") || !strings.Contains(h, "configmaps "+ns+"/plan") || !strings.Contains(h, "rv=1043") || !strings.Contains(h, "held 1.500s") {
		t.Errorf("held event hover %q: want type, object, resourceVersion and how long it was held", h)
	}
	bar := one(t, "bar of the held event", findTag(held, "rect"))
	near("held bar start", num(t, bar, "x"), xOf(1.2))
	near("held bar end", num(t, bar, "x")+num(t, bar, "width"), xOf(2.7))
	if len(find(r0, "event", "held")) != 0 {
		t.Errorf("replica-0's lane has a held event; none was held for it")
	}

	// The dropped event: a cross in replica-0's lane at 1.2 s.
	dropped := one(t, "dropped event in replica-0's lane", find(r0, "event", "dropped"))
	if len(findTag(dropped, "path")) == 0 {
		t.Errorf("dropped event: no cross drawn")
	}
	if h := titleOf(dropped); !strings.Contains(h, "dropped") || !strings.Contains(h, "rv=1043") {
		t.Errorf("dropped event hover %q: want its fate and resourceVersion", h)
	}
	// The broken one: a cross of another class, with the stream's end.
	broken := one(t, "broken event in replica-1's lane", find(r1, "event", "broken"))
	if classOf(findTag(broken, "path")[0]) == classOf(findTag(dropped, "path")[0]) || len(findTag(broken, "line")) == 0 {
		t.Errorf("a broken event is drawn like a dropped one")
	}
	if rv, _ := attr(broken, "data-rv"); rv != "1044" {
		t.Errorf("broken event: want data-rv 1044, got %q", rv)
	}

	// Pass-through events of the plan, drawn lightly; not the unrelated one.
	light := find(doc, "event", "released")
	if len(light) != 2 {
		t.Errorf("want 2 pass-through events (the plan's ADDED, one per client), got %d", len(light))
	}
	for _, e := range find(doc, "event") {
		if o, _ := attr(e, "data-object"); strings.Contains(o, "unrelated") {
			t.Errorf("an event of an uninvolved object is drawn: %q", o)
		}
	}

	// Writes: replica-0's blind patch (200), replica-1's locked update (409).
	if n := len(find(doc, "write")); n != 2 {
		t.Errorf("want 2 write marks, got %d", n)
	}
	ok := one(t, "write.ok in replica-0's lane", find(r0, "write", "ok"))
	for k, want := range map[string]string{"data-verb": "patch", "data-precondition": "", "data-code": "200", "data-client": "replica-0", "data-caller": caller} {
		if got, _ := attr(ok, k); got != want {
			t.Errorf("blind patch: want %s=%q, got %q", k, want, got)
		}
	}
	if !hasClass(ok, "blind") {
		t.Errorf("blind patch: class %q lacks blind", classOf(ok))
	}
	h := titleOf(ok)
	for _, want := range []string{"patch (merge)", "configmaps " + ns + "/plan", "none (blind)", "200 OK", caller, `sets data.plan = "a"`, `sets data.owner = "replica-0"`, `after: data.plan = "a"`} {
		if !strings.Contains(h, want) {
			t.Errorf("blind patch hover %q: want %q", h, want)
		}
	}
	conflict := one(t, "write.conflict in replica-1's lane", find(r1, "write", "conflict"))
	for k, want := range map[string]string{"data-verb": "update", "data-precondition": "1040", "data-code": "409"} {
		if got, _ := attr(conflict, k); got != want {
			t.Errorf("locked update: want %s=%q, got %q", k, want, got)
		}
	}
	if !hasClass(conflict, "locked") {
		t.Errorf("locked update: class %q lacks locked", classOf(conflict))
	}
	if h := titleOf(conflict); !strings.Contains(h, "409 Conflict") || !strings.Contains(h, "resourceVersion 1040") {
		t.Errorf("locked update hover %q: want its answer and precondition", h)
	}
	mark := findTag(ok, "path")[0]
	near("blind patch", markX(t, mark), xOf(1.1))
	near("locked update", markX(t, findTag(conflict, "path")[0]), xOf(2.0))
	if classOf(findTag(conflict, "path")[0]) == classOf(mark) {
		t.Errorf("a 409 is drawn in the same class as a 200: %q", classOf(mark))
	}

	// The request fault.
	fault := one(t, "fault in replica-1's lane", find(r1, "fault"))
	if k, _ := attr(fault, "data-fault"); k != "expire" {
		t.Errorf("fault: want data-fault expire, got %q", k)
	}
	if h := titleOf(fault); !strings.Contains(h, "410 Expired") {
		t.Errorf("fault hover %q: want the fault", h)
	}

	// The violation at 3.5 s.
	vio := one(t, "violation", find(doc, "violation"))
	if o, _ := attr(vio, "data-oracle"); o != "LostUpdate" {
		t.Errorf("violation: want data-oracle LostUpdate, got %q", o)
	}
	if h := titleOf(vio); !strings.Contains(h, p.Violations[0].Message) {
		t.Errorf("violation hover %q: want the message", h)
	}
	near("violation", num(t, findTag(vio, "line")[0], "x1"), xOf(3.5))

	// The axis has ticks at whole seconds.
	var ticks []string
	for _, n := range find(doc, "ticklabel") {
		ticks = append(ticks, text(n))
	}
	for _, want := range []string{"0", "1", "2", "3"} {
		if !strings.Contains(" "+strings.Join(ticks, " ")+" ", " "+want+" ") && !strings.Contains(strings.Join(ticks, " "), want+".0") {
			t.Errorf("axis ticks %v: want one at %s s", ticks, want)
		}
	}

	// The legend explains every kind of mark.
	for _, c := range []string{"lg-held", "lg-dropped", "lg-broken", "lg-conflict", "lg-blind", "lg-fault", "lg-band", "lg-violation"} {
		if len(find(doc, "legend-item", c)) != 1 {
			t.Errorf("legend: no item %s", c)
		}
	}

	// The table lists the writes, in time order.
	rows := findTag(one(t, "table.writes", find(doc, "writes")), "tr")[1:]
	if len(rows) != 2 {
		t.Fatalf("writes table: want 2 rows, got %d", len(rows))
	}
	cells := func(tr *html.Node) []string {
		var out []string
		for _, td := range findTag(tr, "td") {
			out = append(out, text(td))
		}
		return out
	}
	c0, c1 := cells(rows[0]), cells(rows[1])
	want0 := []string{"+1.100s", "replica-0", caller, "patch (merge)", "configmaps " + ns + "/plan", "none (blind)", "200 OK, resourceVersion 1043"}
	want1 := []string{"+2.000s", "replica-1", "scenarios/contention/controller.go:91 (*Reconciler).claim", "update", "configmaps " + ns + "/plan", "resourceVersion 1040", "409 Conflict"}
	if fmt.Sprint(c0[:7]) != fmt.Sprint(want0) {
		t.Errorf("writes table row 1:\nwant %q\ngot  %q", want0, c0[:7])
	}
	if fmt.Sprint(c1[:7]) != fmt.Sprint(want1) {
		t.Errorf("writes table row 2:\nwant %q\ngot  %q", want1, c1[:7])
	}
	if !strings.Contains(c0[7], `sets data.plan = "a"`) || !strings.Contains(c1[7], `sets data.plan = "b"`) {
		t.Errorf("writes table: fields %q, %q: want what each set", c0[7], c1[7])
	}
	if !hasClass(rows[1], "conflict") {
		t.Errorf("writes table: the 409's row has class %q", classOf(rows[1]))
	}
	// Each write mark links to its row.
	for _, a := range findFunc(doc, func(n *html.Node) bool { return n.Data == "a" && len(find(n, "write")) == 1 }) {
		href, _ := attr(a, "href")
		id := strings.TrimPrefix(href, "#")
		if len(findFunc(doc, func(n *html.Node) bool { v, _ := attr(n, "id"); return n.Data == "tr" && v == id })) != 1 {
			t.Errorf("write mark links to %q: no such row", href)
		}
	}

	// The section follows.
	if len(find(doc, "audit")) != 1 {
		t.Errorf("section %q is missing", p.Sections[0].Title)
	}
}

var pathStart = regexp.MustCompile(`^M(-?[0-9.]+) `)

// markX is the x of a diamond's top vertex (its centre).
func markX(t testing.TB, path *html.Node) float64 {
	t.Helper()
	d, _ := attr(path, "d")
	m := pathStart.FindStringSubmatch(d)
	if m == nil {
		t.Fatalf("mark path d=%q: not a diamond", d)
	}
	x, _ := strconv.ParseFloat(m[1], 64)
	return x
}

// laneRect is the background of lane i.
func laneRect(t testing.TB, doc *html.Node, i int) *html.Node {
	t.Helper()
	bgs := find(doc, "lane-bg")
	if len(bgs) <= i {
		t.Fatalf("want a background for lane %d, have %d", i, len(bgs))
	}
	return bgs[i]
}

// checkOffline fails if doc would fetch anything: every src/href-like
// attribute must be a fragment or a data: URL, and the style sheet must load
// nothing.
func checkOffline(t testing.TB, doc *html.Node) {
	t.Helper()
	for _, n := range findFunc(doc, func(*html.Node) bool { return true }) {
		for _, a := range n.Attr {
			k := strings.ToLower(a.Key)
			if strings.HasPrefix(k, "on") {
				t.Errorf("<%s> has an event handler %s=%q", n.Data, a.Key, a.Val)
			}
			switch k {
			case "src", "href", "xlink:href", "action", "formaction", "poster", "background", "srcset", "data", "manifest":
				v := strings.TrimSpace(a.Val)
				if !strings.HasPrefix(v, "#") && !strings.HasPrefix(v, "data:") {
					t.Errorf("<%s %s=%q> refers outside the page", n.Data, a.Key, a.Val)
				}
			}
		}
		switch n.Data {
		case "script", "iframe", "img", "object", "embed", "image", "use", "foreignObject", "foreignobject":
			t.Errorf("the page has a <%s> element", n.Data)
		case "style":
			if css := strings.ToLower(text(n)); strings.Contains(css, "url(") || strings.Contains(css, "@import") || strings.Contains(css, "@font-face") {
				t.Errorf("the style sheet loads something")
			}
		}
	}
}
