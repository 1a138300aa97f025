package fuzz

import (
	"maps"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// TestEndReference: paths the two reference runs disagree on are masked,
// volatile fields are never compared, an object only one reference run has
// is not judged, and a run's extra object, missing object or changed field
// is named.
func TestEndReference(t *testing.T) {
	obj := func(name string, data map[string]any) map[string]string {
		flat := map[string]string{}
		flatten("", map[string]any{"metadata": map[string]any{"name": name, "resourceVersion": "7", "uid": "u-" + name,
			"creationTimestamp": "2026-11-25T00:00:00Z"}, "data": data, "status": map[string]any{"lastSyncTime": "x"}}, flat)
		return flat
	}
	a := endObjects{"cm": obj("cm", map[string]any{"k": "v", "seen": "1"}), "once": obj("once", nil)}
	b := endObjects{"cm": obj("cm", map[string]any{"k": "v", "seen": "2"})}
	ref := newEndReference(a, b)
	if _, ok := a["cm"]["metadata.resourceVersion"]; ok {
		t.Errorf("metadata.resourceVersion was flattened: volatile fields are never compared")
	}
	if _, ok := a["cm"]["status.lastSyncTime"]; ok {
		t.Errorf("status.lastSyncTime was flattened: a field named ...Time is volatile")
	}
	for _, c := range []struct {
		name string
		got  endObjects
		want []string // substrings, one per message; none: clean
	}{
		{"same, masked field differs", endObjects{"cm": obj("cm", map[string]any{"k": "v", "seen": "3"})}, nil},
		{"changed field", endObjects{"cm": obj("cm", map[string]any{"k": "w", "seen": "1"})}, []string{`ConfigMap cm: data.k="w" (reference runs: "v")`}},
		{"missing", endObjects{}, []string{"ConfigMap cm: missing; both no-fault reference runs have it"}},
		{"extra", endObjects{"cm": obj("cm", map[string]any{"k": "v"}), "dup": obj("dup", nil)}, []string{"ConfigMap dup: present; no no-fault reference run has it"}},
	} {
		got := ref.judge("ConfigMap", c.got)
		if len(got) != len(c.want) {
			t.Errorf("%s: got %q, want %d message(s) %q", c.name, got, len(c.want), c.want)
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: message %q does not say %q", c.name, got[i], w)
			}
		}
	}
}

// TestEndReferenceWiden: a further no-fault run that shows another value,
// or lacks an object, masks that value, or that object, from then on.
func TestEndReferenceWiden(t *testing.T) {
	flat := func(v string) map[string]string { return map[string]string{"data.k": `"` + v + `"`} }
	ref := newEndReference(endObjects{"cm": flat("v"), "x": flat("1")}, endObjects{"cm": flat("v"), "x": flat("1")})
	run := endObjects{"cm": flat("w")}
	if got := ref.judge("ConfigMap", run); len(got) != 2 {
		t.Fatalf("before widening: %q, want the changed field and the missing object", got)
	}
	ref.widen(endObjects{"cm": flat("w")})
	if got := ref.judge("ConfigMap", run); len(got) != 0 {
		t.Errorf("after a no-fault run showed data.k=w and no x: %q, want nothing", got)
	}
	if got := ref.judge("ConfigMap", endObjects{"cm": flat("z")}); len(got) != 0 {
		t.Errorf("a masked path stays masked: %q", got)
	}
}

// TestEndKeyedGeneratedNames: objects with a generateName, and objects
// whose name a client generated the same way ("prefix-" and five
// characters of apimachinery's random alphabet), are keyed by owner,
// prefix and index, so that two runs' random suffixes match; other names
// are keys as they are.
func TestEndKeyedGeneratedNames(t *testing.T) {
	pod := func(name, generateName string) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "spec": map[string]any{"x": "1"}}}
		u.SetName(name)
		u.SetGenerateName(generateName)
		u.SetOwnerReferences([]metav1.OwnerReference{{Kind: "RayCluster", Name: "rc", Controller: ptr.To(true)}})
		return u
	}
	a := endKeyed([]unstructured.Unstructured{pod("rc-head-j7ffd", ""), pod("rc-worker-xk2vq", "rc-worker-"), pod("web", ""), pod("db-cache", "")}, nil, flattener{})
	b := endKeyed([]unstructured.Unstructured{pod("rc-head-m4btb", ""), pod("rc-worker-9bq7z", "rc-worker-"), pod("web", ""), pod("db-cache", "")}, nil, flattener{})
	for _, k := range []string{"RayCluster rc/rc-head-*#0", "RayCluster rc/rc-worker-*#0", "web", "db-cache"} {
		if a[k] == nil || b[k] == nil {
			t.Errorf("key %q: in the first run %v, in the second %v; want both (keys %v)", k, a[k] != nil, b[k] != nil, slices.Sorted(maps.Keys(a)))
		}
	}
	for name, want := range map[string]string{"rc-head-j7ffd": "rc-head-", "db-cache": "", "web": "", "a-bcdfg": "a-", "x-BCDFG": "", "x-bcdfa": "", "-bcdfg": "", "abcdfgh": ""} {
		if got := clientGeneratedPrefix(name); got != want {
			t.Errorf("clientGeneratedPrefix(%q) = %q, want %q", name, got, want)
		}
	}
	if got := newEndReference(a, b).judge("Pod", endKeyed([]unstructured.Unstructured{pod("rc-head-txm4n", ""), pod("rc-worker-ww2gd", "rc-worker-"), pod("web", ""), pod("db-cache", "")}, nil, flattener{})); len(got) != 0 {
		t.Errorf("a third run with other random suffixes: %q, want no difference", got)
	}
}

