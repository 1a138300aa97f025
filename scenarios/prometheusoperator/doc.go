// Package prometheusoperator runs prometheus-operator, a Go controller built
// from its module at a pinned version (v0.93.0), from a target file alone
// (target.yaml): a Prometheus and an Alertmanager become StatefulSets, with
// kube-controller-manager's StatefulSet controller and garbage collector
// and the kubelet stand-in beside it. Knobs: whether every informer is
// scoped to the execution's namespace (--namespaces) or watches every
// namespace; a change to the Prometheus at t+0.2 s (none, a scale from 1 to
// 2, an edit of its pod template); and at t+0.4 s either a person deletes
// the Prometheus's StatefulSet or the Alertmanager is deleted and created
// again.
//
// TestPrometheusOperator runs no-fault schedules against the real
// apiserver. TestPrometheusOperatorLostStatefulSetDelete is the finding's
// regression row: a StatefulSet deleted while the operator's StatefulSet
// watch relists after 410 Gone is never made again (its delete handler
// drops the relist's tombstone); a re-watch from the last resourceVersion
// is its control. TestFalseAlarms runs only with STALEFUZZ_FALSE_ALARMS=N.
//
// The tests build the operator when it is not cached (target.Prepare), as
// `stalefuzz prepare scenarios/prometheusoperator/target.yaml` does:
// minutes, once. Its go.mod replaces two nested modules with directories
// its module zip does not hold; the build drops those replace directives
// and uses the same tag's nested modules from the proxy.
package prometheusoperator
