package fuzz

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EndState is the end-state oracle for the objects of GVK in the
// execution's namespace: once a run settled, its objects must be those of
// the no-fault reference runs of the same knob settings (two of them), and
// hold the same values, except where the reference runs differ from each
// other (those paths are masked, as Sieve masks them) and in fields that
// name an instant or an identity (resourceVersion, uid, timestamps,
// managedFields, and every field whose name ends in Time or Timestamp).
// Objects are matched by name, or, for a generated name, by their
// controller owner and generateName, in the order of their contents (a
// replica index orders them; a random suffix does not). A name a client
// generated itself the way generateName does ("prefix-" and five
// characters of apimachinery's random alphabet) counts as generated. Two runs cannot
// show every nondeterminism (which of two workers a scale-down deletes at
// random): before a difference is reported, EndStateConfirmations more
// no-fault runs of the knob settings widen the mask, once per setting, and
// only what none of them shows is a violation. A run that never
// settled is not judged.
type EndState struct {
	GVK schema.GroupVersionKind
	// Ignore are dotted paths (and everything below them) never compared:
	// what the controller sets differently by design in runs the
	// reference runs happen not to show ("metadata.labels.ray.io/worker-group-replica-index"
	// of the worker a scale-down keeps at random). Zero: none.
	Ignore []string
}

// EndStateConfirmations is how many more no-fault runs widen a knob
// setting's end-state masks, the first time a run differs from its two
// reference runs.
const EndStateConfirmations = 4

// endObjects is one run's objects of one kind: by key (name, or owner and
// generateName with an index), each flattened to dotted path → JSON value.
type endObjects map[string]map[string]string

// endSnapshot lists the kind in ns and flattens each object.
func (e *Env) endSnapshot(ctx context.Context, ns string, gvk schema.GroupVersionKind, ignore []string) (endObjects, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := e.direct.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("end-state oracle: unable to list %s in %s: %w", gvk.Kind, ns, err)
	}
	return endKeyed(list.Items, ignore), nil
}

// endKeyed flattens objects and keys them: by name, or, for a generated
// name (generateName, or a name a client generated the same way:
// clientGeneratedPrefix), by owner, prefix and index.
func endKeyed(items []unstructured.Unstructured, ignore []string) endObjects {
	out := endObjects{}
	groups := map[string][]map[string]string{} // generated names, by owner and generateName
	for _, o := range items {
		flat := map[string]string{}
		flatten("", o.Object, flat)
		for p := range flat {
			for _, ig := range ignore {
				if p == ig || strings.HasPrefix(p, ig+".") || strings.HasPrefix(p, ig+"[") {
					delete(flat, p)
				}
			}
		}
		g := o.GetGenerateName()
		if g == "" {
			g = clientGeneratedPrefix(o.GetName())
		}
		if g == "" {
			out[o.GetName()] = flat
			continue
		}
		owner := "(no owner)"
		for _, ref := range o.GetOwnerReferences() {
			if ref.Controller != nil && *ref.Controller {
				owner = ref.Kind + " " + ref.Name
			}
		}
		base := owner + "/" + g + "*"
		groups[base] = append(groups[base], flat)
	}
	// A generated name tells nothing: the objects of one owner and
	// generateName are matched in the order of their contents, not of
	// their names (a replica index, not a random suffix, orders them).
	for base, objs := range groups {
		slices.SortFunc(objs, func(a, b map[string]string) int { return cmp.Compare(fingerprint(a), fingerprint(b)) })
		for i, flat := range objs {
			out[fmt.Sprintf("%s#%d", base, i)] = flat
		}
	}
	return out
}

// randomAlphabet is the alphabet of k8s.io/apimachinery/pkg/util/rand's
// String, which the apiserver's generateName and clients that choose a
// random name themselves draw suffixes from.
const randomAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// clientGeneratedPrefix is the prefix of a name that looks generated the
// way generateName generates one, "prefix-" and five characters of
// randomAlphabet, by a client that sets the name itself (so that it knows
// the name before the apiserver answers); "" for any other name. Such a
// name differs from run to run, so it is matched as generateName is.
func clientGeneratedPrefix(name string) string {
	const n = 5
	if len(name) <= n+1 || name[len(name)-n-1] != '-' {
		return ""
	}
	for _, c := range name[len(name)-n:] {
		if !strings.ContainsRune(randomAlphabet, c) {
			return ""
		}
	}
	return name[:len(name)-n]
}

// fingerprint is an object's flattened contents but its name, in path
// order.
func fingerprint(flat map[string]string) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(flat)) {
		if p != "metadata.name" {
			b.WriteString(p + "=" + flat[p] + "\n")
		}
	}
	return b.String()
}

// volatile says whether a path names an instant or an identity, which no
// two runs share.
func volatile(path string) bool {
	last := path[strings.LastIndexByte(path, '.')+1:]
	if i := strings.IndexByte(last, '['); i >= 0 {
		last = last[:i]
	}
	switch {
	case strings.HasPrefix(path, "metadata.managedFields"),
		path == "metadata.resourceVersion", path == "metadata.uid", path == "metadata.namespace",
		path == "metadata.creationTimestamp", path == "metadata.deletionTimestamp",
		strings.HasPrefix(path, "metadata.ownerReferences") && strings.HasSuffix(path, ".uid"),
		strings.HasSuffix(last, "Time"), strings.HasSuffix(last, "Timestamp"), last == "time":
		return true
	}
	return false
}

