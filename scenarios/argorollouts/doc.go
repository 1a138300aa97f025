// Package argorollouts runs Argo Rollouts' controller, a Go controller
// built from its module at a pinned version, from a target file alone
// (target.yaml): a blue-green Rollout (active and preview Services) and a
// canary Rollout (setWeight and pause steps), with kube-controller-manager's
// ReplicaSet and garbage collector controllers and the kubelet stand-in
// beside it; each gets a new pod template, then, once paused, what
// `kubectl argo rollouts promote` or `abort` writes. Knobs: the Rollout
// worker threads (10, the default, or 1), cluster-wide or --namespaced,
// and when the new version comes.
//
// The tests build the controller when it is not cached (target.Prepare), as
// `stalefuzz prepare scenarios/argorollouts/target.yaml` (its go commands run
// with GOTOOLCHAIN=auto, which fetches the go 1.26.10 its go.mod asks for)
// does: minutes, once.
package argorollouts
