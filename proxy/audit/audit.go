package audit

import (
	"cmp"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Report is the audit of one trace.
type Report struct {
	Rows       []Row       `json:"rows"`
	Overwrites []Overwrite `json:"overwrites"`
	// SelfStale are the writes sent from a view older than their writer's
	// own last acknowledged write to the object, in the order sent.
	SelfStale []SelfStale `json:"selfStale"`
	// Overtaken are the writes' answers that reached their client after
	// it had been shown a newer version of the object, in the order they
	// arrived.
	Overtaken []Overtaken `json:"overtaken"`
	// Start is t = 0 for the times printed: the trace's first entry (a
	// caller may set it to a schedule's mark).
	Start time.Time `json:"start"`
}

// WriteRef names one write: its client and call site (trace.Request.Caller),
// its verb, and the object (and subresource) written.
type WriteRef struct {
	Client      string `json:"client"`
	Caller      string `json:"caller,omitempty"`
	Verb        string `json:"verb"`
	Group       string `json:"group,omitempty"`
	Resource    string `json:"resource"`
	Subresource string `json:"subresource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name"`
}

// Object is the object written.
func (w WriteRef) Object() trace.Object {
	return trace.Object{Group: w.Group, Resource: w.Resource, Namespace: w.Namespace, Name: w.Name}
}

func refOf(r *trace.Request) WriteRef {
	return WriteRef{Client: r.Client, Caller: r.Caller, Verb: r.Verb, Group: r.APIGroup, Resource: r.Resource, Subresource: r.Subresource, Namespace: r.Namespace, Name: r.Name}
}

// Row counts one client's writes of one kind from one call site.
type Row struct {
	Client      string `json:"client"`
	Caller      string `json:"caller,omitempty"`
	Verb        string `json:"verb"`
	Resource    string `json:"resource"`
	Subresource string `json:"subresource,omitempty"`
	// Kind is create, update, merge patch, strategic-merge patch, JSON
	// patch, apply, apply --force, delete or deletecollection.
	Kind string `json:"kind"`
	// Lock is the precondition: "resourceVersion", "uid", "none", or "" for
	// a create (never blind).
	Lock       string `json:"lock"`
	Writes     int    `json:"writes"`
	Conflicts  int    `json:"conflicts"`  // answered 409 Conflict
	Failed     int    `json:"failed"`     // answered another error, or not at all
	Overwrites int    `json:"overwrites"` // flagged as a blind write over an unseen change
	// SelfStale counts the writes sent from a view older than the
	// writer's own last acknowledged write to the object (SelfStale);
	// SelfReplaced those of them that replaced a value of that own write.
	SelfStale    int `json:"selfStale"`
	SelfReplaced int `json:"selfReplaced"`
	// Fields are the paths the row's writes set (trace.Write.Set), sorted.
	Fields []string `json:"fields,omitempty"`
}

// Blind reports whether the row's writes carry no resourceVersion
// precondition and can replace what their writer has not seen.
func (r Row) Blind() bool { return r.Lock != "resourceVersion" && r.Lock != "" }

// Overwrite is one blind write that replaced a value its writer had not seen.
type Overwrite struct {
	At          time.Time `json:"at"`
	Client      string    `json:"client"`
	Caller      string    `json:"caller,omitempty"`
	Verb        string    `json:"verb"`
	Resource    string    `json:"resource"`
	Subresource string    `json:"subresource,omitempty"`
	Namespace   string    `json:"namespace,omitempty"`
	Name        string    `json:"name"`
	RV          string    `json:"rv"`   // the blind write's resourceVersion
	View        string    `json:"view"` // the newest of the object its writer had been sent ("" for none)
	Path        string    `json:"path"`
	Value       string    `json:"value"`    // what the blind write set
	Replaced    string    `json:"replaced"` // the value it replaced
	By          string    `json:"by"`       // the client that had written it
	ByCaller    string    `json:"byCaller,omitempty"`
	ByRV        string    `json:"byRV"` // the resourceVersion it was written at
	// Own is true when the replaced value was the same client's earlier
	// write, which its view had not yet shown (a cache behind its own
	// writes, or a restarted instance that never saw them).
	Own bool `json:"own,omitempty"`
}

func (o Overwrite) String() string {
	return o.header() + ": " + o.change(0)
}

// header names the write: who, what, where, its view.
func (o Overwrite) header() string {
	obj, verb, site := describe(o.Resource, o.Namespace, o.Name, o.Verb, o.Subresource, o.Caller)
	view := "had been sent no version of it"
	if o.View != "" {
		view = "had been sent rv " + o.View
	}
	return fmt.Sprintf("%s %s %s%s (rv %s; %s %s)", o.Client, verb, obj, site, o.RV, o.Client, view)
}

// describe names a write's object ("rollouts ns/r"), verb ("patch status")
// and call site (" at controller.go:70 ...", or "").
func describe(resource, namespace, name, verb, subresource, caller string) (obj, v, site string) {
	obj = resource + " " + name
	if namespace != "" {
		obj = resource + " " + namespace + "/" + name
	}
	v = verb
	if subresource != "" {
		v += " " + subresource
	}
	if caller != "" {
		site = " at " + caller
	}
	return obj, v, site
}

// change says what was replaced, values cut to width (0: whole).
func (o Overwrite) change(width int) string {
	by := o.By
	if o.Own {
		by += " itself, unseen"
	}
	v, r := o.Value, o.Replaced
	if width > 0 {
		v, r = cutAround(v, r, width)
	}
	return fmt.Sprintf("%s=%s replaced %s, written by %s at rv %s", o.Path, v, r, by, o.ByRV)
}

// cutAround cuts a and b to about width bytes each, around the first byte
// where they differ, so that what changed shows.
func cutAround(a, b string, width int) (string, string) {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	start := max(0, p-width/3)
	window := func(s string) string {
		if len(s) <= width {
			return s
		}
		st := min(start, len(s))
		end := min(len(s), st+width)
		out := s[st:end]
		if st > 0 {
			out = "…" + out
		}
		if end < len(s) {
			out += "…"
		}
		return out
	}
	return window(a), window(b)
}

// fieldList is the sorted paths with siblings grouped
// ("status.artifact.{digest,path}"), up to n groups, then how many more.
func fieldList(fields []string, n int) string {
	if len(fields) == 0 {
		return "-"
	}
	var groups []string
	for i := 0; i < len(fields); {
		parent, leaf := splitPath(fields[i])
		j := i + 1
		for j < len(fields) {
			if p, _ := splitPath(fields[j]); p != parent || parent == "" {
				break
			}
			j++
		}
		if j-i == 1 {
			groups = append(groups, fields[i])
		} else {
			leaves := []string{leaf}
			for _, f := range fields[i+1 : j] {
				_, l := splitPath(f)
				leaves = append(leaves, l)
			}
			groups = append(groups, parent+".{"+strings.Join(leaves, ",")+"}")
		}
		i = j
	}
	if len(groups) <= n {
		return strings.Join(groups, ",")
	}
	return strings.Join(groups[:n], ",") + fmt.Sprintf(",+%d", len(groups)-n)
}

// splitPath splits "a.b.c" into "a.b" and "c".
func splitPath(p string) (parent, leaf string) {
	i := strings.LastIndex(p, ".")
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

// write is a successful, stored write with its parsed resourceVersion.
type write struct {
	r  *trace.Request
	rv uint64
}

// Of audits tr.
func Of(tr trace.Trace) Report {
	rep := Report{Rows: []Row{}, Overwrites: []Overwrite{}, SelfStale: []SelfStale{}}
	if es := tr.Entries(); len(es) > 0 {
		rep.Start = es[0].Time()
	}
	rows := map[rowKey]*Row{}
	hasStatus := map[string]bool{}
	var stored []write
	for i := range tr.Requests {
		r := &tr.Requests[i]
		if !r.IsWrite() || r.DryRun {
			continue
		}
		key := keyOf(r)
		row := rows[key]
		if row == nil {
			row = &Row{Client: key.client, Caller: key.caller, Verb: key.verb, Resource: key.resource, Subresource: key.subresource, Kind: key.kind, Lock: key.lock}
			rows[key] = row
		}
		row.Writes++
		if r.Write != nil {
			for p := range r.Write.Set {
				if !slices.Contains(row.Fields, p) {
					row.Fields = append(row.Fields, p)
				}
			}
		}
		switch {
		case r.Code == 409:
			row.Conflicts++
		case r.Code/100 != 2:
			row.Failed++
		default:
			if r.Subresource == "status" {
				hasStatus[r.APIGroup+"/"+r.Resource] = true
			}
			if rv, err := strconv.ParseUint(r.ReturnedRV, 10, 64); err == nil {
				stored = append(stored, write{r, rv})
			}
		}
	}
	slices.SortFunc(stored, func(a, b write) int { return cmp.Compare(a.rv, b.rv) })
	views := trace.NewViews(tr)

	for i, w := range stored {
		r := w.r
		if r.SentRV != "" || (r.Verb != "update" && r.Verb != "patch") || r.Write == nil {
			continue
		}
		view := views.Seen(r.Client, r.Object(), r.Start)
		flagged := false
		for _, path := range slices.Sorted(maps.Keys(r.Write.Set)) {
			if skipPath(r, path, hasStatus) {
				continue
			}
			// The newest write to this path between the view and w.
			for j := i - 1; j >= 0 && stored[j].rv > view; j-- {
				x := stored[j].r
				if !sameObject(x, r) || x.Write == nil {
					continue
				}
				xPath, xVal, ok := overlapping(x, path, hasStatus)
				if !ok {
					continue
				}
				if !(xPath == path && xVal == r.Write.Set[path]) {
					rep.Overwrites = append(rep.Overwrites, Overwrite{
						At: r.Start, Client: r.Client, Caller: r.Caller, Verb: r.Verb, Resource: r.Resource, Subresource: r.Subresource,
						Namespace: r.Namespace, Name: r.Name, RV: r.ReturnedRV, View: rvString(view), Path: path,
						Value: r.Write.Set[path], Replaced: xVal, By: x.Client, ByCaller: x.Caller, ByRV: x.ReturnedRV, Own: x.Client == r.Client,
					})
					flagged = true
				}
				break
			}
		}
		if flagged {
			rows[keyOf(r)].Overwrites++
		}
	}
	for _, s := range selfStale(tr, views, hasStatus) {
		row := rows[keyOf(s.w)]
		row.SelfStale++
		if len(s.Replaced) > 0 {
			row.SelfReplaced++
		}
		rep.SelfStale = append(rep.SelfStale, s.SelfStale)
	}
	rep.Overtaken = overtaken(tr, views)
	for _, row := range rows {
		slices.Sort(row.Fields)
		rep.Rows = append(rep.Rows, *row)
	}
	slices.SortFunc(rep.Rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Client, b.Client), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Subresource, b.Subresource),
			cmp.Compare(a.Verb, b.Verb), cmp.Compare(a.Caller, b.Caller), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Lock, b.Lock))
	})
	return rep
}

