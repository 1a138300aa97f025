package report_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/stalefuzz/stalefuzz/proxy/report"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// startUp is a finding as a fuzz execution records it: the controllers'
// start-up traffic (discovery, informer LIST and WATCH, the plan's ADDED, an
// event held behind another and one aborted) five seconds before the mark,
// then what matters within half a second after it, then shutdown traffic
// at +8 s.
func startUp() report.Page {
	rule0 := 0
	var reqs []trace.Request
	var evs []trace.Event
	for i, c := range []string{"replica-0", "replica-1"} {
		d := float64(i) * 0.001
		reqs = append(reqs,
			trace.Request{Client: c, Verb: "get", Path: "/api", Start: at(-5.0 + d), Latency: time.Millisecond, Code: 200},
			trace.Request{Client: c, Verb: "list", Resource: "configmaps", Namespace: ns, Start: at(-4.99 + d), Latency: 3 * time.Millisecond, Code: 200, ReturnedRV: "900"},
			trace.Request{Client: c, Verb: "watch", Resource: "configmaps", Namespace: ns, Start: at(-4.98 + d), Latency: 2 * time.Millisecond, Code: 200})
		// Before the axis: 2 events passed through at once.
		evs = append(evs, trace.Event{Client: c, Stream: uint64(1 + i), Resource: "configmaps", Type: "ADDED", Namespace: ns, Name: "plan", ResourceVersion: "900",
			Arrived: at(-4.95 + d), Fate: trace.Released, Released: at(-4.95 + d).Add(100 * time.Microsecond), Rule: -1})
	}
	evs = append(evs,
		// Before the axis: held behind another (no rule), and aborted.
		trace.Event{Client: "replica-0", Stream: 1, Resource: "configmaps", Type: "MODIFIED", Namespace: ns, Name: "plan", ResourceVersion: "901",
			Arrived: at(-4.9), Fate: trace.Released, Released: at(-4.8), Rule: -1},
		trace.Event{Client: "replica-1", Stream: 2, Resource: "configmaps", Type: "MODIFIED", Namespace: ns, Name: "plan", ResourceVersion: "902",
			Arrived: at(-4.7), Fate: trace.Aborted, Rule: -1},
		// Across the axis's left edge: clipped.
		trace.Event{Client: "replica-0", Stream: 3, Resource: "configmaps", Type: "MODIFIED", Namespace: ns, Name: "plan", ResourceVersion: "903",
			Arrived: at(-4.0), Fate: trace.Released, Released: at(0.3), Rule: -1},
		// What matters.
		trace.Event{Client: "replica-1", Stream: 2, Resource: "configmaps", Type: "MODIFIED", Namespace: ns, Name: "plan", ResourceVersion: "1001",
			Arrived: at(0.15), Fate: trace.Released, Released: at(0.45), Rule: 0},
		trace.Event{Client: "replica-0", Stream: 3, Resource: "configmaps", Type: "MODIFIED", Namespace: ns, Name: "plan", ResourceVersion: "1001",
			Arrived: at(0.2), Fate: trace.Dropped, Rule: 1},
		// Still held at the end of the trace (+8.1 s): clipped at the right.
		trace.Event{Client: "replica-1", Stream: 2, Resource: "configmaps", Type: "MODIFIED", Namespace: ns, Name: "plan", ResourceVersion: "1004",
			Arrived: at(0.45), Fate: trace.Pending, Rule: 0},
		// After the axis: 1 event passed through at once.
		trace.Event{Client: "replica-0", Stream: 3, Resource: "configmaps", Type: "DELETED", Namespace: ns, Name: "plan", ResourceVersion: "1100",
			Arrived: at(8.0), Fate: trace.Released, Released: at(8.0), Rule: -1})
	patch := func(sec float64, rv string) trace.Request {
		return trace.Request{Client: "replica-0", Verb: "patch", Resource: "configmaps", Namespace: ns, Name: "plan", Start: at(sec), Latency: 5 * time.Millisecond,
			Code: 200, ReturnedRV: rv, Caller: caller, Write: &trace.Write{Patch: "merge", Set: map[string]string{"data.plan": strconv.Quote(rv)}}}
	}
	reqs = append(reqs, patch(0.1, "1001"), patch(0.2, "1002"), patch(0.3, "1003"),
		trace.Request{Client: "replica-1", Verb: "list", Resource: "configmaps", Namespace: ns, Start: at(0.35), Latency: 2 * time.Millisecond, Code: 410,
			FaultKind: trace.FaultExpire, Fault: "expire: answered 410 Expired", Rule: &rule0},
		trace.Request{Client: "replica-1", Verb: "update", Resource: "configmaps", Namespace: ns, Name: "plan", Start: at(0.4), Latency: 6 * time.Millisecond,
			Code: 409, SentRV: "1001", Caller: caller, Write: &trace.Write{Set: map[string]string{"data.plan": `"b"`}}},
		// The last thing that matters, at the right edge: its label
		// goes left of it.
		trace.Request{Client: "replica-1", Verb: "update", Resource: "configmaps", Namespace: ns, Name: "plan", Start: at(0.5), Latency: 10 * time.Millisecond,
			Code: 0, SentRV: "1003", Caller: caller, Write: &trace.Write{Set: map[string]string{"data.plan": `"c"`}}},
		trace.Request{Client: "replica-0", Verb: "get", Path: "/healthz", Start: at(8.1), Latency: time.Millisecond, Code: 200})
	return report.Page{
		Title:      "schedule [lag replica-1 t+0.10s–0.50s]",
		Mark:       base,
		Trace:      trace.Trace{Requests: reqs, Events: evs},
		Bands:      []report.Band{{Client: "replica-1", Start: at(0.1), End: at(0.5), Label: "lag replica-1"}},
		Violations: []report.Violation{{At: at(0.45), Oracle: "LostUpdate", Message: "replica-0's plan lost"}},
	}
}

