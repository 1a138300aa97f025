package fuzz

import (
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
)

// TestAsDeployed: a finding's report says what its restart needs where the
// controller runs with leader election as its install has it, and which
// clusters can serve a stale list at all.
func TestAsDeployed(t *testing.T) {
	restart := Step{Client: "op", Action: proxy.Freeze, Lag: 300 * time.Millisecond, Length: time.Second}
	le := LeaderElection{LeaseDuration: 15 * time.Second, Source: "main.go:223"}
	r := &Result{Scenario: "s", Schedule: Schedule{Steps: []Step{restart}}, leaderElection: map[string]LeaderElection{"op": le}}
	rep := r.Report()
	for _, want := range []string{
		"as deployed: with leader election (a 15s lease, main.go:223)",
		"unrenewed for a full 15s from its own first read of it",
		"does not release the lease on cancel",
		"about 15.3s behind (a degraded control plane",
		"which clusters: a stale list needs WatchList off: an apiserver on Kubernetes 1.27-1.31 or 1.33",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	le.ReleaseOnCancel = true
	if d := restart.AsDeployed(le); !strings.Contains(d, "releases the lease and the replacement starts at once") || !strings.Contains(d, "but for a graceful stop") {
		t.Errorf("release on cancel: %q", d)
	}
	for _, c := range []struct {
		name string
		st   Step
		le   LeaderElection
	}{
		{"no leader election", restart, LeaderElection{}},
		{"no restart", Step{Client: "op", Action: proxy.Expire, Lag: time.Second}, le},
	} {
		if d := c.st.AsDeployed(c.le); d != "" {
			t.Errorf("%s: AsDeployed = %q, want nothing", c.name, d)
		}
	}
	if v := (Step{Action: proxy.Freeze}).Versions(); v != "" {
		t.Errorf("a restart onto an apiserver that does not lag: Versions = %q", v)
	}
	if v := (Step{Action: proxy.Expire, Lag: time.Second}).Versions(); v == "" {
		t.Error("a relist from a lagging apiserver: no Versions")
	}
}
