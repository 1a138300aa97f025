package fuzz

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
// replica index orders them; a random suffix does not). The elements of a
// list the kind's CRD declares x-kubernetes-list-type: map are matched by
// their x-kubernetes-list-map-keys, not by their order (a ServiceMonitor's
// status.bindings, which two Prometheus append to in either order). A name a client
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
	return endKeyed(list.Items, ignore, flattener{lists: e.listMaps[gvk], ns: ns}), nil
}

// endKeyed flattens objects and keys them: by name, or, for a generated
// name (generateName, or a name a client generated the same way:
// clientGeneratedPrefix), by owner, prefix and index.
func endKeyed(items []unstructured.Unstructured, ignore []string, f flattener) endObjects {
	out := endObjects{}
	groups := map[string][]map[string]string{} // generated names, by owner and generateName
	for _, o := range items {
		flat := map[string]string{}
		f.flatten("", "", o.Object, flat)
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

// flatten writes v's leaves under prefix into out, as JSON, each list's
// elements by index.
func flatten(prefix string, v any, out map[string]string) { flattener{}.flatten(prefix, "", v, out) }

// flattener flattens an object of a kind whose schema declares lists of
// type map (listMaps): their elements are named by their keys, not by
// their index, as the apiserver itself tells them apart, so that two runs
// whose writers appended the same entries in another order (two
// Prometheus bound to one ServiceMonitor, each adding its binding to
// status.bindings) hold the same paths. Its zero value names every
// element by index.
type flattener struct {
	lists listMaps
	// ns is the execution's namespace: a key's value equal to it is
	// written "$(namespace)", so that runs in other namespaces match.
	ns string
}

// flatten writes v's leaves under prefix into out; at is prefix without
// its elements' names, the path of v in the kind's schema.
func (f flattener) flatten(prefix, at string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			p, a := k, k
			if prefix != "" {
				p, a = prefix+"."+k, at+"."+k
			}
			f.flatten(p, a, c, out)
		}
	case []any:
		names := f.elementNames(at, t)
		for i, c := range t {
			f.flatten(prefix+names[i], at, c, out)
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

// elementNames names the elements of the list at schema path at:
// "[key=value,...]" with the keys its schema declares, when every element
// has them as scalars and no two share them; "[i]" otherwise.
func (f flattener) elementNames(at string, list []any) []string {
	names := make([]string, len(list))
	keys := f.lists[at]
	seen := map[string]bool{}
	for i, c := range list {
		m, ok := c.(map[string]any)
		if !ok || len(keys) == 0 {
			return indexNames(list)
		}
		var b strings.Builder
		for j, k := range keys {
			v, ok := m[k]
			switch v.(type) {
			case string, bool, int64, float64:
			default:
				ok = false
			}
			if !ok {
				return indexNames(list)
			}
			s := fmt.Sprint(v)
			if f.ns != "" && s == f.ns {
				s = "$(namespace)"
			}
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(k + "=" + s)
		}
		if seen[b.String()] {
			return indexNames(list)
		}
		seen[b.String()] = true
		names[i] = "[" + b.String() + "]"
	}
	return names
}

func indexNames(list []any) []string {
	names := make([]string, len(list))
	for i := range list {
		names[i] = fmt.Sprintf("[%d]", i)
	}
	return names
}

// listMaps are the lists of one kind's schema declared
// x-kubernetes-list-type: map: their path (dotted, no element names) →
// x-kubernetes-list-map-keys.
type listMaps map[string][]string

// crdListMaps reads the list maps of every version of crds' kinds.
func crdListMaps(crds []*apiextensionsv1.CustomResourceDefinition) map[schema.GroupVersionKind]listMaps {
	out := map[schema.GroupVersionKind]listMaps{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			lm := listMaps{}
			walkListMaps("", v.Schema.OpenAPIV3Schema, lm)
			if len(lm) > 0 {
				out[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = lm
			}
		}
	}
	return out
}

func walkListMaps(at string, s *apiextensionsv1.JSONSchemaProps, out listMaps) {
	for name, p := range s.Properties {
		a := name
		if at != "" {
			a = at + "." + name
		}
		walkListMaps(a, &p, out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		if s.XListType != nil && *s.XListType == "map" && len(s.XListMapKeys) > 0 {
			out[at] = s.XListMapKeys
		}
		walkListMaps(at, s.Items.Schema, out)
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
