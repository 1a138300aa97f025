// Package kuberay runs KubeRay's ray-operator, a Go controller built from
// its module at a pinned version, from a target file alone (target.yaml):
// a RayCluster with a head and a worker group of two, and a knob that
// leaves it, scales the group to 3 or scales it to 1. Its test runs the
// no-fault schedule of each knob value against the real apiserver and
// prints what the operator wrote; TestKubeRayDuplicate restarts it right after
// its first worker's create: onto an apiserver that has not seen that
// create, it creates both workers again (4 live Pods for the RayCluster,
// the count oracle's learned limit 3), then deletes one; onto an
// up-to-date one, nothing is duplicated, nor with fix/recheck-live-pods.patch,
// which lists the Pods from the apiserver before creating any. Its scale
// expectations (controllers/ray/expectations) live in memory and die with
// the process.
//
// TestTruthTable writes truth-table.md: each realistic fault pattern under
// each action, with ENABLE_DETERMINISTIC_HEAD_POD_NAME off and on. It runs
// only when STALEFUZZ_TRUTH_TABLE names the file to write (make
// truth-table-kuberay); STALEFUZZ_TRUTH_TABLE_RUNS sets the runs a cell
// (default 3). TestFalseAlarms runs only with STALEFUZZ_FALSE_ALARMS=N.
//
// The tests build the operator when it is not cached (target.Prepare), as
// `stalefuzz prepare scenarios/kuberay/target.yaml` does: minutes, once.
package kuberay
