// Package driver holds the fuzz target that `stalefuzz fuzz` and
// `stalefuzz replay` build and run for a target file: FuzzTarget runs the
// file named by STALEFUZZ_TARGET (target.Fuzz), and TestLongCampaign the
// campaign of a target whose executions outlast go test -fuzz's 10 s. A controller author's
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
// many executions under ordinary latency only, every watch delayed as much
// as the reference runs showed, and triages their violations
// (target.MeasureFalseAlarms); it prints the figure as one line of JSON
// after FalseAlarmsPrefix, for `stalefuzz false-alarms`.
//
// STALEFUZZ_FALSE_ALARMS_DIR: with STALEFUZZ_FALSE_ALARMS, the directory
// where each execution with a violation is written (its trace, log,
// picture and input, TARGET-alarm-STAMP-N.*); unset, none is.
//
// STALEFUZZ_FALSE_ALARMS_KNOBS: with STALEFUZZ_FALSE_ALARMS, only the knob
// settings with these values ("write=blind,edit=100ms", by the target
// file's names); unset or empty, every setting.
//
// STALEFUZZ_FALSE_ALARMS_ANSWER: with STALEFUZZ_FALSE_ALARMS, a fault on
// the answer to a controller's write besides the ordinary latency of every
// execution (target.FalseAlarmsOptions.Answer: lose, reset, slow, reject,
// reject-500, reject-503); unset or empty, ordinary latency only.
//
// STALEFUZZ_LONG_TIME: with STALEFUZZ_TARGET, TestLongCampaign runs a
// campaign of that duration with package longrun's driver
// (target.LongCampaign), which stalefuzz fuzz runs instead of FuzzTarget for
// a target with a budget (executions longer than go test -fuzz allows an
// input); STALEFUZZ_LONG_CORPUS names its corpus directory, shared by the
// campaign's processes, and STALEFUZZ_LONG_SHARE ("K/N") the share of the
// seeds this process runs (longrun.Campaign.Share). Its seeds include
// testdata/fuzz/FuzzTarget.
//
// STALEFUZZ_TRUTH_TABLE: with STALEFUZZ_TARGET, TestTruthTable runs the
// target's truth table (target.MeasureTruthTable) with these options (a
// truthtable.Options as JSON) and prints it as one line of JSON (a
// TruthTableLine) after TruthTablePrefix, for `stalefuzz truth-table`.
package driver
