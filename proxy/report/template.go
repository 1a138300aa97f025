package report

import "html/template"

// pageTemplate is the document. Its Content-Security-Policy forbids every
// fetch and every script: the page is complete as written, and a browser
// refuses (and reports) anything that would reach out.
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{"f": f1}).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="generator" content="stalefuzz proxy/report">
<link rel="icon" href="data:,">
<title>{{.Title}}</title>
<style>
body { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 16px; color: #212529; background: #fff; }
h1 { font-size: 17px; margin: 0 0 6px; font-family: ui-monospace, "DejaVu Sans Mono", monospace; word-break: break-all; }
h2 { font-size: 15px; margin: 22px 0 6px; }
p { margin: 2px 0; }
.notes p { color: #495057; }
.summary p { color: #343a40; }
.picture { overflow-x: auto; margin: 10px 0; }
svg text { font-size: 11px; fill: #343a40; }
.lanelabel { font-weight: 600; font-size: 12px; }
.lanecount { fill: #868e96; font-size: 10px; }
.lane-bg { fill: #fff; }
.lane-bg.odd { fill: #f8f9fa; }
.lane-sep { stroke: #dee2e6; }
.axisline, .tick { stroke: #868e96; }
.grid { stroke: #e9ecef; }
.grid.zero { stroke: #adb5bd; stroke-dasharray: 2 2; }
.ticklabel, .axislabel { fill: #495057; font-size: 10px; }
.bandlabel { font-size: 10px; fill: #5c3c00; }
.c-band { fill: #fcc419; fill-opacity: .2; }
.c-bandhead { fill: #fcc419; fill-opacity: .65; }
.c-held { fill: #1c7ed6; }
.c-pending { fill: #a5d8ff; stroke: #1c7ed6; stroke-dasharray: 3 2; }
.barlabel { fill: #fff; font-size: 10px; }
.c-light { stroke: #adb5bd; stroke-width: 1; }
.c-lightagg { fill: #ced4da; }
.c-dropped { stroke: #212529; stroke-width: 2.2; fill: none; }
.c-broken { stroke: #ae3ec9; stroke-width: 2.2; fill: none; }
.c-breakline { stroke: #ae3ec9; stroke-width: 1.5; stroke-dasharray: 2 2; }
.c-aborted { fill: none; stroke: #1c7ed6; stroke-width: 1.8; }
.c-ok { fill: #2f9e44; stroke: #2f9e44; }
.c-conflict { fill: #e03131; stroke: #e03131; }
.c-error { fill: #f59f00; stroke: #f59f00; }
.hollow { fill: #fff; stroke-width: 2; }
.latency { stroke-width: 1.5; opacity: .5; }
.latency.held { stroke-dasharray: 3 2; opacity: .9; }
.marklabel { font-size: 10px; fill: #495057; }
.marklabel.m-conflict { fill: #e03131; font-weight: 700; }
.marklabel.m-error { fill: #e67700; font-weight: 700; }
.marklabel.m-fault { fill: #7048e8; }
.c-fault { fill: #7048e8; }
.c-violation { stroke: #c2255c; stroke-width: 2; stroke-dasharray: 6 3; }
.vlabel { fill: #c2255c; font-weight: 600; }
.legendtext { font-size: 11px; }
a .write:hover path, a .fault:hover path { stroke: #000; stroke-width: 2; }
table { border-collapse: collapse; margin: 6px 0; font-size: 12px; }
th, td { border: 1px solid #dee2e6; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f1f3f5; }
td.client { white-space: nowrap; }
td.t { font-family: ui-monospace, "DejaVu Sans Mono", monospace; white-space: nowrap; }
td.fields { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 11px; word-break: break-all; }
tr.conflict td.answer { color: #c92a2a; font-weight: 600; }
tr.error td.answer { color: #e67700; font-weight: 600; }
tr:target { background: #fff3bf; }
.violations-list li { color: #a61e4d; }
</style>
</head>
<body>
<h1 class="title">{{.Title}}</h1>
{{with .Notes}}<div class="notes">{{range .}}<p>{{.}}</p>{{end}}</div>{{end}}
<div class="summary">{{range .Summary}}<p>{{.}}</p>{{end}}{{with .Mark}}<p>The mark (t = 0) is {{.}}.</p>{{end}}</div>
<div class="picture">
<svg class="timeline" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="timeline of the trace">
<g class="lane-backgrounds">{{range .Lanes}}{{template "shape" .Bg}}{{end}}</g>
<g class="legend">{{range .Legend}}<g class="{{.Class}}">{{range .Shapes}}{{template "shape" .}}{{end}}</g>{{end}}</g>
<g class="axis">{{range .Axis.Shapes}}{{template "shape" .}}{{end}}</g>
<g class="bands">{{range .Bands}}
<g class="band" data-client="{{.Client}}" data-step="{{.Step}}"><title>{{.Title}}</title>{{range .Shapes}}{{template "shape" .}}{{end}}</g>{{end}}
</g>
{{range .Lanes}}
<g class="lane" id="{{.ID}}" data-client="{{.Client}}">{{range .Shapes}}{{template "shape" .}}{{end}}
{{range .Events}}<g class="{{.Class}}" data-fate="{{.Fate}}" data-type="{{.Type}}" data-object="{{.Object}}" data-rv="{{.RV}}" data-count="{{.Count}}"><title>{{.Title}}</title>{{range .Shapes}}{{template "shape" .}}{{end}}</g>
{{end}}{{range .Writes}}<a href="#{{.Row}}"><g class="{{.Class}}" id="{{.ID}}" data-verb="{{.Verb}}" data-client="{{.Client}}" data-code="{{.Code}}" data-object="{{.Object}}" data-precondition="{{.Precondition}}" data-caller="{{.Caller}}"><title>{{.Title}}</title>{{range .Shapes}}{{template "shape" .}}{{end}}</g></a>
{{end}}{{range .Faults}}<a href="#{{.Row}}"><g class="fault" id="{{.ID}}" data-fault="{{.Kind}}" data-verb="{{.Verb}}" data-client="{{.Client}}" data-code="{{.Code}}"><title>{{.Title}}</title>{{range .Shapes}}{{template "shape" .}}{{end}}</g></a>
{{end}}</g>{{end}}
<g class="violations">{{range .Violations}}
<g class="violation" data-oracle="{{.Oracle}}"><title>{{.Title}}</title>{{range .Shapes}}{{template "shape" .}}{{end}}</g>{{end}}
</g>
</svg>
</div>
{{with .VioRows}}<h2>Violations</h2>
<ul class="violations-list">{{range .}}<li><code>{{.Time}}</code> [{{.Oracle}}] {{.Message}}</li>{{end}}</ul>{{end}}
<h2>Writes</h2>
{{if .Writes}}<table class="writes">
<thead><tr><th>t</th><th>client</th><th>call site</th><th>verb</th><th>object</th><th>precondition</th><th>answer</th><th>fields</th></tr></thead>
<tbody>{{range .Writes}}
<tr id="{{.ID}}" class="{{.Class}}"><td class="t">{{.Time}}</td><td class="client">{{.Client}}</td><td>{{.Caller}}</td><td>{{.Verb}}</td><td>{{.Object}}</td><td>{{.Precondition}}</td><td class="answer">{{.Answer}}</td><td class="fields">{{range $i, $l := .Fields}}{{if $i}}<br>{{end}}{{$l}}{{end}}</td></tr>{{end}}
</tbody></table>{{else}}<p>No writes.</p>{{end}}
{{with .Faults}}<h2>Request faults</h2>
<table class="faults">
<thead><tr><th>t</th><th>client</th><th>verb</th><th>object</th><th>answer</th><th>fault</th></tr></thead>
<tbody>{{range .}}
<tr id="{{.ID}}"><td class="t">{{.Time}}</td><td class="client">{{.Client}}</td><td>{{.Verb}}</td><td>{{.Object}}</td><td>{{.Answer}}</td><td>{{.Fault}}</td></tr>{{end}}
</tbody></table>{{end}}
{{range .Sections}}<section class="section">
<h2>{{.Title}}</h2>
{{.HTML}}
</section>
{{end}}</body>
</html>
{{define "shape"}}{{if eq .Kind "rect"}}<rect class="{{.Class}}" x="{{f .X}}" y="{{f .Y}}" width="{{f .W}}" height="{{f .H}}"/>{{else if eq .Kind "line"}}<line class="{{.Class}}" x1="{{f .X}}" y1="{{f .Y}}" x2="{{f .X2}}" y2="{{f .Y2}}"/>{{else if eq .Kind "circle"}}<circle class="{{.Class}}" cx="{{f .X}}" cy="{{f .Y}}" r="{{f .W}}"/>{{else if eq .Kind "path"}}<path class="{{.Class}}" d="{{.D}}"/>{{else if eq .Kind "text"}}<text class="{{.Class}}" x="{{f .X}}" y="{{f .Y}}" text-anchor="{{.Anchor}}">{{.Text}}</text>{{end}}{{end}}`
