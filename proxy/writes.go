package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/request"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/stalefuzz/stalefuzz/proxy/redact"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// CallerHeader carries a write's call site from an in-process client (see
// Client.Config) to the proxy, which records it as trace.Request.Caller and
// does not forward it.
const CallerHeader = "X-Stalefuzz-Caller"

// describeWrite reads what a write to res asks for from its query and body
// (body is nil when it could not be held), and a delete's resourceVersion
// precondition. What it sets is recorded redacted (package redact).
func describeWrite(r *http.Request, verb string, res redact.Resource, body []byte) (w *trace.Write, deleteRV string) {
	q := r.URL.Query()
	w = &trace.Write{Manager: q.Get("fieldManager"), Force: q.Get("force") == "true"}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if verb == "patch" {
		switch mt {
		case "application/merge-patch+json":
			w.Patch = "merge"
		case "application/strategic-merge-patch+json":
			w.Patch = "strategic-merge"
		case "application/json-patch+json":
			w.Patch = "json"
		case "application/apply-patch+yaml", "application/apply-patch+cbor":
			w.Patch = "apply"
		default:
			w.Patch = mt
		}
	}
	if body == nil {
		return w, ""
	}
	if verb == "delete" || verb == "deletecollection" {
		if obj := objectOf(body, mt); obj != nil {
			if pre, ok := obj["preconditions"].(map[string]any); ok {
				w.UID, _ = pre["uid"].(string)
				deleteRV, _ = pre["resourceVersion"].(string)
			}
		}
		return w, deleteRV
	}
	set, uid, ok := setOf(w.Patch, mt, body)
	if !ok {
		return w, ""
	}
	w.UID = uid
	w.Set, w.Truncated = encodeSet(res, set)
	return w, ""
}

// BodyValues is what a write's body sets, as trace.Write.Set records it for
// a write through the proxy: each field's JSON value by dotted path,
// redacted, without what the apiserver owns or what names the object, and,
// for a status write, only status. contentType is the body's media type (a
// patch's types.PatchType, or "application/json" for a whole object). For
// writes that do not pass through the proxy (the workload's), so that they
// are compared on the same terms.
func BodyValues(res redact.Resource, contentType string, body []byte) map[string]string {
	mt, _, _ := mime.ParseMediaType(contentType)
	patch := ""
	switch mt {
	case "application/merge-patch+json":
		patch = "merge"
	case "application/strategic-merge-patch+json":
		patch = "strategic-merge"
	case "application/json-patch+json":
		patch = "json"
	case "application/apply-patch+yaml", "application/apply-patch+cbor":
		patch = "apply"
	}
	set, _, ok := setOf(patch, mt, body)
	if !ok {
		return nil
	}
	out, _ := encodeSet(res, set)
	return out
}

// setOf decodes what a body sets, by dotted path, and the uid it names
// (metadata.uid, or a JSON patch's test of it). patch is trace.Write.Patch
// ("" for a whole object); mt the body's media type.
func setOf(patch, mt string, body []byte) (set map[string]any, uid string, ok bool) {
	set = map[string]any{}
	if patch == "json" {
		var ops []struct {
			Op, Path string
			Value    any
		}
		if json.Unmarshal(body, &ops) != nil {
			return nil, "", false
		}
		for _, op := range ops {
			p := pointerPath(op.Path)
			switch op.Op {
			case "add", "replace":
				set[p] = op.Value
			case "remove":
				set[p] = nil
			case "test":
				if p == "metadata.uid" {
					uid, _ = op.Value.(string)
				}
			}
		}
		return set, uid, true
	}
	obj := objectOf(body, mt)
	if obj == nil {
		return nil, "", false
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		uid, _ = md["uid"].(string)
	}
	flatten("", obj, set)
	return set, uid, true
}

// encodeSet encodes set as trace.Write.Set: redacted, at most trace.MaxSet
// paths in path order (truncated says some were left out), without what
// the apiserver owns, and for a status write only status.
func encodeSet(res redact.Resource, set map[string]any) (enc map[string]string, truncated bool) {
	enc = map[string]string{}
	for _, p := range slices.Sorted(maps.Keys(set)) {
		if ignoredPath(p) || (res.Subresource == "status" && p != "status" && !strings.HasPrefix(p, "status.")) {
			continue
		}
		if len(enc) == trace.MaxSet {
			truncated = true
			break
		}
		enc[p] = encodeValue(redact.Value(res, p, set[p]))
	}
	if len(enc) == 0 {
		enc = nil
	}
	return enc, truncated
}

// resourceOf is what a request addressed, for redact.
func resourceOf(info *request.RequestInfo) redact.Resource {
	return redact.Resource{Group: info.APIGroup, Resource: info.Resource, Subresource: info.Subresource}
}

// objectOf decodes a JSON, YAML (apply) or protobuf body into a JSON object.
func objectOf(body []byte, mediaType string) map[string]any {
	switch mediaType {
	case "application/vnd.kubernetes.protobuf":
		o, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			return nil
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil
		}
		return u
	case "application/apply-patch+yaml":
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil
		}
		body = j
	}
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	return obj
}

// flatten records the leaves of v under prefix; a list or an empty object is
// a leaf.
func flatten(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok || (len(m) == 0 && prefix != "") {
		out[prefix] = v
		return
	}
	for k, c := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		flatten(p, c, out)
	}
}

// ignoredPath: what the apiserver owns or what names the object.
func ignoredPath(p string) bool {
	switch p {
	case "apiVersion", "kind", "metadata.name", "metadata.namespace", "metadata.resourceVersion",
		"metadata.uid", "metadata.generation", "metadata.creationTimestamp", "metadata.selfLink":
		return true
	}
	return p == "metadata.managedFields" || strings.HasPrefix(p, "metadata.managedFields.")
}

// pointerPath turns a JSON pointer into a dotted path.
func pointerPath(ptr string) string {
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, s := range parts {
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
	}
	return strings.Join(parts, ".")
}

// encodeValue is v as JSON, cut to trace.MaxValue bytes with a digest of the
// whole.
func encodeValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	if len(b) <= trace.MaxValue {
		return string(b)
	}
	sum := sha256.Sum256(b)
	return string(b[:trace.MaxValue-24]) + "…sha256:" + hex.EncodeToString(sum[:6])
}
