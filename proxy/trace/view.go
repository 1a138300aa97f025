package trace

import (
	"slices"
	"strconv"
	"time"
)

// Object names one API object: its group ("" for the core group), plural
// resource, namespace ("" for a cluster-scoped object) and name. A
// subresource is part of its object.
type Object struct {
	Group, Resource, Namespace, Name string
}

func (o Object) String() string {
	res := o.Resource
	if o.Group != "" {
		res += "." + o.Group
	}
	if o.Namespace == "" {
		return res + " " + o.Name
	}
	return res + " " + o.Namespace + "/" + o.Name
}

// Object is the object r reads or writes (Name empty for a list or a
// watch: see Shown).
func (r *Request) Object() Object {
	return Object{Group: r.APIGroup, Resource: r.Resource, Namespace: r.Namespace, Name: r.Name}
}

// Object is the object e is about.
func (e *Event) Object() Object {
	return Object{Group: e.Group, Resource: e.Resource, Namespace: e.Namespace, Name: e.Name}
}

// What a client has seen of an object is defined here, once, for every
// oracle, the audit and the engine's waits:
//
// A client has seen resourceVersion R of an object when, before the moment
// in question, the proxy had released to it a watch event of that object at
// R (WatchList initial events included), or had answered with R its GET of
// the object (a subresource of it included), or its LIST of the object's
// resource (same group) in the object's namespace or across namespaces: a
// list at R shows its client every object in its scope as of R, those it
// holds and, by their absence, those it does not. A list's selectors are not
// recorded, so a list is taken to cover every object of its scope: that can
// only make a view newer, never older, so it can hide a stale write but
// never invent one. What a client has seen is the newest such R. Its own
// writes' answers do not count: a controller acts on what its cache shows,
// and a write's answer does not reach its cache.

// Shown returns what e showed its client: the object and the
// resourceVersion, and whether it showed one at all (a released event of a
// named object with a resourceVersion).
func (e *Event) Shown() (Object, uint64, bool) {
	if e.Fate != Released || e.Name == "" {
		return Object{}, 0, false
	}
	rv, err := strconv.ParseUint(e.ResourceVersion, 10, 64)
	if err != nil {
		return Object{}, 0, false
	}
	return e.Object(), rv, true
}

// Shown returns what r's answer showed its client: for a GET, the object at
// the resourceVersion returned; for a LIST, its scope (Name empty; Namespace
// empty for every namespace) as of the list's resourceVersion; and whether
// it showed anything (a successful read with a resourceVersion).
func (r *Request) Shown() (Object, uint64, bool) {
	if r.Code != 200 || (r.Verb != "get" && r.Verb != "list") || r.Resource == "" || (r.Verb == "get" && r.Name == "") {
		return Object{}, 0, false
	}
	rv, err := strconv.ParseUint(r.ReturnedRV, 10, 64)
	if err != nil {
		return Object{}, 0, false
	}
	o := r.Object()
	if r.Verb == "list" {
		o.Name = ""
	}
	return o, rv, true
}

// Covers reports whether what was shown as o (an object, or a list's scope
// with Name empty) shows obj.
func (o Object) Covers(obj Object) bool {
	if o.Group != obj.Group || o.Resource != obj.Resource {
		return false
	}
	if o.Name == "" {
		return o.Namespace == "" || o.Namespace == obj.Namespace
	}
	return o.Namespace == obj.Namespace && o.Name == obj.Name
}

// Views answers, for a whole trace, what each client had seen of each
// object (see Shown) at any moment. Build it once with NewViews; each Seen
// is a binary search.
type Views struct {
	seen map[viewKey]*sightings
	// restarts are, per client, when its instances were stopped, in order.
	restarts map[string][]time.Time
}

// Instance is how many times client had been restarted at t (Trace.Restarts):
// what one instance was shown, or wrote, the next has not seen.
func (v *Views) Instance(client string, t time.Time) int { return v.instance(client, t) }

// instance is how many times client had been restarted at t: what one
// instance was shown, the next has not seen.
func (v *Views) instance(client string, t time.Time) int {
	n := 0
	for _, at := range v.restarts[client] {
		if !at.After(t) {
			n++
		}
	}
	return n
}

type viewKey struct {
	client   string
	instance int    // the client's restarts before the sighting
	obj      Object // Name "" for a list's scope
}

// sightings are the moments a client was shown a key, in time order, with
// the newest resourceVersion shown by then.
type sightings struct {
	at     []time.Time
	newest []uint64
}

