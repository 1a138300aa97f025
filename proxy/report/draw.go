package report

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// legend lays out one item per kind of mark from y down, wrapping rows.
func legend(y float64) ([]legendItem, float64) {
	type item struct {
		class  string
		text   string
		shapes func(x, cy float64) []shape
	}
	bar := func(class string) func(x, cy float64) []shape {
		return func(x, cy float64) []shape {
			return []shape{{Kind: "rect", Class: class, X: x, Y: cy - 6, W: 20, H: 12}}
		}
	}
	items := []item{
		{"lg-band", "step window", func(x, cy float64) []shape {
			return []shape{{Kind: "rect", Class: "c-bandhead", X: x, Y: cy - 7, W: 20, H: 14}}
		}},
		{"lg-held", "event held (arrival → release)", bar("c-held")},
		{"lg-pending", "still held at the end", bar("c-pending")},
		{"lg-released", "passed through at once", func(x, cy float64) []shape {
			return []shape{{Kind: "line", Class: "c-light", X: x + 10, Y: cy - 5, X2: x + 10, Y2: cy + 5}}
		}},
		{"lg-dropped", "dropped", func(x, cy float64) []shape { return dropShapes(x+10, cy) }},
		{"lg-broken", "stream broken before it", func(x, cy float64) []shape { return breakShapes(x+10, cy) }},
		{"lg-aborted", "stream ended while held", func(x, cy float64) []shape {
			return []shape{{Kind: "circle", Class: "c-aborted", X: x + 10, Y: cy, W: 4.5}}
		}},
		{"lg-locked", "write with resourceVersion precondition", func(x, cy float64) []shape {
			return []shape{{Kind: "path", Class: "c-ok", D: diamond(x+10, cy)}}
		}},
		{"lg-blind", "blind write (no precondition)", func(x, cy float64) []shape {
			return []shape{{Kind: "path", Class: "c-ok hollow", D: diamond(x+10, cy)}}
		}},
		{"lg-ok", "answered 2xx", func(x, cy float64) []shape {
			return []shape{{Kind: "rect", Class: "c-ok", X: x + 4, Y: cy - 6, W: 12, H: 12}}
		}},
		{"lg-conflict", "409 Conflict", func(x, cy float64) []shape {
			return []shape{{Kind: "rect", Class: "c-conflict", X: x + 4, Y: cy - 6, W: 12, H: 12}}
		}},
		{"lg-error", "other error or no answer", func(x, cy float64) []shape {
			return []shape{{Kind: "rect", Class: "c-error", X: x + 4, Y: cy - 6, W: 12, H: 12}}
		}},
		{"lg-fault", "request fault", func(x, cy float64) []shape {
			return []shape{{Kind: "path", Class: "c-fault", D: triangle(x+10, cy)}}
		}},
		{"lg-violation", "oracle violation", func(x, cy float64) []shape {
			return []shape{{Kind: "line", Class: "c-violation", X: x + 10, Y: cy - 7, X2: x + 10, Y2: cy + 7}}
		}},
	}
	var out []legendItem
	x := 8.0
	cy := y + legendRowH/2
	for _, it := range items {
		w := 26 + 0.9*textW(it.text) + 18
		if x+w > svgWidth-8 && x > 8 {
			x = 8
			cy += legendRowH
		}
		sh := it.shapes(x, cy)
		sh = append(sh, shape{Kind: "text", Class: "legendtext", X: x + 26, Y: cy + 4, Text: it.text, Anchor: "start"})
		out = append(out, legendItem{Class: "legend-item " + it.class, Shapes: sh})
		x += w
	}
	return out, cy + legendRowH/2
}

// axis draws ticks at a round step above the lanes and faint grid lines
// through them.
func axis(sc scale, top, bottom float64) []shape {
	span := sc.hi - sc.lo
	raw := span / 10
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	dec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	sh := []shape{{Kind: "line", Class: "axisline", X: plotLeft, Y: top + axisH - 6, X2: plotRight, Y2: top + axisH - 6}}
	for k := int(math.Ceil(sc.lo / step)); float64(k)*step <= sc.hi; k++ {
		t := float64(k) * step
		x := sc.xs(t)
		label := strconv.FormatFloat(t, 'f', dec, 64)
		grid := "grid"
		if k == 0 {
			label, grid = "0", "grid zero"
		}
		sh = append(sh,
			shape{Kind: "line", Class: "tick", X: x, Y: top + axisH - 10, X2: x, Y2: top + axisH - 6},
			shape{Kind: "text", Class: "ticklabel", X: x, Y: top + axisH - 13, Text: label, Anchor: "middle"},
			shape{Kind: "line", Class: grid, X: x, Y: top + axisH - 6, X2: x, Y2: bottom})
	}
	sh = append(sh, shape{Kind: "text", Class: "axislabel", X: 8, Y: top + axisH - 13, Text: "t (s) after the mark", Anchor: "start"})
	return sh
}

