package driver

import "github.com/stalefuzz/stalefuzz/fuzz/truthtable"

// FalseAlarmsPrefix starts the line of JSON (a fuzz.FalseAlarms) that
// TestFalseAlarms prints for `stalefuzz false-alarms`.
const FalseAlarmsPrefix = "stalefuzz-false-alarms: "

// TruthTablePrefix starts the line of JSON (a TruthTableLine) that
// TestTruthTable prints for `stalefuzz truth-table`.
const TruthTablePrefix = "stalefuzz-truth-table: "

// TruthTableLine is what TestTruthTable prints after TruthTablePrefix: the
// table, and its Markdown with the knob settings named by the target
// file's values.
type TruthTableLine struct {
	Table    truthtable.Table
	Markdown string
}
