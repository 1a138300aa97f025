// Package kcm runs kube-controller-manager's own workload controllers (Job,
// ReplicaSet, DaemonSet, StatefulSet), the real v1.37.1 binary that
// hack/assets.sh builds, out of process behind the informer proxy, with one
// KEP-5647 feature gate (StaleControllerConsistency<Kind>) as the scenario's
// setting, so that a campaign with the gate off and one with it on say what
// the gate changes.
//
// # Contract
//
// Every execution starts one kube-controller-manager for its namespace only:
// the controller under test and nothing else (--controllers), no leader
// election, no serving port, as the proxy client "kube-controller-manager",
// with its feature gate set as the scenario says. Its informers are cluster
// wide, so every execution first removes what earlier executions of the
// process left (workloads, pods, nodes).
//
// There is no kubelet and no scheduler: the scenario stands in for the
// kubelet with status writes straight to the apiserver (never through the
// proxy, never in the trace): a pod is Running and Ready as soon as it
// exists, and a Job's pods succeed when the "finish" knob says. DaemonSet
// executions make their own Node objects. Workload actions (scale, a pod
// deleted by someone else, a node added or removed) are knobs timed from the
// mark, so the byte schedule places them.
//
// Oracles:
//   - safety, judged on the apiserver's own history of the namespace's pods
//     and workload (a direct watch, every event, in resourceVersion order), at
//     every pod creation: never more live pods than the spec allowed at that
//     moment (a Job: min(parallelism, completions - pods succeeded so far)),
//     no DaemonSet node with two live daemon pods, no two live pods for one
//     StatefulSet ordinal; a Job never has more pods succeeded, nor
//     status.succeeded above, completions. A violation names the extra pods,
//     who created each (the trace's create request) and what the
//     controller's cache had been sent at that moment.
//   - convergence, once the run settled: the workload's status counts match
//     its live pods.
//
// # The node lifecycle controller
//
// NodeLifecycle runs kube-controller-manager's node lifecycle controller
// alone, with its gate against a stale Lease cache
// (NodeControllerLeaseCircuitBreaker, LeaseGate) off or on, on two Nodes
// and their Leases in kube-node-lease (declared in fuzz.Scenario.Scopes, so
// that faults act on them and the sweep removes them), renewed every
// LeaseRenewal by a kubelet stand-in; timings scaled down 50× from a
// cluster's (NodeGrace, NodeMonitorPeriod). Oracles: live-node-unknown (a
// node whose Lease was renewed throughout marked Ready=Unknown; a harness
// error if the stand-in itself fell behind) and dead-node-missed (node-b,
// dead, not marked Unknown by the end).
//
// # Environment variables
//
//   - STALEFUZZ_KUBE_CONTROLLER_MANAGER: the binary to run. Default:
//     kube-controller-manager next to kube-apiserver (KUBEBUILDER_ASSETS, else
//     the setup-envtest store).
package kcm
