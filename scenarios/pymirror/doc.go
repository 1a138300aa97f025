// Package pymirror is the example of a controller not written in Go that
// stalefuzz runs from a target file alone: mirror.py, a Python controller
// with only the standard library, declared in target.yaml (its controller,
// knobs, workload, fault space and lost-update oracle), with no Go code of
// its own. Its tests run it against the real apiserver: written with
// unconditional updates (knob mode=blind), a watch that delivers its events
// late makes it overwrite the user's edit, which the lost-update oracle
// reports on data.desired; written with its resourceVersion
// (mode=optimistic), the same schedule meets a real 409 Conflict and loses
// nothing.
//
// Run a campaign on it with `stalefuzz fuzz scenarios/pymirror/target.yaml`,
// or FuzzPyMirror with go test -fuzz. It needs python3.
package pymirror
