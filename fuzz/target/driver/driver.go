package driver

// FalseAlarmsPrefix starts the line of JSON (a fuzz.FalseAlarms) that
// TestFalseAlarms prints for `stalefuzz false-alarms`.
const FalseAlarmsPrefix = "stalefuzz-false-alarms: "