// flatten writes v's leaves under prefix into out, as JSON.
func flatten(prefix string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, c, out)
		}
	case []any:
		for i, c := range t {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), c, out)
		}
		if len(t) == 0 {
			out[prefix] = "[]"
		}
	default:
		if volatile(prefix) {
			return
		}
		b, _ := json.Marshal(t)
		out[prefix] = string(b)
	}
}

// endReference is, per EndState, the first reference run's objects and
// the paths masked because the two reference runs differ there (or an
// object's key is in one only: then the whole object is masked, and its
// presence is not judged).
type endReference struct {
	objects endObjects
	masked  map[string]map[string]bool // key → masked paths; nil map: the whole object
}

func newEndReference(a, b endObjects) endReference {
	r := endReference{objects: a, masked: map[string]map[string]bool{}}
	for key, ao := range a {
		bo, ok := b[key]
		if !ok {
			r.masked[key] = nil
			continue
		}
		m := map[string]bool{}
		for p, v := range ao {
			if bo[p] != v {
				m[p] = true
			}
		}
		for p := range bo {
			if _, ok := ao[p]; !ok {
				m[p] = true
			}
		}
		r.masked[key] = m
	}
	for key := range b {
		if _, ok := a[key]; !ok {
			r.objects[key] = nil
			r.masked[key] = nil
		}
	}
	return r
}

// widen masks what another no-fault run o shows differently: its paths
// that differ, and whole objects it lacks or adds.
func (r endReference) widen(o endObjects) {
	for key, want := range r.objects {
		m := r.masked[key]
		if m == nil {
			continue
		}
		have, ok := o[key]
		if !ok {
			r.masked[key] = nil
			continue
		}
		for p, v := range want {
			if have[p] != v {
				m[p] = true
			}
		}
		for p := range have {
			if _, ok := want[p]; !ok {
				m[p] = true
			}
		}
	}
	for key := range o {
		if _, ok := r.objects[key]; !ok {
			r.objects[key] = nil
			r.masked[key] = nil
		}
	}
}

// endDiff is one way a run's object differs from the reference: missing
// (Path empty, Have absent), present where no reference run has it (Path
// empty, Want absent), or a path's value.
type endDiff struct {
	state      int // index in Scenario.EndStates
	Kind, Key  string
	Path       string
	Have, Want string // "" for absent
	Missing    bool   // the object is missing
	Extra      bool   // the object is in no reference run
}

// seenIn reports whether a no-fault run's objects o show the same
// difference from the reference.
func (d endDiff) seenIn(o endObjects) bool {
	obj, ok := o[d.Key]
	switch {
	case d.Missing:
		return !ok
	case d.Extra:
		return ok
	}
	return ok && obj[d.Path] == d.Have
}

// variesIn reports whether the diff's path takes more than one value (or
// is absent in some) among no-fault runs.
func (d endDiff) variesIn(runs []endObjects) bool {
	if d.Missing || d.Extra || len(runs) < 2 {
		return false
	}
	first, firstOK := runs[0][d.Key][d.Path]
	for _, r := range runs[1:] {
		if v, ok := r[d.Key][d.Path]; v != first || ok != firstOK {
			return true
		}
	}
	return false
}

// judge compares a run's objects with the reference, returning one
// message per object that differs, naming the object and the field.
func (r endReference) judge(kind string, got endObjects) []string {
	msgs, _ := r.diff(kind, got)
	return msgs
}

// diff is judge, with each difference as an endDiff too.
func (r endReference) diff(kind string, got endObjects) ([]string, []endDiff) {
	var out []string
	var diffs []endDiff
	for _, key := range slices.Sorted(maps.Keys(r.objects)) {
		want, m := r.objects[key], r.masked[key]
		if m == nil {
			continue // in one reference run only: not judged
		}
		have, ok := got[key]
		if !ok {
			out = append(out, fmt.Sprintf("%s %s: missing; both no-fault reference runs have it", kind, key))
			diffs = append(diffs, endDiff{Kind: kind, Key: key, Missing: true})
			continue
		}
		var words []string
		for _, p := range slices.Sorted(maps.Keys(want)) {
			if !m[p] && have[p] != want[p] {
				words = append(words, fmt.Sprintf("%s=%s (reference runs: %s)", p, or(have[p], "absent"), want[p]))
				diffs = append(diffs, endDiff{Kind: kind, Key: key, Path: p, Have: have[p], Want: want[p]})
			}
		}
		for _, p := range slices.Sorted(maps.Keys(have)) {
			if _, ok := want[p]; !ok && !m[p] {
				words = append(words, fmt.Sprintf("%s=%s (absent in the reference runs)", p, have[p]))
				diffs = append(diffs, endDiff{Kind: kind, Key: key, Path: p, Have: have[p]})
			}
		}
		if len(words) > 0 {
			if len(words) > 4 {
				words = append(words[:4], fmt.Sprintf("and %d more", len(words)-4))
			}
			out = append(out, fmt.Sprintf("%s %s: %s", kind, key, strings.Join(words, "; ")))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(got)) {
		if _, ok := r.objects[key]; !ok {
			out = append(out, fmt.Sprintf("%s %s: present; no no-fault reference run has it", kind, key))
			diffs = append(diffs, endDiff{Kind: kind, Key: key, Extra: true})
		}
	}
	return out, diffs
}
