// Package fluxcd tests a published claim about FluxCD's source-controller
// (fluxcd/source-controller#2012, found with a simulated API server) against a
// real kube-apiserver and the real source-controller binary: that informer
// staleness of about three seconds during a reconcile can leave a
// GitRepository with an artifact but a stale status.observedGeneration,
// never healing.
//
// Three spaces of faults are searched: lag only, lag and (unrealistic) loss,
// and faults a real cluster produces (broken watches, relists after 410
// Gone, restarts between two writes or before a write's answer, onto
// lagging apiservers), in which source-controller is restarted as a process.
//
// source-controller runs as a child process, one per execution, through its
// own proxy client (a kubeconfig), watching only the execution's namespace,
// and clones from a git server on 127.0.0.1 (package fuzz/gitserver).
// target.yaml declares the same target with no Go code, judged by the
// generic oracles alone. README.md beside this file reports what
// reproduces, what does not, and why.
//
// Environment variables: STALEFUZZ_SOURCE_CONTROLLER (a source-controller
// binary to use instead of the one `make source-controller` builds from
// target.yaml's module), XDG_DATA_HOME and HOME (where that build is kept).
package fluxcd
