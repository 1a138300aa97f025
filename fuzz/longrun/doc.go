// Package longrun drives fuzz campaigns whose executions last longer than
// go test -fuzz allows one input (10 s, a constant of Go's internal/fuzz):
// a workflow that must wait for a timer its controller cannot shorten,
// such as the Job controller's 10 s back-off after a failed Pod, a
// constant in its code. A scenario says so with fuzz.Scenario.Long (a
// target file with its budget), and fuzz.Fuzz refuses it while fuzzing.
//
// # Contract
//
// Campaign.Run starts one Env (a control plane, the proxy, the scenario's
// warm-up), prepares it as go test -fuzz's coordinator and workers do
// (fuzz.Env.Prepare: the no-fault reference runs the learned oracles
// need, and the seeds), then runs, in this order, the entries of the
// corpus directory and of the seed directories, the seeds, and inputs it
// mutates from the entries it found interesting, until Time has passed
// (checked between executions: the last one runs to its end, so that the
// campaign's end is never a harness error) or ctx ends (an interrupt,
// which cuts the execution under way short, uncounted). Every input is judged by fuzz.Worker, exactly as a go test
// -fuzz worker judges it: a harness error is logged and skipped, never a
// finding; known findings and, searching on (fuzz.SearchOnEnv), repeats
// are counted; a finding is written with its trace, picture, log, corpus
// entry and origin, and listed in the campaign directory's findings.log.
// Without SearchOnEnv the campaign ends at its first finding, as go test
// -fuzz does.
//
// Inputs keep Go's corpus format: the corpus directory holds one go test
// fuzz v1 file per input, named as go test names them (fuzz.CorpusEntryName),
// so that an input replays under go test (testdata/fuzz/FuzzX/NAME, or
// stalefuzz replay) and a go test -fuzz cache directory is a corpus here.
// An input is interesting when its execution shows a feature (fuzz.Features:
// writes, their answers, event fates, lateness, restarts, violations) no
// earlier execution of the campaign showed; it is then added to the corpus
// and written there. Several processes may share one corpus directory:
// each reads the others' new entries every RescanEvery executions.
//
// Mutation is total and bounded: any input decodes to a schedule
// (fuzz.Scenario.Decode), so a mutation needs no grammar. Each mutated
// input is an interesting entry with one to three edits (a bit flipped, a
// byte set to a random or boundary value, a byte moved by a few, bytes
// inserted or deleted, a 6-byte record repeated, a part of another entry
// spliced in), at most MaxInput bytes long.
//
// Go's coverage instrumentation plays no part (the controllers under test
// run in other processes, and in-process ones give noisy coverage): as in
// go test -fuzz campaigns of stalefuzz, the trace's features are the
// signal.
//
// Nothing is left behind: Run stops the Env it started (its processes,
// namespaces, and the control plane unless a test binary's Main shares
// one) before it returns.
package longrun
