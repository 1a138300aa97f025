package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Geometry of the picture, in CSS pixels. The picture is svgWidth wide
// whatever the trace's length, so that a screenshot 1400 px wide shows it
// whole.
const (
	svgWidth   = 1360
	plotLeft   = 180 // lane labels to the left of it
	plotRight  = svgWidth - 24
	rowH       = 18 // one row of marks or events
	lanePad    = 5
	lightH     = 10 // the row of pass-through events
	stripRowH  = 16 // one row of band labels or violation labels
	legendRowH = 20
	axisH      = 28
	charW      = 6.0 // a character's width at the page's 11 px font, roughly
)

// Bounds that keep the page light.
const (
	// instant is how soon after its arrival an event without a rule must
	// be released to count as passed through at once (drawn lightly).
	instant = 10 * time.Millisecond
	// maxLight is how many pass-through events are drawn one by one;
	// beyond it they are aggregated per lane into bins of aggPx pixels.
	maxLight = 300
	aggPx    = 4
	// maxEvents is how many other events (held, dropped, broken, aborted,
	// pending) are drawn; the rest, the latest, are counted on the page.
	maxEvents = 2000
	// Rows per lane beyond which marks or events overlap.
	maxMarkRows  = 4
	maxEventRows = 12
	maxStripRows = 6
	// maxSetLines is how many fields of a write a hover text lists.
	maxSetLines = 12
	// maxValue is how much of a field's value the page shows.
	maxValue = 120
)

// view is everything the template draws, computed in one place.
type view struct {
	Title      string
	Notes      []string
	Summary    []string
	Mark       string
	Width      int
	Height     int
	Legend     []legendItem
	Axis       axisView
	BandStripY float64
	Bands      []bandView
	Lanes      []laneView
	Violations []violationView
	Writes     []writeRow
	Faults     []faultRow
	VioRows    []violationRow
	Sections   []Section
}

// shape is one SVG primitive. Kind picks the element: rect (X, Y, W, H),
// line (X, Y to X2, Y2), circle (centre X, Y, radius W), path (D) or text
// (at X, Y, anchored by Anchor).
type shape struct {
	Kind   string
	Class  string
	X, Y   float64
	W, H   float64
	X2, Y2 float64
	D      string
	Text   string
	Anchor string
}

type legendItem struct {
	Class  string // names what the item explains, e.g. "lg-held"
	Shapes []shape
}

type axisView struct {
	Shapes []shape
}

type bandView struct {
	Client string
	Step   string
	Title  string
	Shapes []shape
}

type laneView struct {
	Client string
	ID     string
	Bg     shape   // drawn below the bands
	Shapes []shape // label, separator
	Events []eventView
	Writes []writeMark
	Faults []faultMark
}

type eventView struct {
	Class  string
	Fate   string
	Type   string
	Object string
	RV     string
	Count  int // events an aggregate stands for; 1 otherwise
	Title  string
	Shapes []shape
}

type writeMark struct {
	ID           string
	Row          string // the table row's id
	Class        string
	Verb         string
	Client       string
	Code         string
	Object       string
	Precondition string
	Caller       string
	Title        string
	Shapes       []shape
}

type faultMark struct {
	ID     string
	Row    string
	Kind   string
	Verb   string
	Client string
	Code   string
	Title  string
	Shapes []shape
}

type violationView struct {
	Oracle string
	Title  string
	Shapes []shape
}

type writeRow struct {
	ID           string
	Class        string
	Time         string
	Client       string
	Caller       string
	Verb         string
	Object       string
	Precondition string
	Answer       string
	Fields       []string
}

type faultRow struct {
	ID     string
	Time   string
	Client string
	Verb   string
	Object string
	Answer string
	Fault  string
}

type violationRow struct {
	Time    string
	Oracle  string
	Message string
}

// scale maps times to x.
type scale struct {
	mark   time.Time
	lo, hi float64 // seconds after mark at plotLeft and plotRight
}

func (s scale) sec(t time.Time) float64 { return t.Sub(s.mark).Seconds() }

func (s scale) x(t time.Time) float64 { return s.xs(s.sec(t)) }

func (s scale) xs(sec float64) float64 {
	return plotLeft + (sec-s.lo)/(s.hi-s.lo)*(plotRight-plotLeft)
}

func (s scale) at(t time.Time) string { return fmt.Sprintf("%+.3fs", s.sec(t)) }