// rowKey is what a Row counts by.
type rowKey struct{ client, caller, verb, resource, subresource, kind, lock string }

func keyOf(r *trace.Request) rowKey {
	k := rowKey{client: r.Client, caller: r.Caller, verb: r.Verb, resource: r.Resource, subresource: r.Subresource}
	k.kind, k.lock = classify(r)
	return k
}

// classify names a write's kind and precondition.
func classify(r *trace.Request) (kind, lock string) {
	kind = r.Verb
	if r.Verb == "patch" && r.Write != nil {
		switch r.Write.Patch {
		case "merge", "strategic-merge":
			kind = r.Write.Patch + " patch"
		case "json":
			kind = "JSON patch"
		case "apply":
			kind = "apply"
			if r.Write.Force {
				kind = "apply --force"
			}
		default:
			kind = "patch " + r.Write.Patch
		}
	}
	switch {
	case r.Verb == "create":
		return kind, ""
	case r.SentRV != "":
		return kind, "resourceVersion"
	case r.Write != nil && r.Write.UID != "":
		return kind, "uid"
	}
	return kind, "none"
}

func sameObject(a, b *trace.Request) bool { return a.Object() == b.Object() }

// skipPath: status paths of a main-resource write when the resource has a
// status subresource (the apiserver ignores them).
func skipPath(r *trace.Request, path string, hasStatus map[string]bool) bool {
	return r.Subresource == "" && hasStatus[r.APIGroup+"/"+r.Resource] && (path == "status" || strings.HasPrefix(path, "status."))
}