// TestEndKeyedListMaps: the elements of a list its CRD declares
// x-kubernetes-list-type: map are named by their keys (a key equal to the
// execution's namespace as "$(namespace)"), so that two runs that appended
// the same entries in another order, in other namespaces, agree, and a run
// that lost one is told by that entry's keys; a list without declared keys
// stays by index.
func TestEndKeyedListMaps(t *testing.T) {
	listType, objType, strType := "map", "object", "string"
	binding := apiextensionsv1.JSONSchemaProps{Type: objType, Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"name": {Type: strType}, "namespace": {Type: strType}, "conditions": {Type: "array"},
	}}
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "monitoring.coreos.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "ServiceMonitor"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Schema: &apiextensionsv1.CustomResourceValidation{
			OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: objType, Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"status": {Type: objType, Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"bindings": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &binding},
						XListType: &listType, XListMapKeys: []string{"name", "namespace"}},
					"plain": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &binding}},
				}},
			}},
		}}},
	}}
	gvk := schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
	lm := crdListMaps([]*apiextensionsv1.CustomResourceDefinition{crd})[gvk]
	if got := lm["status.bindings"]; !slices.Equal(got, []string{"name", "namespace"}) {
		t.Fatalf("crdListMaps: status.bindings keys %q, want [name namespace] (all: %v)", got, lm)
	}
	if _, ok := lm["status.plain"]; ok {
		t.Errorf("crdListMaps: status.plain has no x-kubernetes-list-type: map, got keys %q", lm["status.plain"])
	}
	smon := func(ns string, names ...string) unstructured.Unstructured {
		var bs, plain []any
		for _, n := range names {
			bs = append(bs, map[string]any{"name": n, "namespace": ns, "conditions": []any{map[string]any{"type": "Accepted"}}})
			plain = append(plain, map[string]any{"name": n})
		}
		o := unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "app", "namespace": ns},
			"status": map[string]any{"bindings": bs, "plain": plain}}}
		return o
	}
	run := func(ns string, names ...string) endObjects {
		return endKeyed([]unstructured.Unstructured{smon(ns, names...)}, []string{"status.plain"}, flattener{lists: lm, ns: ns})
	}
	ref := newEndReference(run("ns-1", "prom-a", "prom-b"), run("ns-2", "prom-a", "prom-b"))
	if _, ok := ref.objects["app"]["status.bindings[name=prom-b,namespace=$(namespace)].conditions[0].type"]; !ok {
		t.Fatalf("a binding is not named by its keys: %v", slices.Sorted(maps.Keys(ref.objects["app"])))
	}
	if got := ref.judge("ServiceMonitor", run("ns-3", "prom-b", "prom-a")); len(got) != 0 {
		t.Errorf("the same bindings in the other order, in another namespace: %q, want nothing", got)
	}
	got := ref.judge("ServiceMonitor", run("ns-3", "prom-b"))
	if len(got) != 1 || !strings.Contains(got[0], "status.bindings[name=prom-a,namespace=$(namespace)].name=absent") {
		t.Errorf("prom-a's binding lost: %q, want it named by its keys", got)
	}
	// Without the schema (a built-in kind, or flattener's zero value) a
	// list is by index: the other order differs.
	if got := newEndReference(endKeyed([]unstructured.Unstructured{smon("n", "a", "b")}, nil, flattener{}), endKeyed([]unstructured.Unstructured{smon("n", "a", "b")}, nil, flattener{})).
		judge("ServiceMonitor", endKeyed([]unstructured.Unstructured{smon("n", "b", "a")}, nil, flattener{})); len(got) == 0 {
		t.Errorf("by index, the other order: no difference")
	}
}
