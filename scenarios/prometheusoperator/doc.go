// Package prometheusoperator runs prometheus-operator, a Go controller built
// from its module at a pinned version (v0.93.0), from a target file alone
// (target.yaml): a Prometheus and an Alertmanager become StatefulSets, with
// kube-controller-manager's StatefulSet controller and garbage collector
// and the kubelet stand-in beside it. Both are created, scaled from 1 to 2
// replicas and edited (a new pod template, a rolling update); the
// Alertmanager is then deleted and created again. Knobs: whether every
// informer is scoped to the execution's namespace (--namespaces) or
// watches every namespace, the StatusForConfigurationResources feature
// gate (a finalizer on the Prometheus, a status on its ServiceMonitor), and
// when the scale comes.
//
// TestPrometheusOperator runs the no-fault schedule of each knob setting
// against the real apiserver. TestFalseAlarms runs only with
// STALEFUZZ_FALSE_ALARMS=N (make false-alarms-targets).
//
// The tests build the operator when it is not cached (target.Prepare), as
// `stalefuzz prepare scenarios/prometheusoperator/target.yaml` does:
// minutes, once. Its go.mod replaces two nested modules with directories
// its module zip does not hold; the build drops those replace directives
// and uses the same tag's nested modules from the proxy.
package prometheusoperator
