// Package keda runs KEDA's operator (ScaledJobs → Jobs), a Go controller
// built from its module at a pinned version, from a target file alone
// (target.yaml): a queue of bare Pods counted by the kubernetes-workload
// scaler drives one ScaledJob polled every second, with
// kube-controller-manager's Job controller and the kubelet stand-in
// running the Jobs. See README.md for the knobs, campaigns and findings.
//
// The tests build the operator when it is not cached (target.Prepare), as
// `stalefuzz prepare scenarios/keda/target.yaml` does: minutes, once.
package keda
