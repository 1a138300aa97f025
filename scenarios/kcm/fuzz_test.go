package kcm_test

import (
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/scenarios/kcm"
)

// Each target searches faults a real cluster produces (fuzz.Realistic: lag,
// broken watches, relists after 410 Gone, restarts between two writes,
// reconnecting to a lagging apiserver) for a safety violation (more live pods
// than the spec allows at any instant, two daemon pods on one node, two pods
// for one ordinal, more Job successes than completions) or a workload whose
// status does not come to match its pods, with the controller's KEP-5647
// gate off (the behaviour before Kubernetes 1.36) or on (the default).

func FuzzJobGateOff(f *testing.F)         { fuzz.Fuzz(f, kcm.Scenario(kcm.Job, false)) }
func FuzzJobGateOn(f *testing.F)          { fuzz.Fuzz(f, kcm.Scenario(kcm.Job, true)) }
func FuzzReplicaSetGateOff(f *testing.F)  { fuzz.Fuzz(f, kcm.Scenario(kcm.ReplicaSet, false)) }
func FuzzReplicaSetGateOn(f *testing.F)   { fuzz.Fuzz(f, kcm.Scenario(kcm.ReplicaSet, true)) }
func FuzzDaemonSetGateOff(f *testing.F)   { fuzz.Fuzz(f, kcm.Scenario(kcm.DaemonSet, false)) }
func FuzzDaemonSetGateOn(f *testing.F)    { fuzz.Fuzz(f, kcm.Scenario(kcm.DaemonSet, true)) }
func FuzzStatefulSetGateOff(f *testing.F) { fuzz.Fuzz(f, kcm.Scenario(kcm.StatefulSet, false)) }
func FuzzStatefulSetGateOn(f *testing.F)  { fuzz.Fuzz(f, kcm.Scenario(kcm.StatefulSet, true)) }

// The node lifecycle controller, its Lease gate off or on (the default in
// 1.37): a live node marked Unknown, or a dead one never marked.
func FuzzNodeLifecycleGateOff(f *testing.F) { fuzz.Fuzz(f, kcm.NodeLifecycle(false)) }
func FuzzNodeLifecycleGateOn(f *testing.F)  { fuzz.Fuzz(f, kcm.NodeLifecycle(true)) }

// The node lifecycle controller over two zones whose nodes are lost, come
// back, join and leave: a live node marked or tainted, a dead one missed or
// left untainted where its zone must evict, or a taint left on in master
// disruption mode.
func FuzzNodeZones(f *testing.F) { fuzz.Fuzz(f, kcm.NodeZones()) }
