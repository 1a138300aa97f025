// Package nodes stands in for the kubelets of a fleet of Nodes, so that a
// workload can make Nodes join, leave, go NotReady and come back during an
// execution, in zones, as a cluster's do.
//
// Contract:
//
//   - A Fleet writes through the Client it is given, which must be the
//     harness's own (fuzz.Exec.Direct), never a controller's: its writes are
//     the kubelets', and faults act on the controllers' view of them.
//   - Join creates a Node with its status, Ready (reason KubeletReady, a
//     fresh heartbeat), as a kubelet registers it: labelled with its
//     hostname and os, and with its zone and region when it has a zone
//     (topology.kubernetes.io/zone and /region, which the node lifecycle
//     controller groups nodes by); then its Lease in kube-node-lease. From
//     then on Run renews that Lease every Renewal, as a live kubelet does.
//     A Node the apiserver's NodeTaint admission taints not-ready keeps
//     that taint until the node lifecycle controller removes it.
//   - Stop is a kubelet gone (a crashed node, a partitioned zone, a powered
//     off rack): its Lease and its status are no longer written. Nothing
//     else changes: the Node stays until someone deletes it.
//   - Resume is that kubelet back: it posts the Node's status Ready with a
//     fresh heartbeat (as the real kubelet does when the status it reads
//     differs from its own) and its Lease is renewed again.
//   - Leave is the Node removed (a scale-down, an administrator's kubectl
//     delete node): its Lease stops and the Node and its Lease are deleted.
//   - Every acknowledged renewal is remembered, so that a judge can tell a
//     controller that marked a live node from a stand-in that fell behind
//     on a loaded machine (Gap).
//
// A Fleet is safe for concurrent use. Its zero value, given a Client, is
// usable: Renewal defaults to 100 ms and LeaseDuration to 1 s (a real
// kubelet renews every 10 s a Lease of 40 s; a scenario sets both for its
// controller's scaled grace period, and says the scale). Run until the
// execution ends (fuzz.Exec.Go): nothing renews a Lease otherwise.
package nodes
