// Package driver holds the fuzz target that `stalefuzz fuzz` and
// `stalefuzz replay` build and run for a target file: FuzzTarget runs the
// file named by STALEFUZZ_TARGET (target.Fuzz). A controller author's
// repository needs no Go dependency on stalefuzz: the command compiles this
// package's test binary from stalefuzz's own module, with Go's build cache,
// and runs it in a directory of its own.
//
// # Environment
//
// STALEFUZZ_TARGET: the target file's path. Unset, FuzzTarget is skipped
// (a plain go test ./... of stalefuzz runs nothing here).
//
// STALEFUZZ_FALSE_ALARMS: with STALEFUZZ_TARGET, TestFalseAlarms runs that
// many executions whose events are only delayed as much as the reference
// runs showed (target.MeasureFalseAlarms) and prints the figure as one line
// of JSON after FalseAlarmsPrefix, for `stalefuzz false-alarms`.
//
// STALEFUZZ_FALSE_ALARMS_DIR: with STALEFUZZ_FALSE_ALARMS, the directory
// where each execution with a violation is written (its trace, alarm-N.jsonl,
// and the controllers' log, alarm-N.log); unset, none is.
//
// STALEFUZZ_TRUTH_TABLE: with STALEFUZZ_TARGET, TestTruthTable runs the
// target's truth table (target.MeasureTruthTable) with these options (a
// fuzz.TruthTableOptions as JSON) and prints it as one line of JSON (a
// TruthTableLine) after TruthTablePrefix, for `stalefuzz truth-table`.
package driver
