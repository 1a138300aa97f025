package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz/target/driver"
)

const pymirror = "../../../scenarios/pymirror/"

// TestReplayCommand replays saved inputs of the Python example's target
// file against the real apiserver, twice each: the blind mode's restart
// onto a lagging apiserver loses the user's edit in 2/2 runs (exit 1), the
// optimistic mode's same schedule in 0/2 (exit 0).
func TestReplayCommand(t *testing.T) {
	for _, c := range []struct {
		input, want string
		status      int
	}{
		{"lost-edit.input", "result: reproduced in 2/2 runs", exitFinding},
		{"optimistic.input", "result: reproduced in 0/2 runs", exitClean},
	} {
		t.Run(c.input, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run([]string{"replay", pymirror + "target.yaml", pymirror + "testdata/" + c.input, "--count", "2", "--findings", t.TempDir()}, &stdout, &stderr)
			if status != c.status || !strings.Contains(stdout.String(), c.want) {
				t.Errorf("replay %s: exit %d, want %d, and %q in its output:\n%s\n%s", c.input, status, c.status, c.want, lastLines(stdout.String(), 40), stderr.String())
			}
		})
	}
}

// TestFuzzCommandRefusesABadTarget: a target file with a mistake is refused
// before anything is built or started, with its line, field and a
// suggestion, and exit status 2.
func TestFuzzCommandRefusesABadTarget(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: bad\ncontrollers:\n  - name: c\n    comand: [python3, c.py]\nworkload:\n  - wait: {apiVersion: v1, kind: ConfigMap, name: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	status := run([]string{"fuzz", bad, "--time", "1s"}, &stdout, &stderr)
	want := bad + `:4: comand: field "comand" not known in Controller: did you mean "command"?`
	if status != exitHarness || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr %q; want %d and %q", status, stderr.String(), exitHarness, want)
	}
	if strings.Contains(stderr.String(), "compiling") {
		t.Errorf("it started building before refusing the file: %s", stderr.String())
	}
}

// TestKeepLogs: the campaign directory is removed with the campaign's
// work directory, so the logs its summary points to (harness errors,
// executions with only known findings) are copied into the findings
// directory, and the output says where.
func TestKeepLogs(t *testing.T) {
	camp, findings := t.TempDir(), filepath.Join(t.TempDir(), "findings")
	known := "finding 1\t{gates:0}\nfinding 2\t{gates:1}\n"
	if err := os.WriteFile(filepath.Join(camp, "known.log"), []byte(known), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(camp, "harness-errors.log"), nil, 0o600); err != nil { // empty: not copied
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	keepLogs(&stdout, camp, findings, time.Date(2026, 11, 26, 3, 4, 5, 0, time.UTC))
	kept := filepath.Join(findings, "20261126-030405-known.log")
	if want := "figures: 2 lines of executions with only known findings (not findings): " + kept + "\n"; stdout.String() != want {
		t.Errorf("output %q, want %q", stdout.String(), want)
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != known {
		t.Errorf("kept %q (%v), want %q", b, err, known)
	}
	if entries, _ := os.ReadDir(findings); len(entries) != 1 {
		t.Errorf("findings directory has %d files, want the one known.log", len(entries))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestFalseAlarmsCommand measures the Python example's false alarms with the
// command a controller author runs: none in 4 executions (exit 0, the figure
// printed); the figure's parser and exit status are checked on a driver
// line that counts one.
func TestFalseAlarmsCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	status := run([]string{"false-alarms", pymirror + "target.yaml", "--count", "4"}, &stdout, &stderr)
	if want := "4 executions judged (0 harness errors, not counted), events delayed by at most"; status != exitClean || !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), "no false alarm") {
		t.Errorf("false-alarms: exit %d, want %d, and %q and \"no false alarm\" in its output:\n%s\n%s", status, exitClean, want, stdout.String(), lastLines(stderr.String(), 30))
	}
	f, ok := parseFalseAlarms("=== RUN   TestFalseAlarms\n" + driver.FalseAlarmsPrefix + `{"Executions":9,"HarnessErrors":1,"MaxDelay":990000,"ByOracle":{"end-state":2},"First":{"end-state":"schedule x: y"}}` + "\n--- PASS")
	if !ok || f.Executions != 9 || f.ByOracle["end-state"] != 2 || maxAlarms(f) != 2 {
		t.Errorf("parseFalseAlarms: got %+v, %v", f, ok)
	}
}
