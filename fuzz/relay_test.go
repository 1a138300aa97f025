package fuzz

import (
	"testing"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// An execution in which the proxy answered a request with its own 502 (its
// upstream connection failed while the client waited) is not judged: the
// first such request is named, with the proxy's reason.
func TestRelayFailure(t *testing.T) {
	ok := trace.Request{Client: "keda", Verb: "get", Resource: "jobs", Namespace: "ns", Name: "a", Code: 200}
	failed := trace.Request{Client: "keda", Verb: "create", Resource: "jobs", Namespace: "ns", Code: 502, RelayError: "unexpected EOF"}
	status := trace.Request{Client: "keda", Verb: "patch", Resource: "scaledjobs", Subresource: "status", Namespace: "ns", Name: "w", Code: 502, RelayError: "EOF"}
	if r := relayFailure(trace.Trace{Requests: []trace.Request{ok}}); r != nil {
		t.Errorf("relayFailure of a trace without one = %+v, want nil", r)
	}
	r := relayFailure(trace.Trace{Requests: []trace.Request{ok, failed, status}})
	if r == nil || r.RelayError != "unexpected EOF" {
		t.Fatalf("relayFailure = %+v, want the create", r)
	}
	for _, c := range []struct {
		r    trace.Request
		want string
	}{{failed, "create jobs in ns"}, {status, "patch scaledjobs/status ns/w"}, {trace.Request{Verb: "get", Path: "/healthz"}, "get /healthz"}} {
		if got := describeRequest(c.r); got != c.want {
			t.Errorf("describeRequest(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
}