// plotArea is the axis line's extent (the plot area) and the picture's
// width.
func plotArea(t testing.TB, doc *html.Node) (left, right, width float64) {
	t.Helper()
	l := one(t, "axis line", find(doc, "axisline"))
	return num(t, l, "x1"), num(t, l, "x2"), num(t, one(t, "svg", findTag(doc, "svg")), "width")
}

// axisRange is the time (s after the mark) at the plot area's edges, from
// band's shade, which runs from from to to seconds.
func axisRange(t testing.TB, doc *html.Node, from, to float64) (lo, hi float64) {
	t.Helper()
	shade := findTag(one(t, "band", find(doc, "band")), "rect")
	var sh *html.Node
	for _, r := range shade {
		if hasClass(r, "c-band") {
			sh = r
		}
	}
	if sh == nil {
		t.Fatal("the band has no shade")
	}
	x0 := num(t, sh, "x")
	x1 := x0 + num(t, sh, "width")
	left, right, _ := plotArea(t, doc)
	sec := func(x float64) float64 { return from + (x-x0)*(to-from)/(x1-x0) }
	return sec(left), sec(right)
}

var pathXY = regexp.MustCompile(`[MLml](-?[0-9.]+) (-?[0-9.]+)`)

// checkInPlot fails if any mark (event, write, fault, band, violation) or
// axis tick has an x coordinate outside the plot area, or a label that runs
// over the lane labels or past the picture's right edge. A glyph (a
// diamond, a cross) may reach past the axis line on the right by its size.
func checkInPlot(t testing.TB, doc *html.Node) {
	t.Helper()
	left, right, width := plotArea(t, doc)
	check := func(what string, x float64) {
		t.Helper()
		if x < left-0.05 || x > width {
			t.Errorf("%s: x=%.1f is outside the plot area [%.0f, %.0f]", what, x, left, width)
		}
	}
	var groups []*html.Node
	for _, l := range find(doc, "lane") {
		groups = append(groups, find(l, "event")...)
		groups = append(groups, find(l, "write")...)
		groups = append(groups, find(l, "fault")...)
	}
	groups = append(groups, find(doc, "band")...)
	groups = append(groups, find(doc, "violation")...)
	for _, g := range groups {
		for _, n := range findFunc(g, func(*html.Node) bool { return true }) {
			what := fmt.Sprintf("<%s class=%q> in <g class=%q> (%s)", n.Data, classOf(n), classOf(g), strings.SplitN(titleOf(g), "\n", 2)[0])
			switch n.Data {
			case "rect":
				check(what, num(t, n, "x"))
				check(what+" (its right)", num(t, n, "x")+num(t, n, "width"))
			case "line":
				check(what, num(t, n, "x1"))
				check(what, num(t, n, "x2"))
			case "circle":
				check(what, num(t, n, "cx")-num(t, n, "r"))
				check(what, num(t, n, "cx")+num(t, n, "r"))
			case "path":
				d, _ := attr(n, "d")
				for _, m := range pathXY.FindAllStringSubmatch(d, -1) {
					x, _ := strconv.ParseFloat(m[1], 64)
					check(what, x)
				}
			case "text":
				x, w := num(t, n, "x"), 6*float64(utf8.RuneCountInString(text(n)))
				switch a, _ := attr(n, "text-anchor"); a {
				case "end":
					check(what+" (its start)", x-w)
				case "middle":
					check(what, x-w/2)
					check(what, x+w/2)
				default:
					check(what+" (its end)", x+w)
				}
				check(what, x)
			}
		}
	}
	for _, n := range find(doc, "tick") {
		if x := num(t, n, "x1"); x < left || x > right {
			t.Errorf("axis tick at x=%.1f outside the plot area [%.0f, %.0f]", x, left, right)
		}
	}
}

