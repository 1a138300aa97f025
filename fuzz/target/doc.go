// Package target declares a controller under test in a file, with no Go
// code: the controllers (a command line in any language, or a Go main
// package at a pinned version or in a module directory of its own that
// Prepare builds and caches), their CRDs
// (files, directories, or a path inside a Go module's zip), what a cluster
// runs beside them (kube-controller-manager's controllers, at the control
// plane's release or one the file pins, Builtins.ControllerManager; kube-scheduler
// with a Node to bind Pods to, and a kubelet stand-in whose Pods can stay
// Pending, fail, be OOM-killed, restart in place or be evicted, with the
// statuses a kubelet writes: Builtins, Kubelet, PodFate), the knobs, the workload (ordered steps: apply,
// patch, delete, wait, and node: Nodes that join, lose their kubelet, come
// back and leave, NodeStep, package fuzz/nodes), the fault scope and the oracles (convergence by
// kstatus, lost update, count safety and end state learned from reference
// runs, crash, storm, and required workflow steps: Wait.Required) and the fixtures it needs besides the apiserver (git
// repositories). A Target is the same declaration as a Go value; Scenario
// turns it into a fuzz.Scenario that the engine runs like a hand-written one.
//
// # Contract
//
// Load refuses a file with an error, before anything starts: a key that is
// not a field (with the closest field's name), a value of the wrong kind, a
// knob reference to an undeclared knob, a step with no action or two, a
// resource scope that is not "cluster" or a namespace's name. Each error
// names the file, its line and the field (*Error).
//
// Every execution runs each controller afresh as its own proxy client (a
// replica i of controller c is client c-i; a single replica is client c),
// with a kubeconfig that admits it to its listener only, given the way the
// target says (an environment variable, KUBECONFIG by default, or a flag),
// and the execution's namespace in NamespaceEnv when set. A restart the
// schedule asks for SIGKILLs the controller's process group (as an OOM kill
// or an eviction past its grace period does: no shutdown hook runs) and runs
// the same command again, with the same ${dir} and ports. In the Go form a
// controller may instead run in-process, a controller-runtime manager on
// which Controller.Setup registers its reconcilers (fuzz.Exec.StartManager).
// The workload's objects are created in the execution's namespace (their own
// namespace, if any, is replaced) through the engine's direct client, so
// that the lost-update oracle knows what the workload wrote; those that are
// cluster-scoped are removed after each execution (fuzz.Scenario.Sweep), as
// the namespace is. Knob references, ${name} in any string of a step, a
// controller's args or env, are replaced by the value the fuzzer chose for
// that execution; ${namespace} by the execution's namespace (for a
// controller that takes it as a flag, --watch-namespace=${namespace});
// ${git.NAME} by the URL of a git repository the target declares under
// fixtures.git, served on 127.0.0.1 once per process. In a controller's args
// and env, ${dir} is a directory of the process's own for the execution and
// ${port.NAME} a free port of its own, so that two workers' controllers
// never share storage or a listener address. A wait that times out is
// written to the execution's log and the workload goes on with its next
// step: a wait paces the workload, the oracles judge the controllers. A
// required one (Wait.Required) that timed out is judged again once the
// run has settled: still unmet then is the oracle "stuck" (a
// fuzz.Scenario.Checks entry), needing no reference run. Any wait that
// timed out makes the execution diverged (fuzz.Exec.Diverged, naming the
// wait): the workload went on without what it waited for, so its end state
// is compared with the reference runs' only when the same waits timed out
// in both of them (a wait that times out by design, every run, is the
// workflow: a Job that is meant not to fail); a wait that timed out in one
// of them only turns the end-state oracle off for its knob setting (the
// campaign says so: the wait needs a longer timeout). The
// Nodes node steps joined are deleted with their Leases when the execution
// ends; a node step that fails (a resume of a running kubelet) makes the
// execution a harness error.
//
// An execution lasts at most 8 s (fuzz.Budget), a wait at most 6 s of it.
// A target whose workflow must reach a timer its controller cannot
// shorten sets budget (Target.Budget, up to 10 min, fuzz.Scenario.Long):
// its waits may then last up to the budget less 2 s, and its lag and
// fault windows stretch over the first half of what the budget leaves
// after the start, settling and stopping. Such a target's campaign cannot run under go
// test -fuzz (10 s an input): LongCampaign runs it with package longrun's
// driver, which stalefuzz fuzz uses for it; its inputs keep Go's corpus
// format and replay as any target's.
//
// Oracles.Known lists findings already reported (fuzz.Known): while
// fuzzing, an execution whose every violation one of them matches is
// counted, not a finding, and the campaign goes on; MeasureFalseAlarms counts
// it apart from the races and the false alarms. Regression runs and replays
// judge it as a finding.
//
// MeasureFalseAlarms judges a target under ordinary latency only (every
// watch a little late, no fault) and triages each violation as a race (a
// finding) or, with evidence from more no-fault runs, the controller's
// nondeterminism (a false alarm: an endState ignore path to add); each
// alarm is kept with its input and replays. EncodeText reads a schedule in
// words (what a report's "schedule:" line says) into an input, a knob's
// value by its name in the file.
//
// Prepare builds every Go controller once ("go install module/path@version",
// or, where the module's replace directives refuse that, "go build" inside
// a copy of the downloaded module; for a local directory "./dir", "go build"
// in it, cached by a hash of its go.mod, go.sum and .go files, so that an
// edit builds it again) into the binary cache and downloads
// every module a CRD path names. Scenario only resolves those paths and
// refuses one that Prepare has not made, naming the command that does.
//
// A Go controller with Patches is built from copies: each patch is applied
// (patch -p1, every hunk exactly or at an offset, none already applied) to
// a copy of its controller's own module, or of the module it names at the
// version the build selects, which then replaces that module in a copy of
// the go.mod; nothing of the module cache or of a local directory is
// changed. The patched binary is cached apart from the unpatched one, by a
// hash of the patches' modules and contents. A patch that does not apply,
// or names a module the build does not require, is an error naming the
// patch.
//
// # Environment
//
// XDG_DATA_HOME (default ~/.local/share): binaries are cached under
// $XDG_DATA_HOME/stalefuzz/bin. GOFLAGS, GOPROXY and the rest of the go
// command's environment apply to Prepare's builds.
//
// STALEFUZZ_PATCHES: more Patches, which Parse adds to a file's
// controllers (PatchesEnv; a command's --patch sets it for the processes
// it starts).
//
// STALEFUZZ_FALSE_ALARMS=N: CheckFalseAlarms runs N executions (unset, the
// n its caller gives). STALEFUZZ_FALSE_ALARMS_DIR: CheckFalseAlarms writes
// each execution with a violation there (its trace, log, picture and input).
package target
