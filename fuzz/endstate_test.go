package fuzz

import (
	"maps"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	a := endKeyed([]unstructured.Unstructured{pod("rc-head-j7ffd", ""), pod("rc-worker-xk2vq", "rc-worker-"), pod("web", ""), pod("db-cache", "")}, nil)
	b := endKeyed([]unstructured.Unstructured{pod("rc-head-m4btb", ""), pod("rc-worker-9bq7z", "rc-worker-"), pod("web", ""), pod("db-cache", "")}, nil)
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
	if got := newEndReference(a, b).judge("Pod", endKeyed([]unstructured.Unstructured{pod("rc-head-txm4n", ""), pod("rc-worker-ww2gd", "rc-worker-"), pod("web", ""), pod("db-cache", "")}, nil)); len(got) != 0 {
		t.Errorf("a third run with other random suffixes: %q, want no difference", got)
	}
}
