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
		if got := rs.decideRequest(c.q, at).rule; got != c.want {
			t.Errorf("%+v: rule %d, want %d", c.q, got, c.want)
		}
	}
}
