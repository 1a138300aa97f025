package fuzz

import (
	"fmt"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
)

// LeaderElection is how a controller's install runs it (its manifests'
// flags, its defaults). The harness runs every controller without leader
// election, so a restarted one lists and reconciles at once; as deployed, a
// replacement of one killed outright reconciles only once the old lease
// expires. A finding's report says what the same restart needs as deployed
// (Step.AsDeployed). The zero value: no leader election.
type LeaderElection struct {
	// LeaseDuration is the lease a replacement waits out (controller-runtime's
	// default is 15 s). Zero: the controller runs without leader election.
	LeaseDuration time.Duration
	// ReleaseOnCancel says the controller gives the lease up when it is
	// stopped gracefully (SIGTERM: a rollout, an eviction), so that its
	// replacement takes it at once; never after an OOM kill or SIGKILL.
	ReleaseOnCancel bool
	// Source says where this was read ("controller.go:91, :548 of v1.10.2").
	Source string
}

// AsDeployed says what the step needs of a real cluster when its client
// runs with le, as its install runs it; "" when that changes nothing (no
// leader election, or a step that restarts nothing).
func (s Step) AsDeployed(le LeaderElection) string {
	if !s.IsRestart() || le.LeaseDuration <= 0 {
		return ""
	}
	lease := le.LeaseDuration.Round(time.Second)
	out := fmt.Sprintf("with leader election (a %v lease", lease)
	if le.Source != "" {
		out += ", " + le.Source
	}
	out += fmt.Sprintf("), a replacement of a controller killed outright (an OOM kill) reconciles only once it has watched the old lease go unrenewed for a full %v from its own first read of it (client-go's leader election times a lease by when the candidate observed it, not by the lease's renewTime)", lease)
	if le.ReleaseOnCancel {
		out += "; stopped gracefully (a rollout, an eviction), it releases the lease and the replacement starts at once, as here"
	} else {
		out += ", and the same after a graceful stop (a rollout, an eviction: it does not release the lease on cancel)"
	}
	if s.Lag > 0 {
		out += fmt.Sprintf(". Its stale list then needs an apiserver still behind when the lease expires: about %v behind (a degraded control plane: a partitioned or overloaded apiserver), not the %.2fs of this run", lease+s.Lag.Round(10*time.Millisecond), s.Lag.Seconds())
		if le.ReleaseOnCancel {
			out += ", but for a graceful stop"
		}
	} else {
		out += ". What the restart loses (memory, writes in flight) is lost the same; the replacement's first list is only later"
	}
	return out
}

// Versions says which clusters can serve the stale list a relist or a
// restart onto a lagging apiserver needs; "" for any other step. Read from
// k8s.io/apiserver v0.37.1's and client-go v0.35.0's feature gates: the
// apiserver's WatchList is off by default in 1.27-1.31 and in 1.33, and
// client-go's WatchListClient is on by default from 0.35; a LIST with
// resourceVersion=0 (client-go's without WatchList) is served from the watch
// cache, which may lag etcd.
func (s Step) Versions() string {
	if s.Lag <= 0 || (s.Action != proxy.Expire && !s.IsRestart()) {
		return ""
	}
	return "a stale list needs WatchList off: an apiserver on Kubernetes 1.27-1.31 or 1.33 (WatchList off by default), or a client on client-go before 0.35 (WatchListClient off), which lists at resourceVersion 0 from the watch cache; on 1.37's defaults with client-go 0.35 or later, its initial list is consistent and cannot be stale"
}
