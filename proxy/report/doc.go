// Package report draws a trace as a picture: a self-contained HTML page with
// inline SVG (no script, style sheet or font is fetched; it opens from disk).
//
// One lane per client, sorted by name. The windows of a schedule's steps are
// shaded bands labelled with the step. Every watch event of the involved
// objects runs from its arrival at the proxy to its release to the client: a
// held event is a bar, a dropped or broken one a cross; hovering shows its
// type, object and resourceVersion. Every write is a mark: verb, resource and
// subresource, object, its precondition (the resourceVersion it sent, or
// none), the apiserver's answer (409 Conflict in a colour of its own) and the
// fields it set. Oracle violations are marks at their time; the title is the
// schedule.
//
// What the page guarantees:
//
//   - It is complete as written: its Content-Security-Policy forbids every
//     fetch and every script, it has no script, and it refers to nothing but
//     its own fragments and data: URLs. A browser that opens it logs nothing.
//   - Everything taken from the trace, the bands and the violations is
//     escaped (html/template); only Section.HTML is trusted.
//   - The same Page gives the same bytes.
//   - The time axis is in seconds after Page.Mark. It spans what matters,
//     with a little room either side: the writes, the events a rule touched
//     (held, delayed, dropped, broken), the request faults, the bands, the
//     violations, and the mark when Page.Mark is set; without any of those,
//     the whole trace and the mark. So the controllers' start-up traffic
//     long before the mark does not squeeze the rest to one side. Nothing
//     is drawn outside the plot area: an event held across its edge is
//     clipped there, and the events and marks wholly outside it are left
//     out, which the page counts ("N events before t=…"); the tables still
//     list every write and request fault. A Band with a zero Start starts at
//     the mark; with a zero End it runs to the end of the picture.
//   - Events drawn are those of Page.Objects (zero: of every object a write
//     named, and every object an event was held, dropped, broken or aborted
//     for); events without a name (bookmarks) are not drawn. An event no
//     rule touched and released within 10ms is drawn lightly, as a tick;
//     past 300 such events on the axis they are aggregated per lane into
//     marks of 4 px (data-count says how many each stands for), and the page
//     says so. Of the other events on the axis the first 2000 are drawn, and
//     the page counts the rest.
//   - Below the picture: the violations, a table of every write (time,
//     client, call site, verb, object, precondition, answer, fields set and
//     fields of the answer), a table of request faults, then Page.Sections.
//     Each write's mark links to its row.
//
// The SVG elements carry classes and data attributes that tools and tests
// may rely on:
//
//   - <g class="lane" data-client="…">, one per client, holding its marks;
//   - <g class="band" data-client="…" data-step="…"> (data-client "" shades
//     every lane);
//   - <g class="event K" data-fate data-type data-object data-rv data-count>
//     with K one of held (a bar; "held pending" if never released), released
//     (passed through at once; "released aggregate" for a bin), dropped,
//     broken, aborted;
//   - <g class="write A L" data-verb data-client data-code data-object
//     data-precondition data-caller> with A one of ok (2xx), conflict (409)
//     or error (anything else, or no answer) and L locked or blind, plus
//     "faulted" when the proxy faulted the write;
//   - <g class="fault" data-fault data-verb data-client data-code>, where
//     data-fault is the fault's first word (expire, rewind, freeze, frozen,
//     cut) or "other";
//   - <g class="violation" data-oracle="…">.
//
// Every mark's hover text is its SVG <title>. The legend's items are
// <g class="legend-item lg-…">, apart from the marks.
//
// hack/screenshot.sh renders a page into a PNG with headless Chromium.
//
// Package report reads no environment variables. Its tests read
// STALEFUZZ_NO_CHROMIUM: "1" skips the check in headless Chromium, which
// otherwise fails when chromium is not on PATH (make deps installs it).
package report