func f1(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

func diamond(x, cy float64) string {
	return fmt.Sprintf("M%s %sL%s %sL%s %sL%s %sZ", f1(x), f1(cy-6), f1(x+6), f1(cy), f1(x), f1(cy+6), f1(x-6), f1(cy))
}

func triangle(x, cy float64) string {
	return fmt.Sprintf("M%s %sL%s %sL%s %sZ", f1(x-5), f1(cy-5), f1(x+5), f1(cy-5), f1(x), f1(cy+5))
}

func cross(x, cy float64) string {
	return fmt.Sprintf("M%s %sL%s %sM%s %sL%s %s", f1(x-4), f1(cy-4), f1(x+4), f1(cy+4), f1(x-4), f1(cy+4), f1(x+4), f1(cy-4))
}

func dropShapes(x, cy float64) []shape {
	return []shape{{Kind: "path", Class: "c-dropped", D: cross(x, cy)}}
}

// breakShapes is a cross of another colour after a dashed vertical line:
// the stream ended just before the event.
func breakShapes(x, cy float64) []shape {
	return []shape{
		{Kind: "line", Class: "c-breakline", X: x - 6, Y: cy - 7, X2: x - 6, Y2: cy + 7},
		{Kind: "path", Class: "c-broken", D: cross(x, cy)},
	}
}

func eventTitle(sc scale, ev *trace.Event, kind string) string {
	typ := cmp.Or(ev.Type, "(unparsed)")
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s rv=%s\n%s, watch stream %d\narrived %s", typ, ev.Resource, objectKey(ev.Namespace, ev.Name), ev.ResourceVersion, ev.Client, ev.Stream, sc.at(ev.Arrived))
	rule := ""
	if ev.Rule >= 0 {
		rule = " by rule " + strconv.Itoa(ev.Rule)
	}
	switch kind {
	case kindLight:
		fmt.Fprintf(&b, ", released at once (no rule)")
	case kindHeld:
		held := ev.Released.Sub(ev.Arrived)
		fmt.Fprintf(&b, "; released %s (held %.3fs)", sc.at(ev.Released), held.Seconds())
		if ev.Rule >= 0 {
			b.WriteString(rule)
		} else {
			b.WriteString(", behind an earlier held event (no rule)")
		}
	case kindPending:
		b.WriteString("; still held at the end of the trace" + rule)
	case kindDropped:
		b.WriteString("; dropped, never forwarded" + rule)
	case kindBroken:
		b.WriteString("; its stream was ended just before it" + rule + " (a re-watch replays it)")
	case kindAborted:
		b.WriteString("; its stream ended while it was held" + rule)
	}
	return b.String()
}

func eventViewOf(sc scale, ev *trace.Event, kind string, x0, x1, ry float64) eventView {
	e := eventView{
		Class:  "event " + kind,
		Fate:   string(ev.Fate),
		Type:   ev.Type,
		Object: ev.Resource + " " + objectKey(ev.Namespace, ev.Name),
		RV:     ev.ResourceVersion,
		Count:  1,
		Title:  eventTitle(sc, ev, kind),
	}
	cy := ry + rowH/2
	switch kind {
	case kindHeld, kindPending:
		if kind == kindPending {
			e.Class = "event held pending"
		}
		cls := "c-held"
		if kind == kindPending {
			cls = "c-pending"
		}
		e.Shapes = append(e.Shapes, shape{Kind: "rect", Class: cls, X: x0, Y: ry + 3, W: x1 - x0, H: rowH - 6})
		label := cmp.Or(ev.Type, "?") + " rv=" + ev.ResourceVersion
		if textW(label)+6 <= x1-x0 {
			e.Shapes = append(e.Shapes, shape{Kind: "text", Class: "barlabel", X: x0 + 3, Y: cy + 4, Text: label, Anchor: "start"})
		}
	case kindDropped:
		e.Shapes = dropShapes(x0, cy)
	case kindBroken:
		e.Shapes = breakShapes(x0, cy)
	case kindAborted:
		e.Shapes = []shape{{Kind: "circle", Class: "c-aborted", X: x0, Y: cy, W: 4.5}}
	}
	return e
}

// aggregate draws a lane's pass-through events as one mark per bin of
// aggPx pixels.
func aggregate(sc scale, evs []trace.Event, refs []evRef, ly float64) []eventView {
	var out []eventView
	for i := 0; i < len(refs); {
		bin := math.Floor((sc.x(evs[refs[i].i].Arrived) - plotLeft) / aggPx)
		j := i + 1
		for j < len(refs) && math.Floor((sc.x(evs[refs[j].i].Arrived)-plotLeft)/aggPx) == bin {
			j++
		}
		a, b := &evs[refs[i].i], &evs[refs[j-1].i]
		x := plotLeft + bin*aggPx
		e := eventView{
			Class: "event released aggregate", Fate: string(trace.Released), Count: j - i,
			Title: fmt.Sprintf("%s passed through at once (no rule) for %s, arrived %s to %s", plural(j-i, "event", "events"), a.Client, sc.at(a.Arrived), sc.at(b.Arrived)),
		}
		if j-i == 1 {
			e.Type, e.Object, e.RV = a.Type, a.Resource+" "+objectKey(a.Namespace, a.Name), a.ResourceVersion
			e.Title = eventTitle(sc, a, kindLight)
		}
		e.Shapes = []shape{{Kind: "rect", Class: "c-lightagg", X: x, Y: ly + 1, W: aggPx - 1, H: lightH - 2}}
		out = append(out, e)
		i = j
	}
	return out
}

func precondition(q *trace.Request) string {
	var parts []string
	if q.SentRV != "" {
		parts = append(parts, "resourceVersion "+q.SentRV)
	}
	if q.Write != nil && q.Write.UID != "" {
		parts = append(parts, "uid "+q.Write.UID)
	}
	if q.SentRV == "" {
		if len(parts) > 0 {
			return "none on resourceVersion (blind); " + strings.Join(parts, ", ")
		}
		return "none (blind)"
	}
	return strings.Join(parts, ", ")
}

func verbOf(q *trace.Request) string {
	v := q.Verb
	if w := q.Write; w != nil && w.Patch != "" {
		v += " (" + w.Patch
		if w.Force {
			v += ", force"
		}
		v += ")"
	}
	return v
}

// writeLabel is what a write mark says next to it: the verb, and the
// answer unless it is 2xx.
func writeLabel(q *trace.Request) string {
	switch q.FaultKind {
	case trace.FaultLose, trace.FaultReset, trace.FaultCut:
		// Applied, and its client never learned it: the answer's fate
		// is what a reader looks for.
		return q.Verb + " (applied, answer " + string(q.FaultKind) + ")"
	case trace.FaultSlow:
		return fmt.Sprintf("%s (answer held %v)", q.Verb, q.Held.Round(time.Millisecond))
	case trace.FaultReject:
		return fmt.Sprintf("%s %d (rejected, never sent)", q.Verb, q.Code)
	}
	if answerClass(q.Code) == "ok" {
		return q.Verb
	}
	if q.Code == 0 {
		return q.Verb + " (no answer)"
	}
	return q.Verb + " " + strconv.Itoa(q.Code)
}

func writeObject(q *trace.Request) string {
	return requestObject(q.Resource+subOf(q), q.Namespace, writeName(q))
}

func subOf(q *trace.Request) string {
	if q.Subresource == "" {
		return ""
	}
	return "/" + q.Subresource
}

// requestObject names what a request addressed: a resource and an object,
// or a collection ("configmaps in namespace ns").
func requestObject(resource, ns, name string) string {
	switch {
	case name != "":
		return strings.TrimSpace(resource + " " + objectKey(ns, name))
	case ns != "":
		return strings.TrimSpace(resource + " in namespace " + ns)
	}
	return resource
}

// fieldLines lists what a write set and what its answer held.
func fieldLines(q *trace.Request, limit int) []string {
	var out []string
	if w := q.Write; w != nil {
		if w.Manager != "" {
			out = append(out, "fieldManager: "+w.Manager)
		}
		keys := slices.Sorted(maps.Keys(w.Set))
		for i, k := range keys {
			if limit > 0 && i == limit {
				out = append(out, fmt.Sprintf("… %d more set", len(keys)-limit))
				break
			}
			out = append(out, "sets "+k+" = "+clip(w.Set[k], maxValue))
		}
		if w.Truncated {
			out = append(out, "(more fields set than the trace keeps)")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(q.Fields)) {
		out = append(out, "after: "+k+" = "+clip(q.Fields[k], maxValue))
	}
	return out
}

func writeMarkOf(sc scale, q *trace.Request, id string, x, cy float64) writeMark {
	ac := answerClass(q.Code)
	lock := "locked"
	if q.SentRV == "" {
		lock = "blind"
	}
	cls := "write " + ac + " " + lock
	if q.Fault != "" {
		cls += " faulted"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n%s at %s (answered after %s)\nprecondition: %s\nanswer: %s", verbOf(q), writeObject(q), q.Client, sc.at(q.Start), q.Latency.Round(time.Microsecond), precondition(q), answer(q.Code))
	if q.ReturnedRV != "" {
		fmt.Fprintf(&b, ", resourceVersion %s", q.ReturnedRV)
	}
	fmt.Fprintf(&b, "\ncall site: %s", cmp.Or(q.Caller, "unknown"))
	for _, l := range fieldLines(q, maxSetLines) {
		b.WriteString("\n" + l)
	}
	if q.Fault != "" {
		b.WriteString("\nfault: " + q.Fault)
	}
	m := writeMark{
		ID: "mark-" + id, Row: id, Class: cls, Verb: q.Verb, Client: q.Client, Code: strconv.Itoa(q.Code),
		Object: writeObject(q), Precondition: q.SentRV, Caller: q.Caller, Title: b.String(),
	}
	c := "c-" + ac
	if end := math.Min(sc.x(q.Start.Add(q.Latency)), plotRight); end-x >= 3 {
		m.Shapes = append(m.Shapes, shape{Kind: "line", Class: c + " latency", X: x, Y: cy, X2: end, Y2: cy})
	}
	if q.Held > 0 {
		// A Slow answer: from the apiserver's answer to the client's.
		from, to := math.Min(sc.x(q.Start.Add(q.Latency)), plotRight), math.Min(sc.x(q.Answered()), plotRight)
		if to-from >= 1 {
			m.Shapes = append(m.Shapes, shape{Kind: "line", Class: c + " latency held", X: from, Y: cy, X2: to, Y2: cy})
		}
	}
	dc := c
	if lock == "blind" {
		dc += " hollow"
	}
	m.Shapes = append(m.Shapes, shape{Kind: "path", Class: dc, D: diamond(x, cy)}, markLabel(x, cy, "marklabel m-"+ac, writeLabel(q)))
	return m
}

// markLabel is the text next to a mark at x: right of it, or left of it
// near the picture's right edge.
func markLabel(x, cy float64, class, label string) shape {
	if labelLeft(x, label) {
		return shape{Kind: "text", Class: class, X: x - 8, Y: cy + 4, Text: label, Anchor: "end"}
	}
	return shape{Kind: "text", Class: class, X: x + 8, Y: cy + 4, Text: label, Anchor: "start"}
}

func faultMarkOf(sc scale, q *trace.Request, id string, x, cy float64) faultMark {
	kind := faultKind(q)
	title := fmt.Sprintf("fault: %s\n%s %s\n%s at %s\nanswer: %s", q.Fault, q.Verb, requestObject(resourceOf(q), q.Namespace, q.Name), q.Client, sc.at(q.Start), answer(q.Code))
	return faultMark{
		ID: "mark-" + id, Row: id, Kind: kind, Verb: q.Verb, Client: q.Client, Code: strconv.Itoa(q.Code), Title: title,
		Shapes: []shape{
			{Kind: "path", Class: "c-fault", D: triangle(x, cy)},
			markLabel(x, cy, "marklabel m-fault", kind),
		},
	}
}

func writeRowOf(sc scale, q *trace.Request, id string) writeRow {
	ans := answer(q.Code)
	if q.ReturnedRV != "" {
		ans += ", resourceVersion " + q.ReturnedRV
	}
	if q.Fault != "" {
		ans += "; fault: " + q.Fault
	}
	return writeRow{
		ID: id, Class: answerClass(q.Code), Time: sc.at(q.Start), Client: q.Client, Caller: cmp.Or(q.Caller, "unknown"),
		Verb: verbOf(q), Object: writeObject(q), Precondition: precondition(q), Answer: ans, Fields: fieldLines(q, 0),
	}
}
