// Package keda runs KEDA's operator (ScaledJobs → Jobs), a Go controller
// built from its module at a pinned version, from a target file alone
// (target.yaml): a queue of bare Pods counted by the kubernetes-workload
// scaler drives one ScaledJob polled every second, with
// kube-controller-manager's Job controller and the kubelet stand-in
// running the Jobs; the queue drains at t+4.5 s so that runs settle. Its
// oracles: count (Jobs per ScaledJob), end state (the Jobs and the
// ScaledJob), crash, storm; both findings are declared known
// (oracles.known), so that campaigns search past them, and TestFalseAlarms
// counts them apart. TestKEDALateJobEvents replays the first finding (Job
// events later than a pollingInterval make Jobs beyond maxReplicaCount),
// TestKEDARolloutDeletesNewJobs the second (a new ScaledJob's first Jobs,
// stamped from a cache that lags the operator's own generation bump, are
// deleted as "previous version"), TestKEDAPausedActiveUnknown the third (a
// paused ScaledJob left Active Unknown: a status merge patch from a stale
// cache drops two conditions, the next reconcile initializes all four
// again), each with its control. See README.md.
//
// The tests build the operator when it is not cached (target.Prepare), as
// `stalefuzz prepare scenarios/keda/target.yaml` does: about 20 minutes on
// a shared 2-core machine, once.
package keda
