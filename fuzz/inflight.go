package fuzz

import (
	"context"
	"encoding/json"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/redact"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// inFlight follows what was written and what each watching client has been
// sent of it. A write whose watch event has not yet reached a client that
// watches its object is in flight: the controllers may still act on it, so
// the run is not settled, however long it has been quiet. On a loaded
// machine an event can take longer than the quiet period (or an idle
// probe's look) to arrive, and a run judged before it arrives is judged on
// a controller that has not yet seen the workload, or its own last write.
//
// Writes are the clients' (from the trace) and the workload's through
// Exec.Direct: creates, updates and patches that stored a resourceVersion
// (a delete's event carries another). A client watches an object when it
// has opened a watch of the object's resource and group, without a
// selector, in its namespace or across namespaces, or when it has been
// sent an event of the object (a watch with a selector shows only some).
type inFlight struct {
	written  map[trace.Object]uint64
	sent     map[clientObject]uint64
	watching map[string][]trace.Object // client → scopes it watches (Name empty)
}

type clientObject struct {
	client string
	obj    trace.Object
}

func newInFlight() *inFlight {
	return &inFlight{written: map[trace.Object]uint64{}, sent: map[clientObject]uint64{}, watching: map[string][]trace.Object{}}
}

// wrote records a write that stored rv of obj.
func (f *inFlight) wrote(obj trace.Object, rv uint64) {
	f.written[obj] = max(f.written[obj], rv)
}

// request records a request of a client: a write it made, or a watch it
// opened.
func (f *inFlight) request(r *trace.Request) {
	switch {
	case (r.Verb == "create" || r.Verb == "update" || r.Verb == "patch") && r.Code/100 == 2 && !r.DryRun:
		if rv, err := strconv.ParseUint(r.ReturnedRV, 10, 64); err == nil {
			f.wrote(r.Object(), rv)
		}
	case r.Verb == "watch" && r.Code == 200 && r.FaultKind == "" && !r.Selected:
		scope := r.Object()
		scope.Name = ""
		f.watching[r.Client] = append(f.watching[r.Client], scope)
	}
}

// released records an event released to its client, or dropped (a Drop
// rule: it will never reach the client, so nothing of it is in flight).
func (f *inFlight) released(ev *trace.Event) {
	if ev.Fate == trace.Dropped {
		r := *ev
		r.Fate = trace.Released // for Shown: the object and version it had
		ev = &r
	}
	if obj, rv, ok := ev.Shown(); ok {
		k := clientObject{ev.Client, obj}
		f.sent[k] = max(f.sent[k], rv)
	}
}

// count is how many (client, object) pairs have a write in flight.
func (f *inFlight) count() int {
	n := 0
	for obj, rv := range f.written {
		for c, scopes := range f.watching {
			if f.sent[clientObject{c, obj}] < rv && watches(scopes, obj) {
				n++
			}
		}
		for k, got := range f.sent {
			if k.obj == obj && got < rv && !watches(f.watching[k.client], obj) {
				n++ // a selected watch that has shown this object before
			}
		}
	}
	return n
}

// watches reports whether one of scopes covers obj.
func watches(scopes []trace.Object, obj trace.Object) bool {
	for _, s := range scopes {
		if s.Covers(obj) {
			return true
		}
	}
	return false
}

// recordingClient is c with every create, update and patch (of the object
// or a subresource) that stored a resourceVersion reported to wrote, with
// the written object's values at paths and, with bodies, what the write's
// body set (proxy.BodyValues).
func recordingClient(c client.WithWatch, paths []string, bodies bool, wrote func(obj trace.Object, rv uint64, fields, set map[string]string)) client.WithWatch {
	// body is what a write asks for, read before the call rewrites obj.
	body := func(obj client.Object, patch client.Patch) (contentType string, data []byte) {
		if !bodies {
			return "", nil
		}
		if patch != nil {
			data, err := patch.Data(obj)
			if err != nil {
				return "", nil
			}
			return string(patch.Type()), data
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return "", nil
		}
		return "application/json", data
	}
	record := func(obj client.Object, sub, contentType string, data []byte, err error) error {
		if err != nil {
			return err
		}
		rv, perr := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
		if perr != nil {
			return nil
		}
		gvk, gerr := c.GroupVersionKindFor(obj)
		if gerr != nil {
			return nil
		}
		m, merr := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if merr != nil {
			return nil
		}
		var fields, set map[string]string
		if len(paths) > 0 {
			u, ok := obj.(*unstructured.Unstructured)
			content := map[string]any(nil)
			if ok {
				content = u.Object
			} else if conv, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err == nil {
				content = conv
			}
			fields = proxy.FieldValues(content, redact.Resource{Group: m.Resource.Group, Resource: m.Resource.Resource}, paths)
		}
		if data != nil {
			set = proxy.BodyValues(redact.Resource{Group: m.Resource.Group, Resource: m.Resource.Resource, Subresource: sub}, contentType, data)
		}
		wrote(objectOf(m.Resource, obj), rv, fields, set)
		return nil
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			ct, data := body(obj, nil)
			return record(obj, "", ct, data, c.Create(ctx, obj, opts...))
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			ct, data := body(obj, nil)
			return record(obj, "", ct, data, c.Update(ctx, obj, opts...))
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			ct, data := body(obj, patch)
			return record(obj, "", ct, data, c.Patch(ctx, obj, patch, opts...))
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			ct, data := body(obj, nil)
			return record(obj, sub, ct, data, c.SubResource(sub).Update(ctx, obj, opts...))
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			ct, data := body(obj, patch)
			return record(obj, sub, ct, data, c.SubResource(sub).Patch(ctx, obj, patch, opts...))
		},
	})
}

func objectOf(gvr schema.GroupVersionResource, obj client.Object) trace.Object {
	return trace.Object{Group: gvr.Group, Resource: gvr.Resource, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}