// NewViews indexes what t's clients were shown.
func NewViews(t Trace) *Views {
	type point struct {
		at time.Time
		rv uint64
	}
	v := &Views{restarts: map[string][]time.Time{}}
	for _, r := range t.Restarts {
		v.restarts[r.Client] = append(v.restarts[r.Client], r.At)
	}
	for _, ts := range v.restarts {
		slices.SortFunc(ts, time.Time.Compare)
	}
	points := map[viewKey][]point{}
	for i := range t.Events {
		if o, rv, ok := t.Events[i].Shown(); ok {
			at := t.Events[i].Released
			k := viewKey{t.Events[i].Client, v.instance(t.Events[i].Client, at), o}
			points[k] = append(points[k], point{at, rv})
		}
	}
	for i := range t.Requests {
		r := &t.Requests[i]
		if o, rv, ok := r.Shown(); ok {
			at := r.Answered()
			k := viewKey{r.Client, v.instance(r.Client, at), o}
			points[k] = append(points[k], point{at, rv})
		}
	}
	v.seen = make(map[viewKey]*sightings, len(points))
	for k, ps := range points {
		slices.SortFunc(ps, func(a, b point) int { return a.at.Compare(b.at) })
		s := &sightings{at: make([]time.Time, len(ps)), newest: make([]uint64, len(ps))}
		var newest uint64
		for i, p := range ps {
			newest = max(newest, p.rv)
			s.at[i], s.newest[i] = p.at, newest
		}
		v.seen[k] = s
	}
	return v
}

// Seen is the newest resourceVersion of obj that client had been shown
// strictly before t, since its latest restart before t (Trace.Restarts: a
// restarted client is a new process that has seen nothing its predecessor
// was shown); 0 if none.
func (v *Views) Seen(client string, obj Object, before time.Time) uint64 {
	// The object itself, lists of its namespace, lists across namespaces.
	scopes := []Object{obj, {Group: obj.Group, Resource: obj.Resource}}
	if obj.Namespace != "" {
		scopes = append(scopes, Object{Group: obj.Group, Resource: obj.Resource, Namespace: obj.Namespace})
	}
	var rv uint64
	inst := v.instance(client, before)
	for _, scope := range scopes {
		s := v.seen[viewKey{client, inst, scope}]
		if s == nil {
			continue
		}
		// The last sighting before t.
		i, _ := slices.BinarySearchFunc(s.at, before, func(a, b time.Time) int {
			if a.Before(b) {
				return -1
			}
			return 1
		})
		if i > 0 {
			rv = max(rv, s.newest[i-1])
		}
	}
	return rv
}

// SeenItself is Seen without lists: the newest resourceVersion of obj
// itself (its watch events, its GETs) that client had been shown strictly
// before t, since its latest restart before t; 0 if none. A list at R says
// what its scope held as of R, not that obj changed after a given version:
// what an answer can be older than is the object's own version.
func (v *Views) SeenItself(client string, obj Object, before time.Time) uint64 {
	s := v.seen[viewKey{client, v.instance(client, before), obj}]
	if s == nil {
		return 0
	}
	if i := sightingsBefore(s, before); i > 0 {
		return s.newest[i-1]
	}
	return 0
}

// ShownAfter is the first moment strictly after t at which client was shown
// obj again (its watch event, its GET, a LIST of its scope), by the
// instance of client that ran at t; ok is false when that instance was
// shown it no more (a restart ends what an instance is shown).
func (v *Views) ShownAfter(client string, obj Object, t time.Time) (at time.Time, ok bool) {
	scopes := []Object{obj, {Group: obj.Group, Resource: obj.Resource}}
	if obj.Namespace != "" {
		scopes = append(scopes, Object{Group: obj.Group, Resource: obj.Resource, Namespace: obj.Namespace})
	}
	inst := v.instance(client, t)
	for _, scope := range scopes {
		s := v.seen[viewKey{client, inst, scope}]
		if s == nil {
			continue
		}
		i, found := slices.BinarySearchFunc(s.at, t, time.Time.Compare)
		for found && i < len(s.at) && s.at[i].Equal(t) {
			i++
		}
		if i < len(s.at) && (!ok || s.at[i].Before(at)) {
			at, ok = s.at[i], true
		}
	}
	return at, ok
}

// sightingsBefore is how many of s's sightings were strictly before t.
func sightingsBefore(s *sightings, t time.Time) int {
	i, _ := slices.BinarySearchFunc(s.at, t, func(a, b time.Time) int {
		if a.Before(b) {
			return -1
		}
		return 1
	})
	return i
}

// Readers are the clients that read each resource at all in a trace: a
// watch event of it released to them, or a GET or LIST of it answered (what
// Shown counts). A client that never reads a resource has no view of it, and
// no cache to be behind: an event recorder creates an Event and patches its
// count without ever reading one.
type Readers map[readKey]bool

type readKey struct{ client, group, resource string }

// NewReaders indexes what t's clients read.
func NewReaders(t Trace) Readers {
	out := Readers{}
	for i := range t.Events {
		if o, _, ok := t.Events[i].Shown(); ok {
			out[readKey{t.Events[i].Client, o.Group, o.Resource}] = true
		}
	}
	for i := range t.Requests {
		if o, _, ok := t.Requests[i].Shown(); ok {
			out[readKey{t.Requests[i].Client, o.Group, o.Resource}] = true
		}
	}
	return out
}

// Read reports whether client read obj's resource (its group and plural)
// at all.
func (r Readers) Read(client string, obj Object) bool {
	return r[readKey{client, obj.Group, obj.Resource}]
}
