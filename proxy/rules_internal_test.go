package proxy

import (
	"testing"
	"time"
)

// TestCollectionRequestsMatchNamespacedReadFaults: a cluster-wide informer's
// re-watch and list (no namespace in the request) fall under Expire and Rewind
// rules scoped to a namespace, since what they return includes it; writes and
// other namespaces' requests do not.
func TestCollectionRequestsMatchNamespacedReadFaults(t *testing.T) {
	mark := time.Now()
	rs := newRuleSet(mark, []Rule{
		{Client: "kcm", Resource: "pods", Namespace: "ns", Action: Expire},
		{Client: "kcm", Resource: "jobs", Namespace: "ns", Action: Rewind},
		{Client: "kcm", Resource: "pods", Namespace: "ns", Action: Freeze},
	})
	at := mark.Add(time.Millisecond)
	for _, c := range []struct {
		q    call
		want int
	}{
		{call{client: "kcm", verb: "watch", resource: "pods", resumes: true}, 0},                  // all namespaces
		{call{client: "kcm", verb: "watch", resource: "pods", namespace: "ns", resumes: true}, 0}, // the namespace
		{call{client: "kcm", verb: "watch", resource: "pods", namespace: "other", resumes: true}, -1},
		{call{client: "kcm", verb: "list", resource: "jobs"}, 1},
		{call{client: "kcm", verb: "list", resource: "jobs", namespace: "other"}, -1},
		{call{client: "kcm", verb: "create", resource: "pods"}, -1}, // a write is matched strictly
		{call{client: "kcm", verb: "create", resource: "pods", namespace: "ns"}, 2},
	} {
		if got := rs.decideRequest(c.q, at, 0).rule; got != c.want {
			t.Errorf("%+v: rule %d, want %d", c.q, got, c.want)
		}
	}
}

// TestExpireFloor: an Expire answers 410 to watches that resume from a
// resourceVersion older than the newest the proxy had seen when the rule
// first matched a watch of that client and resource (where its apiserver's
// watch cache now begins), and serves a watch from there or later: the
// re-watch after a relist, and a watch from the newest resourceVersion.
func TestExpireFloor(t *testing.T) {
	mark := time.Now()
	rs := newRuleSet(mark, []Rule{{Client: "op", Action: Expire, Resource: "prometheuses", Namespace: "ns", To: time.Minute}})
	at := mark.Add(time.Second)
	watch := func(rv uint64) call {
		return call{client: "op", verb: "watch", resource: "prometheuses", namespace: "ns", resumes: true, rv: rv}
	}
	for _, c := range []struct {
		name       string
		q          call
		latest     uint64
		wantExpire bool
	}{
		{"the re-watch from before the break", watch(100), 120, true},
		{"the re-watch after the relist", watch(125), 130, false},
		{"a watch from before the floor, later", watch(119), 140, true},
		{"a watch from the floor", watch(120), 140, false},
	} {
		if got := rs.decideRequest(c.q, at, c.latest).rule == 0; got != c.wantExpire {
			t.Errorf("%s (rv %d, latest %d): expired %v, want %v", c.name, c.q.rv, c.latest, got, c.wantExpire)
		}
	}
	// Another client's floor is its own: first seen at latest 150.
	other := watch(150)
	other.client = "kcm"
	rs2 := newRuleSet(mark, []Rule{{Action: Expire, Resource: "prometheuses", Namespace: "ns", To: time.Minute}})
	if rs2.decideRequest(other, at, 150).rule == 0 {
		t.Errorf("a watch from the newest resourceVersion the proxy has seen was expired")
	}
}
