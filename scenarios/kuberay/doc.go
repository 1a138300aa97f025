// Package kuberay runs KubeRay's ray-operator, a Go controller built from
// its module at a pinned version, from a target file alone (target.yaml):
// a RayCluster with a head and a worker group of two, and a knob that
// leaves it, scales the group to 3 or scales it to 1. Its test runs the
// no-fault schedule of each knob value against the real apiserver and
// prints what the operator wrote.
//
// Prepare it once with `stalefuzz prepare scenarios/kuberay/target.yaml`
// (it builds the operator, minutes the first time).
package kuberay