func ticks(t testing.TB, doc *html.Node) []float64 {
	t.Helper()
	var out []float64
	for _, n := range find(doc, "ticklabel") {
		v, err := strconv.ParseFloat(text(n), 64)
		if err != nil {
			t.Fatalf("tick label %q: %v", text(n), err)
		}
		out = append(out, v)
	}
	if len(out) < 2 {
		t.Fatalf("want ticks on the axis, got %v", out)
	}
	return out
}

func summaryText(t testing.TB, doc *html.Node) string {
	return text(one(t, "summary", find(doc, "summary")))
}

func TestAxisSpansWhatMatters(t *testing.T) {
	p := startUp()
	doc := parse(t, render(t, p))
	checkInPlot(t, doc)
	left, right, _ := plotArea(t, doc)

	// The axis runs from just before the mark (t = 0) to just after the
	// last write (+0.51 s), not from the start-up traffic at -5 s.
	lo, hi := axisRange(t, doc, 0.1, 0.5)
	if lo > 0 || lo < -0.05 {
		t.Errorf("axis from t=%.3fs: want it a little before the mark (0), not at the start-up traffic (-5s)", lo)
	}
	if hi < 0.51 || hi > 0.6 {
		t.Errorf("axis to t=%.3fs: want it a little after the last write's answer (+0.51s), not at the shutdown traffic (+8.1s)", hi)
	}
	for _, v := range ticks(t, doc) {
		if v < lo-1e-9 || v > hi+1e-9 {
			t.Errorf("tick %v outside the axis [%.3f, %.3f]", v, lo, hi)
		}
	}

	// Everything that matters is drawn.
	if n := len(find(doc, "write")); n != 5 {
		t.Errorf("want the 5 writes drawn, got %d", n)
	}
	if len(find(doc, "fault")) != 1 || len(find(doc, "event", "dropped")) != 1 || len(find(doc, "violation")) != 1 {
		t.Errorf("want the fault, the dropped event and the violation drawn")
	}
	// Events wholly outside are not; the one across the left edge is
	// clipped there; the one still held at the end stops at the right.
	var rvs []string
	for _, e := range find(doc, "event") {
		rv, _ := attr(e, "data-rv")
		rvs = append(rvs, rv)
	}
	if !sameSet(rvs, []string{"903", "1001", "1004", "1001"}) {
		t.Errorf("events drawn: want rv 903 (clipped), 1001 (held), 1004 (pending), 1001 (dropped); got %v", rvs)
	}
	for _, e := range find(doc, "event", "held") {
		rv, _ := attr(e, "data-rv")
		bar := findTag(e, "rect")[0]
		x0, x1 := num(t, bar, "x"), num(t, bar, "x")+num(t, bar, "width")
		switch rv {
		case "903":
			if x0 != left {
				t.Errorf("held event rv=903 (from -4s): its bar starts at x=%.1f, want the plot area's left, %.1f", x0, left)
			}
			if want := left + (0.3-lo)/(hi-lo)*(right-left); x1 < want-1.5 || x1 > want+1.5 {
				t.Errorf("held event rv=903: its bar ends at x=%.1f, want its release, x≈%.1f", x1, want)
			}
			if !strings.Contains(titleOf(e), "arrived -4.000s") {
				t.Errorf("held event rv=903: hover %q: want its real arrival", titleOf(e))
			}
		case "1004":
			if x1 != right {
				t.Errorf("pending event rv=1004: its bar ends at x=%.1f, want the plot area's right, %.1f", x1, right)
			}
		}
	}

	// The page says what it left out.
	sum := summaryText(t, doc)
	for _, want := range []string{"not drawn", "4 events before t=" + fmt.Sprintf("%+.3fs", lo), "1 event after t=" + fmt.Sprintf("%+.3fs", hi), "the trace runs from t=-5.000s to +8.101s"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary %q: want %q", sum, want)
		}
	}

	// The tables still list every write and fault.
	if rows := findTag(one(t, "table.writes", find(doc, "writes")), "tr"); len(rows) != 1+5 {
		t.Errorf("writes table: want 5 rows, got %d", len(rows)-1)
	}
	if rows := findTag(one(t, "table.faults", find(doc, "faults")), "tr"); len(rows) != 1+1 {
		t.Errorf("faults table: want 1 row, got %d", len(rows)-1)
	}

	// The last write's label goes left of it, inside the picture.
	last := one(t, "the write without an answer", find(doc, "write", "error"))
	if l := findTag(last, "text")[0]; text(l) != "update (no answer)" || func() string { a, _ := attr(l, "text-anchor"); return a }() != "end" {
		t.Errorf("last write's label %q: want \"update (no answer)\" left of the mark", text(l))
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

// Without Page.Mark, t = 0 is the trace's first entry, but the axis still
// spans what matters.
func TestAxisWithoutMark(t *testing.T) {
	p := startUp()
	p.Mark = time.Time{}
	doc := parse(t, render(t, p))
	checkInPlot(t, doc)
	// The band runs from 0.1 s to 0.5 s after the mark, 5.1 s to 5.5 s
	// after the first entry (-5 s).
	lo, hi := axisRange(t, doc, 5.1, 5.5)
	if lo < 5.05 || lo > 5.1 || hi < 5.51 || hi > 5.6 {
		t.Errorf("axis from t=%.3fs to %.3fs: want about 5.1s to 5.51s (the writes' span after the first entry)", lo, hi)
	}
	if sum := summaryText(t, doc); !strings.Contains(sum, "4 events before") || strings.Contains(sum, "and the mark") {
		t.Errorf("summary %q: want the 4 events before the axis counted, and no mark", sum)
	}
}

// Without writes, rules, faults, bands or violations, the axis spans the
// whole trace and the mark.
func TestAxisWholeTraceWhenNothingMatters(t *testing.T) {
	p := startUp()
	var reqs []trace.Request
	for _, q := range p.Trace.Requests {
		if q.Verb == "get" || q.Verb == "list" && q.Fault == "" || q.Verb == "watch" {
			reqs = append(reqs, q)
		}
	}
	var evs []trace.Event
	for _, e := range p.Trace.Events {
		if e.Rule < 0 && e.Fate == trace.Released && !e.Released.IsZero() && e.Released.Sub(e.Arrived) < time.Millisecond {
			evs = append(evs, e)
		}
	}
	doc := parse(t, render(t, report.Page{Mark: base, Trace: trace.Trace{Requests: reqs, Events: evs}, Objects: []string{ns + "/plan"}}))
	checkInPlot(t, doc)
	ts := ticks(t, doc)
	if ts[0] > -4 || ts[len(ts)-1] < 8 {
		t.Errorf("ticks %v: want the whole trace, -5s to +8.1s", ts)
	}
	if n := len(find(doc, "event", "released")); n != 3 {
		t.Errorf("want the 3 pass-through events drawn, got %d", n)
	}
	if sum := summaryText(t, doc); strings.Contains(sum, "not drawn") || strings.Contains(sum, "The axis spans") {
		t.Errorf("summary %q: the axis spans the whole trace, nothing is left out", sum)
	}
}

// The synthetic finding's page keeps everything inside the plot area, and
// says nothing about the axis: it spans the whole trace.
func TestAxisLostUpdateInPlot(t *testing.T) {
	doc := parse(t, render(t, lostUpdate()))
	checkInPlot(t, doc)
	if sum := summaryText(t, doc); strings.Contains(sum, "not drawn") {
		t.Errorf("summary %q: nothing of lostUpdate is outside the axis", sum)
	}
}
