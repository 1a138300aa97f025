package fuzz

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// TestCountAcrossOwnersAndPerRevision: the count oracle can count the Pods
// of every ReplicaSet of a Deployment together (by a label), and an
// owner's objects per revision (by an annotation), not only per owner.
func TestCountAcrossOwnersAndPerRevision(t *testing.T) {
	pod := func(name, rs, app, rev string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetName(name)
		u.SetUID(types.UID("uid-" + name))
		u.SetLabels(map[string]string{"app": app})
		if rev != "" {
			u.SetAnnotations(map[string]string{"example.com/revision": rev})
		}
		yes := true
		u.SetOwnerReferences([]metav1.OwnerReference{{Kind: "ReplicaSet", Name: rs, Controller: &yes}})
		return u
	}
	history := func(c Count, objs ...*unstructured.Unstructured) map[string]countPeak {
		k := &counter{c: c}
		for i, u := range objs {
			ref := metav1.GetControllerOfNoCopy(u)
			ev := countEvent{rv: uint64(i + 1), typ: watch.Added, uid: string(u.GetUID()), name: u.GetName()}
			ev.owner, ev.ownerKind = c.group(u, ref.Kind+" "+ref.Name, ref.Kind)
			k.events = append(k.events, ev)
		}
		return k.peaks()
	}
	// A rollout: 2 Pods of the old ReplicaSet, 2 of the new, one of another app.
	pods := []*unstructured.Unstructured{pod("a", "web-1", "web", "1"), pod("b", "web-1", "web", "1"), pod("c", "web-2", "web", "2"), pod("d", "web-2", "web", "2"), pod("e", "db-1", "db", "1")}

	perOwner := history(Count{}, pods...)
	if p := perOwner["ReplicaSet"]; p.n != 2 {
		t.Errorf("per owner: peak %d (%s), want 2", p.n, p.owner)
	}
	across := history(Count{GroupBy: []string{"label:app"}, AcrossOwners: true}, pods...)
	if p := across["group by label:app"]; p.n != 4 || p.owner != "label:app=web" {
		t.Errorf("across owners by app: peak %d of %q, want 4 of label:app=web", p.n, p.owner)
	}
	twoRequests := append(pods[:1:1], pod("f", "web-1", "web", "1"), pod("g", "web-1", "web", "2"))
	perRevision := history(Count{GroupBy: []string{"annotation:example.com/revision"}}, twoRequests...)
	if p := perRevision["ReplicaSet"]; p.n != 2 || p.owner != "ReplicaSet web-1 annotation:example.com/revision=1" {
		t.Errorf("per owner and revision: peak %d of %q, want 2 of revision 1", p.n, p.owner)
	}
}

// TestCountGroupedMessage: a grouped count's violation says what its
// objects share before "at once", so that a known finding matched by the
// per-owner count's "live Pods at once" does not absorb it (cert-manager's
// finding 2, several revisions' requests, beside #4956, two requests for
// one revision).
func TestCountGroupedMessage(t *testing.T) {
	pods := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	e := &Env{s: Scenario{Counts: []Count{
		{GVK: pods, Max: 1},
		{GVK: pods, Max: 1, GroupBy: []string{"annotation:example.com/revision"}},
	}}}
	res := &Result{counts: []map[string]countPeak{
		{"ReplicaSet": {n: 2, owner: "ReplicaSet web-1", names: []string{"a", "b"}}},
		{"ReplicaSet": {n: 2, owner: "ReplicaSet web-1 annotation:example.com/revision=1", names: []string{"a", "b"}}},
	}}
	e.learnedOracles(context.Background(), res)
	if len(res.Violations) != 2 {
		t.Fatalf("got %d violations, want 2: %v", len(res.Violations), res.Violations)
	}
	if m := res.Violations[0].Message; !strings.Contains(m, "live Pods at once") {
		t.Errorf("per owner: %q, want it to say live Pods at once", m)
	}
	if m := res.Violations[1].Message; strings.Contains(m, "live Pods at once") || !strings.Contains(m, "live Pods sharing annotation:example.com/revision at once") {
		t.Errorf("per revision: %q, want live Pods sharing annotation:example.com/revision at once (and not live Pods at once)", m)
	}
}