// The kinds of events, by what the proxy did to them.
const (
	kindLight   = "released" // no rule, released at once
	kindHeld    = "held"
	kindPending = "pending"
	kindDropped = "dropped"
	kindBroken  = "broken"
	kindAborted = "aborted"
)

// evRef is an event of the trace (its index) and its kind.
type evRef struct {
	i    int
	kind string
}

func eventKind(ev *trace.Event) string {
	switch ev.Fate {
	case trace.Dropped:
		return kindDropped
	case trace.Broken:
		return kindBroken
	case trace.Aborted:
		return kindAborted
	case trace.Pending:
		return kindPending
	}
	if ev.Rule < 0 && !ev.Released.IsZero() && ev.Released.Sub(ev.Arrived) <= instant {
		return kindLight
	}
	return kindHeld
}

func objectKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// writeName is the name a write targets: the request's, or for a create
// the body's metadata.name (or generateName followed by "*").
func writeName(q *trace.Request) string {
	if q.Name != "" || q.Write == nil {
		return q.Name
	}
	if s, ok := jsonString(q.Write.Set["metadata.name"]); ok {
		return s
	}
	if s, ok := jsonString(q.Write.Set["metadata.generateName"]); ok {
		return s + "*"
	}
	return ""
}

func jsonString(raw string) (string, bool) {
	if raw == "" {
		return "", false
	}
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil || s == "" {
		return "", false
	}
	return s, true
}

func resourceOf(q *trace.Request) string {
	r := q.Resource
	if r == "" {
		r = q.Path
	}
	if q.Subresource != "" {
		r += "/" + q.Subresource
	}
	return r
}

func answer(code int) string {
	if code == 0 {
		return "no answer"
	}
	if t := http.StatusText(code); t != "" {
		return strconv.Itoa(code) + " " + t
	}
	return strconv.Itoa(code)
}

func answerClass(code int) string {
	switch {
	case code == http.StatusConflict:
		return "conflict"
	case code >= 200 && code < 300:
		return "ok"
	}
	return "error"
}

