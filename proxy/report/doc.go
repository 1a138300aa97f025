// Package report draws a trace as a picture: a self-contained HTML page with
// inline SVG (no script, style sheet or font is fetched; it opens from disk).
//
// One lane per client. The windows of a schedule's steps are shaded bands
// labelled with the step. Every watch event of the involved objects runs from
// its arrival at the proxy to its release to the client: a held event is a
// bar, a dropped or broken one a cross; hovering shows its type, object and
// resourceVersion. Every write is a mark: verb, resource and subresource,
// object, its precondition (the resourceVersion it sent, or none), the
// apiserver's answer (409 Conflict in a colour of its own) and the fields it
// set. Oracle violations are marks at their time; the title is the schedule.
//
// Package report reads no environment variables.
package report
