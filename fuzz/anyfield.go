package fuzz

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// anyFieldKey names one field of one resource: "group/resource path".
func anyFieldKey(o trace.Object, path string) string {
	return o.Group + "/" + o.Resource + " " + path
}

// statusResources are the resources (group/resource) written through their
// status subresource in tr: the apiserver ignores the status of their main
// resource's writes, so those paths are no write's value.
func statusResources(tr trace.Trace) map[string]bool {
	out := map[string]bool{}
	for _, r := range tr.Requests {
		if r.IsWrite() && r.Subresource == "status" && r.Code/100 == 2 {
			out[r.APIGroup+"/"+r.Resource] = true
		}
	}
	return out
}

// setValue is what r's body set at path, as the apiserver stores it: a
// main-resource write's status paths do not count for a resource with a
// status subresource.
func setValue(r *trace.Request, path string, status map[string]bool) (string, bool) {
	if r.Write == nil {
		return "", false
	}
	if r.Subresource == "" && (path == "status" || strings.HasPrefix(path, "status.")) && status[r.APIGroup+"/"+r.Resource] {
		return "", false
	}
	v, ok := r.Write.Set[path]
	return v, ok
}

// rewrittenFields are the fields (anyFieldKey) a controller changed in tr: a
// successful write of a proxied client that set a value other than the one
// the field held by the last acknowledged write (the workload's included).
// A field's first value is no change.
func rewrittenFields(tr trace.Trace, direct []directWrite, into map[string]bool) {
	type ack struct {
		obj    trace.Object
		rv     uint64
		set    map[string]string
		client bool
	}
	status := statusResources(tr)
	var acks []ack
	for _, d := range direct {
		acks = append(acks, ack{obj: d.obj, rv: d.rv, set: d.set})
	}
	for i := range tr.Requests {
		r := &tr.Requests[i]
		rv, err := strconv.ParseUint(r.ReturnedRV, 10, 64)
		if err != nil || !r.IsWrite() || r.DryRun || r.Code/100 != 2 || r.Write == nil {
			continue
		}
		set := map[string]string{}
		for p := range r.Write.Set {
			if v, ok := setValue(r, p, status); ok {
				set[p] = v
			}
		}
		acks = append(acks, ack{obj: r.Object(), rv: rv, set: set, client: true})
	}
	slices.SortStableFunc(acks, func(a, b ack) int { return cmp.Compare(a.rv, b.rv) })
	held := map[string]string{} // object and path → last acknowledged value
	for _, a := range acks {
		for p, v := range a.set {
			k := a.obj.String() + " " + p
			if prev, ok := held[k]; ok && prev != v && a.client {
				into[anyFieldKey(a.obj, p)] = true
			}
			held[k] = v
		}
	}
}

// lostUpdatesAnyField is the lost-update oracle over every field any write
// in tr (or the workload) set, except the rewritten ones
// (Scenario.LostUpdatesAnyField), on the resources the writer reads.
func lostUpdatesAnyField(tr trace.Trace, direct []directWrite, rewritten map[string]bool) []lost {
	status := statusResources(tr)
	reads := trace.NewReaders(tr)
	paths := map[string]bool{}
	for _, r := range tr.Requests {
		if r.IsWrite() && r.Write != nil && r.Code/100 == 2 {
			for p := range r.Write.Set {
				paths[p] = true
			}
		}
	}
	for _, d := range direct {
		for p := range d.set {
			paths[p] = true
		}
	}
	views := trace.NewViews(tr)
	var out []lost
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		out = append(out, lostUpdatesOf(tr, path, views, direct,
			func(r *trace.Request) (string, bool) {
				if rewritten[anyFieldKey(r.Object(), path)] || !reads.Read(r.Client, r.Object()) {
					return "", false
				}
				return setValue(r, path, status)
			},
			func(d directWrite) (string, bool) {
				if rewritten[anyFieldKey(d.obj, path)] {
					return "", false
				}
				v, ok := d.set[path]
				return v, ok
			},
			func(*trace.Request) bool { return true })...) // the values are what the bodies set
	}
	return out
}