// faultKind is q's FaultKind ("expire", "rewind", "freeze", "frozen",
// "cut", "lose", "reset", "slow", "reject"), or "other".
func faultKind(q *trace.Request) string {
	if q.FaultKind == "" {
		return "other"
	}
	return string(q.FaultKind)
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func textW(s string) float64 { return charW * float64(utf8.RuneCountInString(s)) }

// pack puts spans (sorted by x0) into rows so that spans in a row do not
// overlap, first fit; past max rows a span goes to the row that frees
// first. It returns each span's row and the number of rows.
func pack(spans [][2]float64, max int) ([]int, int) {
	rows := make([]int, len(spans))
	var ends []float64
	for i, s := range spans {
		r := -1
		for j, e := range ends {
			if e <= s[0] {
				r = j
				break
			}
		}
		if r < 0 && len(ends) < max {
			ends = append(ends, math.Inf(-1))
			r = len(ends) - 1
		}
		if r < 0 {
			r = 0
			for j, e := range ends {
				if e < ends[r] {
					r = j
				}
			}
		}
		ends[r] = math.Max(ends[r], s[1])
		rows[i] = r
	}
	return rows, len(ends)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// builder holds what layout has worked out so far.
type builder struct {
	p    Page
	reqs []trace.Request
	evs  []trace.Event
	sc   scale
	end  time.Time // the trace's last instant

	trace   span // of the trace's entries
	focused bool // the axis spans the focus, not the whole trace

	objects map[string]bool // whose events are drawn
	clients []string        // one lane each, by name
	laneOf  map[string]int

	marks    []int          // writes and faulted requests, by start
	writeIDs map[int]string // request index → "w<n>"
	faultIDs map[int]string // request index → "f<n>"
	drawn    []evRef        // held, pending, dropped, broken, aborted events, by arrival
	lights   []evRef        // pass-through events, by arrival
	counts   map[string]int // events of the objects, by kind
	notDrawn int            // events past maxEvents

	// Events and marks outside the axis, not drawn, before and after it.
	evBefore, evAfter     int
	markBefore, markAfter int

	lanes []laneGeo
}

// laneGeo is where a lane's things go.
type laneGeo struct {
	marks     []markGeo
	events    []evGeo
	lights    []evRef
	markRows  int
	eventRows int
	top, h    float64
}

type markGeo struct {
	req    int
	write  bool // else a fault mark
	x0, x1 float64
	row    int
}

type evGeo struct {
	ref    evRef
	x0, x1 float64 // the drawing's extent
	row    int
}

// layout computes the whole picture from p. It reads maps only through
// sorted keys, so that the same Page gives the same view.
func layout(p Page) view {
	b := &builder{p: p, reqs: p.Trace.Requests, evs: p.Trace.Events}
	b.timeScale()
	b.selectObjects()
	b.selectClients()
	b.selectEvents()
	b.placeMarks()
	b.placeEvents()

	v := view{Title: cmp.Or(p.Title, "stalefuzz trace"), Notes: p.Notes, Sections: p.Sections, Width: svgWidth}
	if !b.sc.mark.IsZero() {
		v.Mark = b.sc.mark.UTC().Format(time.RFC3339Nano)
	}

	// From the top: legend, band labels, axis, lanes, violation labels.
	y := 8.0
	v.Legend, y = legend(y)
	y += 6
	bandTop := y
	bands, nBandRows := b.placeBands()
	y += float64(nBandRows) * stripRowH
	axisTop := y
	y += axisH
	lanesTop := y
	for l := range b.lanes {
		lg := &b.lanes[l]
		h := lanePad + float64(lg.markRows+lg.eventRows)*rowH + lanePad
		if len(lg.lights) > 0 {
			h += lightH
		}
		lg.top, lg.h = y, math.Max(h, 42)
		y += lg.h
	}
	if len(b.lanes) == 0 {
		y += 40
	}
	lanesBottom := y

	v.Axis.Shapes = axis(b.sc, axisTop, lanesBottom)
	for _, bg := range bands {
		v.Bands = append(v.Bands, b.drawBand(bg, bandTop, lanesTop, lanesBottom))
	}
	for l := range b.lanes {
		v.Lanes = append(v.Lanes, b.drawLane(l))
	}
	y = b.drawViolations(&v, bandTop, y+4)
	v.Height = int(math.Ceil(y + 12))

	for _, ri := range b.marks {
		q := &b.reqs[ri]
		if id, ok := b.writeIDs[ri]; ok {
			v.Writes = append(v.Writes, writeRowOf(b.sc, q, id))
		}
		if id, ok := b.faultIDs[ri]; ok {
			v.Faults = append(v.Faults, faultRow{ID: id, Time: b.sc.at(q.Start), Client: q.Client, Verb: q.Verb,
				Object: requestObject(resourceOf(q), q.Namespace, q.Name), Answer: answer(q.Code), Fault: q.Fault})
		}
	}
	v.Summary = b.summary(v)
	return v
}

// span is the earliest and the latest of the instants it has seen.
type span struct{ first, last time.Time }

func (s *span) see(t time.Time) {
	if t.IsZero() {
		return
	}
	if s.first.IsZero() || t.Before(s.first) {
		s.first = t
	}
	if s.last.IsZero() || t.After(s.last) {
		s.last = t
	}
}

func (s *span) empty() bool { return s.first.IsZero() }

// Room left and right of what the axis must show, in pixels, so that the
// glyphs of the first and the last thing fit in the plot area.
const (
	padLeft  = 18
	padRight = 24
)

// timeScale sets the mark and the time axis. The axis spans what matters
// (the focus): the writes, the events a rule touched (held, delayed,
// dropped, broken), the request faults, the bands, the violations, and the
// mark when Page.Mark is set. Without any of those, it spans the whole
// trace and the mark. It leaves out the rest, such as the controllers'
// start-up traffic long before the mark.
func (b *builder) timeScale() {
	var all, focus span
	for i := range b.reqs {
		q := &b.reqs[i]
		all.see(q.Start)
		all.see(q.Start.Add(q.Latency))
		if q.IsWrite() || q.Fault != "" {
			focus.see(q.Start)
			focus.see(q.Start.Add(q.Latency))
		}
	}
	for i := range b.evs {
		ev := &b.evs[i]
		all.see(ev.Arrived)
		all.see(ev.Released)
		if ev.Rule >= 0 {
			focus.see(ev.Arrived)
			focus.see(ev.Released)
		}
	}
	b.end = all.last
	b.trace = all
	for _, bd := range b.p.Bands {
		all.see(bd.Start)
		all.see(bd.End)
		focus.see(bd.Start)
		focus.see(bd.End)
	}
	for _, vi := range b.p.Violations {
		all.see(vi.At)
		if vi.At.IsZero() {
			// Drawn at the end of the trace.
			focus.see(b.end)
		}
		focus.see(vi.At)
	}
	if b.end.IsZero() {
		b.end = all.last
	}
	mark := b.p.Mark
	if mark.IsZero() {
		// The trace's first entry, not a band's or a violation's.
		for i := range b.reqs {
			if t := b.reqs[i].Start; !t.IsZero() && (mark.IsZero() || t.Before(mark)) {
				mark = t
			}
		}
		for i := range b.evs {
			if t := b.evs[i].Arrived; !t.IsZero() && (mark.IsZero() || t.Before(mark)) {
				mark = t
			}
		}
		if mark.IsZero() {
			mark = all.first
		}
	}
	b.sc = scale{mark: mark}
	lo, hi := 0.0, 0.0
	switch {
	case !focus.empty():
		b.focused = true
		lo, hi = b.sc.sec(focus.first), b.sc.sec(focus.last)
		if !b.p.Mark.IsZero() {
			lo, hi = math.Min(0, lo), math.Max(0, hi)
		}
	case !all.empty():
		lo, hi = math.Min(0, b.sc.sec(all.first)), math.Max(0, b.sc.sec(all.last))
	}
	if hi-lo < 0.05 {
		hi = lo + 0.05
	}
	// The focus fills the plot area but for padLeft and padRight pixels.
	perPx := (hi - lo) / (plotRight - plotLeft - padLeft - padRight)
	b.sc.lo, b.sc.hi = lo-padLeft*perPx, hi+padRight*perPx
}

// selectObjects decides whose events are drawn: Page.Objects, or every
// object written and every object an event was not simply passed on for.
func (b *builder) selectObjects() {
	b.objects = map[string]bool{}
	if len(b.p.Objects) > 0 {
		for _, o := range b.p.Objects {
			b.objects[o] = true
		}
		return
	}
	for i := range b.reqs {
		if b.reqs[i].IsWrite() {
			if n := writeName(&b.reqs[i]); n != "" {
				b.objects[objectKey(b.reqs[i].Namespace, n)] = true
			}
		}
	}
	for i := range b.evs {
		if b.evs[i].Name != "" && eventKind(&b.evs[i]) != kindLight {
			b.objects[objectKey(b.evs[i].Namespace, b.evs[i].Name)] = true
		}
	}
}

// selectClients makes a lane for every client in the trace or a band.
func (b *builder) selectClients() {
	set := map[string]bool{}
	for i := range b.reqs {
		set[b.reqs[i].Client] = true
	}
	for i := range b.evs {
		set[b.evs[i].Client] = true
	}
	for _, bd := range b.p.Bands {
		if bd.Client != "" {
			set[bd.Client] = true
		}
	}
	for c := range set {
		b.clients = append(b.clients, c)
	}
	slices.Sort(b.clients)
	b.laneOf = make(map[string]int, len(b.clients))
	for i, c := range b.clients {
		b.laneOf[c] = i
	}
	b.lanes = make([]laneGeo, len(b.clients))
}

// selectEvents picks the events of the objects, and the requests that are
// marks, in time order.
func (b *builder) selectEvents() {
	b.counts = map[string]int{}
	for i := range b.evs {
		ev := &b.evs[i]
		if ev.Name == "" || !b.objects[objectKey(ev.Namespace, ev.Name)] {
			continue
		}
		k := eventKind(ev)
		b.counts[k]++
		x0, x1 := b.evExtent(ev, k)
		if k == kindHeld || k == kindPending {
			if d := barSide(x0, x1); d != 0 {
				b.outside(d, &b.evBefore, &b.evAfter)
				continue
			}
		} else if d := pointSide(x0, reachOf(k)); d != 0 {
			b.outside(d, &b.evBefore, &b.evAfter)
			continue
		}
		if k == kindLight {
			b.lights = append(b.lights, evRef{i, k})
		} else {
			b.drawn = append(b.drawn, evRef{i, k})
		}
	}
	byArrival := func(x, y evRef) int {
		return cmp.Or(b.evs[x.i].Arrived.Compare(b.evs[y.i].Arrived), cmp.Compare(x.i, y.i))
	}
	slices.SortFunc(b.drawn, byArrival)
	slices.SortFunc(b.lights, byArrival)
	if len(b.drawn) > maxEvents {
		b.notDrawn = len(b.drawn) - maxEvents
		b.drawn = b.drawn[:maxEvents]
	}
	for _, r := range b.lights {
		l := b.laneOf[b.evs[r.i].Client]
		b.lanes[l].lights = append(b.lanes[l].lights, r)
	}

	for i := range b.reqs {
		if b.reqs[i].IsWrite() || b.reqs[i].Fault != "" {
			b.marks = append(b.marks, i)
		}
	}
	slices.SortFunc(b.marks, func(x, y int) int {
		return cmp.Or(b.reqs[x].Start.Compare(b.reqs[y].Start), cmp.Compare(x, y))
	})
}

// reach is how far a glyph's drawing reaches either side of its x (a cross,
// a stream's end before it, a circle, a diamond, a triangle).
const reach = 7

func reachOf(kind string) float64 {
	if kind == kindLight {
		return 0
	}
	return reach
}

// pointSide tells whether a glyph at x, reaching r pixels either side, is
// left of the plot area (-1), right of it (1) or whole in it (0).
func pointSide(x, r float64) int {
	switch {
	case x-r < plotLeft || math.IsNaN(x):
		return -1
	case x > plotRight:
		return 1
	}
	return 0
}

// barSide tells whether a bar from x0 to x1 is wholly left of the plot area
// (-1), wholly right of it (1) or (partly) in it (0): then it is clipped.
func barSide(x0, x1 float64) int {
	switch {
	case x1 < plotLeft || math.IsNaN(x0) || math.IsNaN(x1):
		return -1
	case x0 > plotRight:
		return 1
	}
	return 0
}

func (b *builder) outside(d int, before, after *int) {
	if d < 0 {
		*before++
	} else {
		*after++
	}
}

// evExtent is where an event's drawing runs, unclipped: from its arrival to
// its release (held) or to the end of the trace (pending).
func (b *builder) evExtent(ev *trace.Event, kind string) (x0, x1 float64) {
	x0 = b.sc.x(ev.Arrived)
	switch kind {
	case kindHeld:
		return x0, math.Max(x0, b.sc.x(ev.Released))
	case kindPending:
		return x0, math.Max(x0, b.sc.x(b.end))
	}
	return x0, x0
}

// clipBar clips a bar to the plot area, at least 2 px wide.
func clipBar(x0, x1 float64) (float64, float64) {
	x0 = math.Min(math.Max(x0, plotLeft), plotRight-2)
	x1 = math.Min(math.Max(x1, x0+2), plotRight)
	return x0, x1
}

// labelLeft tells whether a mark's label at x goes left of it, as it would
// run past the picture's right edge.
func labelLeft(x float64, label string) bool { return x+8+textW(label) > svgWidth-4 }

// placeMarks packs each lane's writes and faults into rows.
func (b *builder) placeMarks() {
	b.writeIDs, b.faultIDs = map[int]string{}, map[int]string{}
	for _, ri := range b.marks {
		q := &b.reqs[ri]
		lg := &b.lanes[b.laneOf[q.Client]]
		x := b.sc.x(q.Start)
		end := math.Max(x+6, math.Min(b.sc.x(q.Answered()), plotRight))
		// Every write and fault has its row in the tables; a mark
		// outside the axis is not drawn.
		d := pointSide(x, reach)
		geo := func(label string) (float64, float64) {
			if labelLeft(x, label) {
				return x - 8 - textW(label) - 4, end + 4
			}
			return x - 6, math.Max(end, x+8+textW(label)) + 4
		}
		if q.IsWrite() {
			b.writeIDs[ri] = "w" + strconv.Itoa(len(b.writeIDs))
			if d == 0 {
				x0, x1 := geo(writeLabel(q))
				lg.marks = append(lg.marks, markGeo{req: ri, write: true, x0: x0, x1: x1})
			} else {
				b.outside(d, &b.markBefore, &b.markAfter)
			}
		}
		if q.Fault != "" {
			b.faultIDs[ri] = "f" + strconv.Itoa(len(b.faultIDs))
			if d == 0 {
				x0, x1 := geo(faultKind(q))
				lg.marks = append(lg.marks, markGeo{req: ri, x0: x0, x1: x1})
			} else {
				b.outside(d, &b.markBefore, &b.markAfter)
			}
		}
	}
	for l := range b.lanes {
		ms := b.lanes[l].marks
		slices.SortStableFunc(ms, func(x, y markGeo) int { return cmp.Compare(x.x0, y.x0) })
		spans := make([][2]float64, len(ms))
		for i, m := range ms {
			spans[i] = [2]float64{m.x0, m.x1}
		}
		rows, n := pack(spans, maxMarkRows)
		for i := range ms {
			ms[i].row = rows[i]
		}
		b.lanes[l].markRows = max(1, n)
	}
}

// placeEvents packs each lane's drawn events into rows.
func (b *builder) placeEvents() {
	for _, r := range b.drawn {
		ev := &b.evs[r.i]
		lg := &b.lanes[b.laneOf[ev.Client]]
		x0, x1 := b.evExtent(ev, r.kind)
		if r.kind == kindHeld || r.kind == kindPending {
			x0, x1 = clipBar(x0, x1)
		}
		lg.events = append(lg.events, evGeo{ref: r, x0: x0, x1: x1})
	}
	for l := range b.lanes {
		es := b.lanes[l].events
		spans := make([][2]float64, len(es))
		for i, e := range es {
			spans[i] = [2]float64{e.x0 - 5, math.Max(e.x1, e.x0+5) + 2}
		}
		rows, n := pack(spans, maxEventRows)
		for i := range es {
			es[i].row = rows[i]
		}
		b.lanes[l].eventRows = n
	}
}

type bandGeo struct {
	b      Band
	x0, x1 float64
	label  string
	row    int
}

// placeBands packs the bands' labels into rows above the axis.
func (b *builder) placeBands() ([]bandGeo, int) {
	var bands []bandGeo
	for _, bd := range b.p.Bands {
		start, end := bd.Start, bd.End
		if start.IsZero() {
			start = b.sc.mark
		}
		x0 := b.sc.x(start)
		x1 := float64(plotRight)
		if !end.IsZero() {
			x1 = b.sc.x(end)
		}
		if x1 < x0 {
			x0, x1 = x1, x0
		}
		x0, x1 = clipBar(x0, x1)
		bands = append(bands, bandGeo{b: bd, x0: x0, x1: x1, label: clip(cmp.Or(bd.Label, "step"), 80)})
	}
	slices.SortStableFunc(bands, func(x, y bandGeo) int { return cmp.Compare(x.x0, y.x0) })
	spans := make([][2]float64, len(bands))
	for i, bg := range bands {
		spans[i] = [2]float64{bg.x0, math.Max(bg.x1, bg.x0+textW(bg.label)+8)}
	}
	rows, n := pack(spans, maxStripRows)
	for i := range bands {
		bands[i].row = rows[i]
	}
	return bands, n
}

// drawBand draws a band's label in its row and shades its lane (or all).
func (b *builder) drawBand(bg bandGeo, bandTop, lanesTop, lanesBottom float64) bandView {
	bd := bg.b
	bv := bandView{Client: bd.Client, Step: bd.Label, Title: bd.Label}
	if bd.Client != "" {
		bv.Title += "\nclient: " + bd.Client
	} else {
		bv.Title += "\nevery client"
	}
	if bd.Cause != "" {
		bv.Title += "\nin a real cluster: " + bd.Cause
	}
	hy := bandTop + float64(bg.row)*stripRowH
	sy, sh := lanesTop, lanesBottom-lanesTop
	if l, ok := b.laneOf[bd.Client]; ok && bd.Client != "" {
		sy, sh = b.lanes[l].top, b.lanes[l].h
	}
	bv.Shapes = []shape{
		{Kind: "rect", Class: "c-bandhead", X: bg.x0, Y: hy + 2, W: bg.x1 - bg.x0, H: stripRowH - 4},
		{Kind: "text", Class: "bandlabel", X: bg.x0 + 3, Y: hy + 12, Text: bg.label, Anchor: "start"},
		{Kind: "rect", Class: "c-band", X: bg.x0, Y: sy, W: bg.x1 - bg.x0, H: sh},
	}
	return bv
}

// drawLane draws lane l: its label, its marks in their rows, its events in
// theirs, and its pass-through events at the bottom.
func (b *builder) drawLane(l int) laneView {
	lg := &b.lanes[l]
	lv := laneView{Client: b.clients[l], ID: "lane-" + strconv.Itoa(l)}
	bg := "lane-bg"
	if l%2 == 1 {
		bg = "lane-bg odd"
	}
	nw := 0
	for _, m := range lg.marks {
		if m.write {
			nw++
		}
	}
	lv.Bg = shape{Kind: "rect", Class: bg, X: 0, Y: lg.top, W: svgWidth, H: lg.h}
	lv.Shapes = []shape{
		{Kind: "text", Class: "lanelabel", X: 8, Y: lg.top + 17, Text: clip(cmp.Or(lv.Client, "(no client name)"), 26), Anchor: "start"},
		{Kind: "text", Class: "lanecount", X: 8, Y: lg.top + 31, Text: plural(nw, "write", "writes") + " · " + plural(len(lg.events), "event", "events") + " marked", Anchor: "start"},
		{Kind: "line", Class: "lane-sep", X: 0, Y: lg.top + lg.h, X2: svgWidth, Y2: lg.top + lg.h},
	}

	marksY := lg.top + lanePad
	for _, m := range lg.marks {
		q := &b.reqs[m.req]
		cy := marksY + float64(m.row)*rowH + rowH/2
		x := b.sc.x(q.Start)
		if m.write {
			lv.Writes = append(lv.Writes, writeMarkOf(b.sc, q, b.writeIDs[m.req], x, cy))
		} else {
			lv.Faults = append(lv.Faults, faultMarkOf(b.sc, q, b.faultIDs[m.req], x, cy))
		}
	}

	evTop := marksY + float64(lg.markRows)*rowH
	for _, e := range lg.events {
		ry := evTop + float64(e.row)*rowH
		lv.Events = append(lv.Events, eventViewOf(b.sc, &b.evs[e.ref.i], e.ref.kind, e.x0, e.x1, ry))
	}

	if len(lg.lights) == 0 {
		return lv
	}
	ly := evTop + float64(lg.eventRows)*rowH
	if len(b.lights) > maxLight {
		lv.Events = append(lv.Events, aggregate(b.sc, b.evs, lg.lights, ly)...)
		return lv
	}
	for _, r := range lg.lights {
		ev := &b.evs[r.i]
		x := b.sc.x(ev.Arrived)
		lv.Events = append(lv.Events, eventView{
			Class: "event released", Fate: string(ev.Fate), Type: ev.Type,
			Object: ev.Resource + " " + objectKey(ev.Namespace, ev.Name), RV: ev.ResourceVersion, Count: 1,
			Title:  eventTitle(b.sc, ev, kindLight),
			Shapes: []shape{{Kind: "line", Class: "c-light", X: x, Y: ly + 1, X2: x, Y2: ly + lightH - 1}},
		})
	}
	return lv
}

// drawViolations draws each violation as a line from the band labels down
// to its own label, in rows from top; it returns the bottom of those rows.
func (b *builder) drawViolations(v *view, bandTop, top float64) float64 {
	type vioGeo struct {
		vi    Violation
		at    time.Time
		x     float64
		label string
		left  bool // the label goes left of the line, near the right edge
		span  [2]float64
	}
	var vios []vioGeo
	for _, vi := range b.p.Violations {
		at := vi.At
		if at.IsZero() {
			at = b.end
		}
		label := "✕ " + clip(cmp.Or(vi.Oracle, "oracle"), 40)
		g := vioGeo{vi: vi, at: at, x: b.sc.x(at), label: label}
		g.left = g.x+3+textW(label) > svgWidth-4
		g.span = [2]float64{g.x - 4, g.x + textW(label) + 8}
		if g.left {
			g.span = [2]float64{g.x - textW(label) - 8, g.x + 4}
		}
		vios = append(vios, g)
	}
	slices.SortStableFunc(vios, func(x, y vioGeo) int { return cmp.Compare(x.span[0], y.span[0]) })
	spans := make([][2]float64, len(vios))
	for i, g := range vios {
		spans[i] = g.span
	}
	rows, n := pack(spans, maxStripRows)
	for i, g := range vios {
		ly := top + float64(rows[i])*stripRowH
		lx, anchor := g.x+3, "start"
		if g.left {
			lx, anchor = g.x-3, "end"
		}
		v.Violations = append(v.Violations, violationView{
			Oracle: g.vi.Oracle,
			Title:  fmt.Sprintf("[%s] at %s\n%s", g.vi.Oracle, b.sc.at(g.at), g.vi.Message),
			Shapes: []shape{
				{Kind: "line", Class: "c-violation", X: g.x, Y: bandTop, X2: g.x, Y2: ly + 4},
				{Kind: "text", Class: "vlabel", X: lx, Y: ly + 12, Text: g.label, Anchor: anchor},
			},
		})
		v.VioRows = append(v.VioRows, violationRow{Time: b.sc.at(g.at), Oracle: g.vi.Oracle, Message: g.vi.Message})
	}
	return top + float64(n)*stripRowH
}

// summary says in words what the picture shows, and what it left out.
func (b *builder) summary(v view) []string {
	conflicts, errs, blind := 0, 0, 0
	for ri := range b.writeIDs {
		q := &b.reqs[ri]
		switch answerClass(q.Code) {
		case "conflict":
			conflicts++
		case "error":
			errs++
		}
		if q.SentRV == "" {
			blind++
		}
	}
	out := []string{
		fmt.Sprintf("%s; %s (%d answered 409 Conflict, %d another error or none; %d blind, without a resourceVersion precondition); %s; %s.",
			plural(len(b.clients), "client", "clients"), plural(len(b.writeIDs), "write", "writes"), conflicts, errs, blind,
			plural(len(b.faultIDs), "request fault", "request faults"), plural(len(b.p.Violations), "violation", "violations")),
		fmt.Sprintf("Watch events of %s drawn: %d held, %d still held at the end, %d dropped, %d broken, %d aborted, %d passed through at once.",
			plural(len(b.objects), "object", "objects"), b.counts[kindHeld], b.counts[kindPending], b.counts[kindDropped],
			b.counts[kindBroken], b.counts[kindAborted], b.counts[kindLight]),
	}
	if l := b.axisLine(); l != "" {
		out = append(out, l)
	}
	if len(b.lights) > maxLight {
		marks := 0
		for _, l := range v.Lanes {
			for _, e := range l.Events {
				if strings.Contains(e.Class, "aggregate") {
					marks++
				}
			}
		}
		out = append(out, fmt.Sprintf("The %d events passed through at once (no rule, released within %s) are more than %d: they are aggregated into %d marks of %d px per lane; hover one for its count.",
			len(b.lights), instant, maxLight, marks, aggPx))
	}
	if b.notDrawn > 0 {
		out = append(out, fmt.Sprintf("Only the first %d held, dropped, broken, aborted or pending events are drawn; %d later ones are not (see the trace).", maxEvents, b.notDrawn))
	}
	return out
}

// axisLine says what the axis spans when it does not span the whole trace,
// and what it left out; "" when it spans it all.
func (b *builder) axisLine() string {
	lo, hi := fmt.Sprintf("%+.3fs", b.sc.lo), fmt.Sprintf("%+.3fs", b.sc.hi)
	var left []string
	if b.evBefore > 0 {
		left = append(left, plural(b.evBefore, "event", "events")+" before t="+lo)
	}
	if b.evAfter > 0 {
		left = append(left, plural(b.evAfter, "event", "events")+" after t="+hi)
	}
	if b.markBefore > 0 {
		left = append(left, plural(b.markBefore, "write or fault mark", "write or fault marks")+" before t="+lo)
	}
	if b.markAfter > 0 {
		left = append(left, plural(b.markAfter, "write or fault mark", "write or fault marks")+" after t="+hi)
	}
	wider := !b.trace.empty() && (b.sc.sec(b.trace.first) < b.sc.lo || b.sc.sec(b.trace.last) > b.sc.hi)
	if !wider && len(left) == 0 {
		return ""
	}
	var s strings.Builder
	fmt.Fprintf(&s, "The axis spans t=%s to %s", lo, hi)
	if b.focused {
		s.WriteString(": the writes, the events a rule touched, the request faults, the bands and the violations")
		if !b.p.Mark.IsZero() {
			s.WriteString(", and the mark")
		}
	}
	if wider {
		fmt.Fprintf(&s, "; the trace runs from t=%s to %s", b.sc.at(b.trace.first), b.sc.at(b.trace.last))
	}
	s.WriteString(".")
	if len(left) > 0 {
		s.WriteString(" Outside it, not drawn: " + strings.Join(left, ", ") + " (the tables below list every write and request fault).")
	}
	return s.String()
}