// overlapping returns the path of x's body that is path, inside it or around
// it, and its value.
func overlapping(x *trace.Request, path string, hasStatus map[string]bool) (string, string, bool) {
	if v, ok := x.Write.Set[path]; ok && !skipPath(x, path, hasStatus) {
		return path, v, true
	}
	for _, p := range slices.Sorted(maps.Keys(x.Write.Set)) {
		if skipPath(x, p, hasStatus) {
			continue
		}
		if strings.HasPrefix(p, path+".") || strings.HasPrefix(path, p+".") {
			return p, x.Write.Set[p], true
		}
	}
	return "", "", false
}

func rvString(rv uint64) string {
	if rv == 0 {
		return ""
	}
	return strconv.FormatUint(rv, 10)
}

// WriteTable writes r for a terminal: the rows, then each blind write over an
// unseen change.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT\tCALL SITE\tVERB\tRESOURCE\tKIND\tLOCK\tWRITES\t409\tFAILED\tOVERWROTE UNSEEN\tBEHIND OWN WRITE\tFIELDS")
	for _, row := range r.Rows {
		res := row.Resource
		if row.Subresource != "" {
			res += "/" + row.Subresource
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", row.Client, or(row.Caller, "-"), row.Verb, res, row.Kind,
			or(row.Lock, "-"), row.Writes, row.Conflicts, row.Failed, row.Overwrites, row.behind(), fieldList(row.Fields, 4))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("unable to write audit table: %w", err)
	}
	if err := r.writeSelfStale(w); err != nil {
		return err
	}
	if err := r.writeOvertaken(w); err != nil {
		return err
	}
	if len(r.Overwrites) == 0 {
		// The trace holds the proxied clients' writes only: a change made
		// straight to the apiserver (a workload's) is not audited here.
		_, err := fmt.Fprintln(w, "no blind write replaced a proxied client's change its writer had not seen")
		return err
	}
	fmt.Fprintf(w, "blind writes over an unseen change (%d fields):\n", len(r.Overwrites))
	// The first write of each client, call site, verb and object is shown
	// whole; the writes like it are counted below, so that a controller
	// that overwrites twenty times reads as one line and a count.
	shown := map[overwriteKind]string{} // kind → the header of its write shown
	more := map[overwriteKind]map[string]bool{}
	var kinds []overwriteKind
	last := ""
	for _, o := range r.Overwrites {
		k, h := o.kind(), o.header()
		if first, ok := shown[k]; ok && first != h {
			if more[k] == nil {
				more[k] = map[string]bool{}
			}
			more[k][h] = true
			continue
		}
		if _, ok := shown[k]; !ok {
			shown[k] = h
			kinds = append(kinds, k)
		}
		if h != last {
			fmt.Fprintf(w, "  t%+.3fs %s\n", o.At.Sub(r.Start).Seconds(), h)
			last = h
		}
		if _, err := fmt.Fprintf(w, "      %s\n", o.change(48)); err != nil {
			return err
		}
	}
	for _, k := range kinds {
		if n := len(more[k]); n > 0 {
			if _, err := fmt.Fprintf(w, "  ... and %d more writes like it: %s (each in --json and the picture)\n", n, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// overwriteKind is what makes blind writes alike: the writer, its call
// site, the verb and the object.
type overwriteKind struct {
	client, caller, verb, subresource, resource, namespace, name string
}

func (o Overwrite) kind() overwriteKind {
	return overwriteKind{o.Client, o.Caller, o.Verb, o.Subresource, o.Resource, o.Namespace, o.Name}
}

func (k overwriteKind) String() string {
	verb := k.verb
	if k.subresource != "" {
		verb += " " + k.subresource
	}
	obj := k.resource + " " + k.name
	if k.namespace != "" {
		obj = k.resource + " " + k.namespace + "/" + k.name
	}
	s := fmt.Sprintf("%s %s %s", k.client, verb, obj)
	if k.caller != "" {
		s += " at " + k.caller
	}
	return s
}

var htmlTable = template.Must(template.New("audit").Funcs(template.FuncMap{
	"or":  or,
	"res": func(r Row) string { return strings.TrimSuffix(r.Resource+"/"+r.Subresource, "/") },
	"t":   func(start, at time.Time) string { return fmt.Sprintf("t%+.3fs", at.Sub(start).Seconds()) },
}).Parse(`<table class="audit">
<thead><tr><th>client</th><th>call site</th><th>verb</th><th>resource</th><th>kind</th><th>lock</th><th>writes</th><th>409</th><th>failed</th><th>overwrote unseen</th><th>behind own write</th><th>fields</th></tr></thead>
<tbody>{{range .Rows}}<tr class="{{if .Blind}}blind{{else}}locked{{end}}{{if .Overwrites}} overwrote{{end}}"><td>{{.Client}}</td><td><code>{{or .Caller "-"}}</code></td><td>{{.Verb}}</td><td>{{res .}}</td><td>{{.Kind}}</td><td>{{or .Lock "-"}}</td><td>{{.Writes}}</td><td>{{.Conflicts}}</td><td>{{.Failed}}</td><td>{{.Overwrites}}</td><td>{{.Behind}}</td><td>{{range $i, $f := .Fields}}{{if $i}}, {{end}}<code>{{$f}}</code>{{end}}</td></tr>
{{end}}</tbody></table>
{{if .Overwrites}}<p>Blind writes over an unseen change ({{len .Overwrites}} fields):</p><ul class="overwrites">{{range .Overwrites}}<li>{{t $.Start .At}} {{.}}</li>{{end}}</ul>{{else}}<p>No blind write replaced a change its writer had not seen.</p>{{end}}
{{if .SelfStale}}<p>Writes sent from a view older than the writer's own last write ({{len .SelfStale}}):</p><ul class="selfstale">{{range .SelfStale}}<li>{{t $.Start .At}} {{.}}</li>{{end}}</ul>{{else}}<p>No write was sent from a view older than its writer's own last write.</p>{{end}}
{{if .Overtaken}}<p>Answers older than what their client had already been shown ({{len .Overtaken}}):</p><ul class="overtaken">{{range .Overtaken}}<li{{if .Lasting}} class="lasting"{{end}}>{{t $.Start .At}} {{.}}</li>{{end}}</ul>{{end}}`))

// HTML is r as an HTML fragment (a table and the list of overwrites) for
// report.Section.
func (r Report) HTML() template.HTML {
	var b strings.Builder
	if err := htmlTable.Execute(&b, r); err != nil {
		return template.HTML(template.HTMLEscapeString(err.Error()))
	}
	return template.HTML(b.String()) //nolint:gosec // produced by html/template
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}
