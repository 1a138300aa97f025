package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

const pymirror = "../../../scenarios/pymirror/"

// volumeOnly skips t unless STALEFUZZ_VOLUME is set (make test-volume),
// saying what it leaves out: rows that .ci/run cannot afford on a fresh
// 2-core machine (it must fit in 90 minutes with every build).
func volumeOnly(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("STALEFUZZ_VOLUME") == "" {
		t.Skipf("%s: make test-volume (STALEFUZZ_VOLUME=1) runs it", what)
	}
}

// TestFuzzCommandSearchesOn runs a campaign with --search-on on the
// contention target (its lost plan is found in about 30 s, from a
// reference-run seed) against the real apiserver: the finding is reported
// with its time, and the campaign does not stop there (go test -fuzz ends
// at its first failure) but fuzzes to the end of --time. Its go test
// -fuzz build instruments every package the target's fuzz test imports:
// 8 minutes on a fresh 2-core machine (2026-12-05), so make test-volume
// runs it and make test does not. TestFuzzCommandLongTarget runs the fuzz
// command end to end in make test, through the long-run driver, which is
// not instrumented.
func TestFuzzCommandSearchesOn(t *testing.T) {
	volumeOnly(t, "a go test -fuzz campaign, whose instrumented build takes minutes")
	const budget = 150 * time.Second // the finding comes after about 40 s, 2 min on a busy machine
	var stdout, stderr bytes.Buffer
	status := run([]string{"fuzz", "../../../scenarios/contention/target.yaml", "--time", budget.String(), "--workers", "1", "--search-on", "--findings", t.TempDir()}, &stdout, &stderr)
	out := stdout.String()
	if status != exitFinding || !regexp.MustCompile(`result: FINDING 1 of \d+, after \S+ \(searching on\):\n  schedule: .*\n  violation: \[`).MatchString(out) {
		t.Fatalf("exit %d, want %d and the finding with its time:\n%s\n%s", status, exitFinding, lastLines(out, 40), lastLines(stderr.String(), 20))
	}
	// go test's progress lines: the last says how long it fuzzed.
	var last time.Duration
	for _, m := range regexp.MustCompile(`fuzz: elapsed: ([0-9hms.]+),`).FindAllStringSubmatch(out, -1) {
		last, _ = time.ParseDuration(m[1])
	}
	if last < budget-10*time.Second {
		t.Errorf("the campaign fuzzed %v of --time %v: it stopped at its finding\n%s", last, budget, lastLines(out, 40))
	}
	t.Logf("%s", lastLines(out, 12))
}

// TestReplayCommand replays saved inputs of the Python example's target
// file against the real apiserver, twice each: the blind mode's restart
// onto a lagging apiserver loses the user's edit in 2/2 runs (exit 1), the
// optimistic mode's same schedule in 0/2 (exit 0).
func TestReplayCommand(t *testing.T) {
	for _, c := range []struct {
		input, want string
		status      int
	}{
		{"lost-edit.input", "result: reproduced in 2/2 runs of " + pymirror + "testdata/lost-edit.input\ninput from: the file " + pymirror + "testdata/lost-edit.input (nothing beside it says where it came from)\nviolations by oracle (runs): lost-update in 2\n", exitFinding},
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

// TestKeptKnown: the output names the executions of each known finding the
// campaign kept (known.log's third field) and the replay that judges one.
func TestKeptKnown(t *testing.T) {
	camp := t.TempDir()
	known := "finding 1\t{gates:0}\t/f/known-a.input\nfinding 1\t{gates:1}\t/f/known-b.input\nfinding 1\t{gates:1}\nfinding 2\t{gates:0}\n"
	if err := os.WriteFile(filepath.Join(camp, "known.log"), []byte(known), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	keptKnown(&stdout, camp, "target.yaml")
	want := "figures: 2 executions kept of the known finding \"finding 1\" (input, and its trace and log beside it): /f/known-a.input, /f/known-b.input\n" +
		"  tell it from a look-alike: read the trace, or stalefuzz replay target.yaml /f/known-a.input --count 20\n"
	if stdout.String() != want {
		t.Errorf("output %q, want %q", stdout.String(), want)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

const contention = "../../../scenarios/contention/"

// TestFalseAlarmsCommand judges the contention target's blind write mode
// under ordinary latency only, with the command a controller author runs:
// its blind status patch loses the controller's own plan when its next
// reconcile starts from a cache older than that write, a race that needs
// no fault: with the delays drawn from the fixed seed, executions 2 and 4
// have every watch 0.26 s and 0.10 s late, and such executions raised it
// in 10 of 11 tries (a third of the draws are that late); it is triaged
// as a race, never a false alarm. Each race is kept with its trace
// and input, and the command it prints replays the input, labelled as what
// it is.
func TestFalseAlarmsCommand(t *testing.T) {
	findings := t.TempDir()
	var stdout, stderr bytes.Buffer
	status := run([]string{"false-alarms", contention + "target.yaml", "--knob", "write=blind", "--count", "4", "--findings", findings}, &stdout, &stderr)
	out := stdout.String()
	if status != exitFinding || !strings.Contains(out, "4 executions judged") || !strings.Contains(out, "no false alarm") ||
		!strings.Contains(out, "executions with a finding under ordinary latency (a race, not a false alarm: lost-update:") {
		t.Fatalf("false-alarms: exit %d, want %d, 4 executions judged, races of lost-update and no false alarm:\n%s\n%s", status, exitFinding, out, lastLines(stderr.String(), 30))
	}
	replay := regexp.MustCompile(`(?m)^execution (\d+), race \(a finding under ordinary latency\): .*\n  schedule: write=0; .*latency .*\n(?:  \[.*\n)+  trace: \S+\.jsonl\n  picture: \S+\n  controllers' log: \S+\n  replay it: stalefuzz replay \S+ (\S+\.input) --count 20$`).FindStringSubmatch(out)
	if replay == nil {
		t.Fatalf("no race of write=blind (knob 0) listed with its files and replay command:\n%s", out)
	}
	// The blind plan write is behind the controller's own plan write (the
	// stale-self-view oracle's case in every such race): its kind is
	// listed once, with its count and first message.
	if !regexp.MustCompile(`(?m)^writes behind their writer's own that replaced its values for good, by kind \(\d+;.*\n  \S+'s (update|patch) .*, behind its own .*, replaced \S.*: \d+ writes in \d+ executions\n    first, execution \d+: .*no later write restored it$`).MatchString(out) {
		t.Errorf("the races' writes behind their writer's own are not listed by kind:\n%s", out)
	}
	if strings.Contains(out, "schedule: write=1;") || strings.Contains(out, "schedule: write=2;") {
		t.Errorf("--knob write=blind ran another write mode:\n%s", out)
	}
	stdout.Reset()
	stderr.Reset()
	status = run([]string{"replay", contention + "target.yaml", replay[2], "--count", "2", "--findings", findings}, &stdout, &stderr)
	if want := "input from: stalefuzz false-alarms, execution " + replay[1] + " (ordinary latency only)"; status == exitHarness || !strings.Contains(stdout.String(), want) {
		t.Errorf("replay of the race's input: exit %d, want %q in its output:\n%s\n%s", status, want, stdout.String(), lastLines(stderr.String(), 20))
	}
}

// TestEncodeCommand writes the input of a schedule in words, a knob by its
// value's name, and says what it replays as: nothing is built or run.
func TestEncodeCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blind-latency.input")
	var stdout, stderr bytes.Buffer
	status := run([]string{"encode", contention + "target.yaml", "write=blind; latency 30ms on every watch of every client", "-o", path}, &stdout, &stderr)
	want := "wrote " + path + "\nit replays: write=0; t+0.00s–2.10s latency 0.031s on every watch of every client\n"
	if status != exitClean || !strings.HasPrefix(stdout.String(), want) {
		t.Fatalf("encode: exit %d, want %d and %q:\n%s\n%s", status, exitClean, want, stdout.String(), stderr.String())
	}
	b, err := fuzz.ReadCorpusEntry(path)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 0 || b[5]&7 != 7 {
		t.Errorf("input %x: want knob 0 and a record of action 7 (every client's latency)", b)
	}
	if o := fuzz.InputOrigin(path); o != "stalefuzz encode: write=0; t+0.00s–2.10s latency 0.031s on every watch of every client" {
		t.Errorf("origin %q", o)
	}
	stdout.Reset()
	if status := run([]string{"encode", contention + "target.yaml", "write=fast"}, &stdout, &stderr); status != exitHarness || !strings.Contains(stderr.String(), `knob write has no value "fast" (its values: blind, optimistic, blind-ryw)`) {
		t.Errorf("a knob value the target lacks: exit %d, stderr %q", status, stderr.String())
	}
}

// TestTally: a run that could not be judged (a harness error in each of its
// attempts) fails its subtest like a reproduction; the replay counts it
// apart. Before the fix, the first case read "reproduced in 2/3".
func TestTally(t *testing.T) {
	out := `=== RUN   FuzzTarget
=== RUN   FuzzTarget/late-jobs.input.1
    fuzz.go:169: ` + fuzz.Unjudged + ` FuzzTarget/late-jobs.input.1: schedule finish=0; t+0.00s–1.49s hold jobs for keda: stalefuzz harness error (not a finding): start controllers in keda-1109-4: controller keda never synced its watch of scaledjobs
=== RUN   FuzzTarget/late-jobs.input.2
    fuzz.go:215: violation [count]: ScaledJob worker had 4 live Jobs at once
=== RUN   FuzzTarget/late-jobs.input.3
--- FAIL: FuzzTarget (36.69s)
    --- FAIL: FuzzTarget/late-jobs.input.1 (5.15s)
    --- FAIL: FuzzTarget/late-jobs.input.2 (6.01s)
    --- PASS: FuzzTarget/late-jobs.input.3 (5.77s)
FAIL
`
	if got := tally(out); got.violated != 1 || got.clean != 1 || got.unjudged != 1 {
		t.Errorf("tally: %d reproduced, %d clean, %d not judged; want 1, 1, 1", got.violated, got.clean, got.unjudged)
	}
	// A known bug: its reproduction passes the run and says so; a run that
	// no longer reproduces it fails; one not judged is neither.
	known := `=== RUN   FuzzTarget/a.1
    fuzz.go:160: reproduced the known bug (x)
=== RUN   FuzzTarget/a.2
    fuzz.go:169: ` + fuzz.Unjudged + ` FuzzTarget/a.2: schedule no lag: stalefuzz harness error (not a finding): overrun
=== RUN   FuzzTarget/a.3
    fuzz.go:150: corpus entry no longer reproduces the known bug (x)
    --- PASS: FuzzTarget/a.1 (1.00s)
    --- FAIL: FuzzTarget/a.2 (1.00s)
    --- FAIL: FuzzTarget/a.3 (1.00s)
`
	if got := tally(known); got.violated != 1 || got.clean != 1 || got.unjudged != 1 {
		t.Errorf("tally of a known bug's runs: %d reproduced, %d clean, %d not judged; want 1, 1, 1", got.violated, got.clean, got.unjudged)
	}
}

// TestTallyByOracle: the replay says in how many runs each oracle was
// violated, counting a run once per oracle however many violations of it
// the run had, so that "reproduced" can be checked to be the finding's.
func TestTallyByOracle(t *testing.T) {
	out := `=== RUN   FuzzTarget
=== RUN   FuzzTarget/x.input.1
    fuzz.go:215: stalefuzz finding in scenario keda
        schedule: no lag
        violation [count]: ScaledJob worker had 4 live Jobs at once
          ... and 1 more like it ([count] on ScaledJob worker)
        violation [end-state]: Job worker-#3: present; no no-fault reference run has it
        violation [count]: ScaledJob other had 4 live Jobs at once
=== RUN   FuzzTarget/x.input.2
    fuzz.go:215: stalefuzz finding in scenario keda
        violation [end-state]: Job worker-#3: present
=== RUN   FuzzTarget/x.input.3
--- FAIL: FuzzTarget (3.00s)
    --- FAIL: FuzzTarget/x.input.1 (1.00s)
    --- FAIL: FuzzTarget/x.input.2 (1.00s)
    --- PASS: FuzzTarget/x.input.3 (1.00s)
`
	got := tally(out)
	if got.violated != 2 || got.clean != 1 {
		t.Errorf("tally: %d reproduced, %d clean; want 2, 1", got.violated, got.clean)
	}
	if want := "end-state in 2, count in 1"; got.oracles() != want {
		t.Errorf("by oracle: %q, want %q", got.oracles(), want)
	}
}

// TestReplayCountsUnjudgedRunsApart replays an input against the real
// apiserver with pymirror's controller, which after its first start (the
// warm-up execution) only sleeps: each replayed run is a harness error in
// all three of its attempts ("never synced its watch"), fails its subtest,
// and reproduces nothing. The command says none could be judged and exits
// 2; before the fix it said "reproduced in 2/2 runs" and exited 1.
func TestReplayCountsUnjudgedRunsApart(t *testing.T) {
	dir := t.TempDir()
	py, err := os.ReadFile(pymirror + "mirror.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mirror.py"), py, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "target.yaml")
	if err := os.WriteFile(file, []byte(`name: sleeper
controllers:
  - name: mirror
    command: [sh, -c, "if [ -e started ]; then exec sleep 30; fi; touch started; exec python3 mirror.py"]
    env: {MODE: optimistic}
    namespaceEnv: WATCH_NAMESPACE
    watches: [configmaps]
workload:
  - apply:
      manifest: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: settings}
        data: {desired: "1"}
oracles:
  lostUpdates: [data.desired]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	input, err := filepath.Abs(pymirror + "testdata/lost-edit.input")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	status := run([]string{"replay", file, input, "--count", "2", "--findings", t.TempDir()}, &stdout, &stderr)
	const want = "result: none of 2 runs could be judged (harness errors, not findings)"
	if status != exitHarness || !strings.Contains(stdout.String(), want) {
		t.Errorf("exit %d, want %d, and %q in its output:\n%s\n%s", status, exitHarness, want, lastLines(stdout.String(), 40), stderr.String())
	}
}

// TestInterruptDuringBuildLeavesNothing: interrupted while it compiles its
// driver (a cold build cache makes that take a while), the command leaves
// nothing in its $TMPDIR. Before the fix the go command, killed mid-build,
// left its go-build* work directory there (found 2026-11-28: four of them,
// 857 entries each).
func TestInterruptDuringBuildLeavesNothing(t *testing.T) {
	bin := buildCommand(t)
	abs, err := filepath.Abs(pymirror + "target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	cmd, out, exited := startGroup(t, bin, []string{"TMPDIR=" + tmp, "GOCACHE=" + t.TempDir()}, "false-alarms", abs, "--count", "1")
	building := func() bool { // the go command's work directory, wherever it is
		m, _ := filepath.Glob(filepath.Join(tmp, "go-build*"))
		n, _ := filepath.Glob(filepath.Join(tmp, "*", "gotmp", "go-build*"))
		return len(m)+len(n) > 0
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !building() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !building() {
		t.Fatalf("no go build under %s after 2 minutes:\n%s", tmp, lastLines(out.String(), 20))
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after SIGINT:\n%s", lastLines(out.String(), 20))
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("left in $TMPDIR after an interrupt during the build: %v\n%s", names, lastLines(out.String(), 20))
	}
}

// TestInterruptLeavesNothing stops `stalefuzz false-alarms` once its driver
// has started a control plane, as Ctrl-C does (SIGINT to the command's
// process group: it exits 2 saying it was interrupted) and as kill -9 does
// (SIGKILL to the command alone): either way nothing is left in its $TMPDIR
// (its work directory with the driver binary, the control plane's) and no
// process of its driver runs. Before the fix an interrupt left the work
// directory (77 MB), and a SIGKILL also left the driver running.
func TestInterruptLeavesNothing(t *testing.T) {
	bin := buildCommand(t)
	abs, err := filepath.Abs(pymirror + "target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		group bool
		sig   syscall.Signal
	}{{"SIGINT to its group", true, syscall.SIGINT}, {"SIGKILL to the command", false, syscall.SIGKILL}} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			cmd, out, exited := startGroup(t, bin, []string{"TMPDIR=" + tmp}, "false-alarms", abs, "--count", "200")
			glob := func(pattern string) []string {
				m, _ := filepath.Glob(filepath.Join(tmp, pattern))
				return m
			}
			deadline := time.Now().Add(4 * time.Minute)
			for len(glob("stalefuzz-controlplane-*")) == 0 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if len(glob("stalefuzz-controlplane-*")) == 0 || len(glob("stalefuzz-falsealarms-*")) != 1 {
				t.Fatalf("no control plane in %s after 4 minutes:\n%s", tmp, out.String())
			}
			time.Sleep(2 * time.Second) // into the executions
			pid := cmd.Process.Pid
			if c.group {
				pid = -pid
			}
			if err := syscall.Kill(pid, c.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				var ee *exec.ExitError
				if c.sig == syscall.SIGINT && (!errors.As(err, &ee) || ee.ExitCode() != exitHarness || !strings.Contains(out.String(), "stalefuzz: interrupted")) {
					t.Errorf("interrupted false-alarms: %v, want exit %d saying it was interrupted:\n%s", err, exitHarness, lastLines(out.String(), 20))
				}
			case <-time.After(time.Minute):
				t.Fatalf("still running a minute after %v:\n%s", c.sig, lastLines(out.String(), 20))
			}
			// What the command started ends with it (package reaper);
			// give it a moment.
			var left []os.DirEntry
			var running []string
			for range 100 {
				left, _ = os.ReadDir(tmp)
				running = processesIn(tmp)
				if len(left) == 0 && len(running) == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			for _, e := range left {
				t.Errorf("left in $TMPDIR: %s", e.Name())
			}
			for _, p := range running {
				t.Errorf("still running: %s", p)
			}
		})
	}
}

// processesIn lists the processes whose command line names dir, or a path
// in it (the driver, its control plane's etcd and kube-apiserver; Linux:
// /proc; none elsewhere).
func processesIn(dir string) []string {
	var out []string
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err == nil && bytes.Contains(b, []byte(dir)) {
			out = append(out, filepath.Base(filepath.Dir(f))+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// TestReportUnreported: a finding a worker logged in the campaign's
// directory (fuzz.LoggedFindings) is reported with its schedule, violation
// and replay command when go test -fuzz reported none; an empty campaign
// directory reports nothing.
func TestReportUnreported(t *testing.T) {
	camp := t.TempDir()
	var out strings.Builder
	if reportUnreported(&out, camp, "t.yaml", time.Minute, "") || out.Len() > 0 {
		t.Fatalf("no findings.log: reported %q", out.String())
	}
	line := "/f/kuberay-54bd987f84eb.input\taction=1; restart kuberay before it sees the answer to its 11th write\t[count] RayCluster raycluster had 5 live Pods\n"
	if err := os.WriteFile(filepath.Join(camp, "findings.log"), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	if reportUnreported(&out, camp, "t.yaml", time.Minute, "/f/kuberay-54bd987f84eb.input") || out.Len() > 0 {
		t.Fatalf("the logged finding is the one go test reported: reported again %q", out.String())
	}
	if !reportUnreported(&out, camp, "t.yaml", time.Minute, "") {
		t.Fatalf("findings.log with one finding: not reported")
	}
	for _, want := range []string{"result: FINDING after 1m0s that go test -fuzz did not report", "schedule: action=1; restart kuberay", "violation: [count] RayCluster raycluster had 5 live Pods", "stalefuzz replay t.yaml /f/kuberay-54bd987f84eb.input --count 20"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report %q does not say %q", out.String(), want)
		}
	}
}

// TestKeepHung: go test -fuzz's report of a worker it killed (as Go 1.26
// prints it) is recognized with its reason and input, and the input is
// moved out of the campaign's testdata (where the next run would execute it
// first) into the findings directory, with where it came from.
func TestKeepHung(t *testing.T) {
	out := "--- FAIL: FuzzTarget (347.92s)\n    fuzzing process hung or terminated unexpectedly: exit status 2\n    Failing input written to testdata/fuzz/FuzzTarget/7973cccf2f7a0d24\n    To re-run:\n"
	m := hungRE.FindStringSubmatch(out)
	if m == nil || m[1] != "fuzzing process hung or terminated unexpectedly: exit status 2" || m[2] != "testdata/fuzz/FuzzTarget/7973cccf2f7a0d24" {
		t.Fatalf("hungRE on go test's report: %q", m)
	}
	work, findings := t.TempDir(), t.TempDir()
	src := filepath.Join(work, m[2])
	if err := os.MkdirAll(filepath.Dir(src), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("go test fuzz v1\n[]byte(\"\\x01\\x02\")\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kept := keepHung(src, findings)
	if _, err := os.Stat(src); !os.IsNotExist(err) {
		t.Errorf("the input is still in the campaign's testdata: %v", err)
	}
	b, err := fuzz.ReadCorpusEntry(kept)
	if err != nil || string(b) != "\x01\x02" || filepath.Dir(kept) != findings {
		t.Errorf("kept at %s: %q, %v; want the input in %s", kept, b, err, findings)
	}
	if o := fuzz.InputOrigin(kept); !strings.Contains(o, "killed the worker") || !strings.Contains(o, "not a finding") {
		t.Errorf("origin %q", o)
	}
}

// TestFuzzUntil: a run of go test -fuzz that killed a worker is reported
// as a harness error with its input kept, and go test -fuzz runs again for
// the time left, until a run ends otherwise (with or without --search-on:
// a campaign that stops at its first finding has none yet); with under
// 30 s left, it is reported and not run again.
func TestFuzzUntil(t *testing.T) {
	hung := "--- FAIL: FuzzTarget (1.00s)\n    fuzzing process hung or terminated unexpectedly: exit status 2\n    Failing input written to testdata/fuzz/FuzzTarget/aa\n"
	for _, c := range []struct {
		name string
		left time.Duration
		runs int
	}{
		{"time left", 10 * time.Minute, 3},
		{"too little time left", 20 * time.Second, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var times []time.Duration
			outs := []string{hung, hung, "PASS\n"}
			var kept []string
			var stdout strings.Builder
			out, status, err := fuzzUntil(t.Context(), &stdout, time.Now().Add(c.left), func(fuzztime time.Duration) (string, int, error) {
				times = append(times, fuzztime)
				o := outs[len(times)-1]
				if o == hung {
					return o, 1, nil
				}
				return o, 0, nil
			}, func(input string) string {
				kept = append(kept, input)
				return "/f/hung-aa.input"
			})
			if err != nil || len(times) != c.runs || len(kept) != min(c.runs, 2) {
				t.Fatalf("%d runs (fuzztimes %v), %d inputs kept, error %v; want %d runs", len(times), times, len(kept), err, c.runs)
			}
			if kept[0] != "testdata/fuzz/FuzzTarget/aa" || !strings.Contains(stdout.String(), "harness: go test -fuzz stopped: fuzzing process hung or terminated unexpectedly: exit status 2, at the input kept in /f/hung-aa.input: a harness error, not a finding") {
				t.Errorf("kept %v; output %q", kept, stdout.String())
			}
			if c.runs == 3 && (status != 0 || !strings.HasSuffix(out, "PASS\n") || strings.Count(stdout.String(), "fuzzing on for the") != 2 || times[0] < 9*time.Minute) {
				t.Errorf("status %d, output %q, fuzztimes %v", status, stdout.String(), times)
			}
			if c.runs == 1 && (status != 1 || strings.Contains(stdout.String(), "fuzzing on")) {
				t.Errorf("status %d, output %q: want the run's status and no second run", status, stdout.String())
			}
		})
	}
}

// TestFuzzCommandLongTarget runs a campaign on the contention target with
// a budget (12 s, over what go test -fuzz allows an input) against the real
// apiserver: stalefuzz fuzz runs it under its own driver (package
// fuzz/longrun), which finds the lost plan as go test -fuzz's workers do,
// ends the campaign there and reports it with its replay command, and
// counts the executions in the campaign's figures.
func TestFuzzCommandLongTarget(t *testing.T) {
	b, err := os.ReadFile("../../../scenarios/contention/target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Beside the original, so that its relative paths hold.
	f, err := os.CreateTemp("../../../scenarios/contention", ".stalefuzz-composed-long-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	if _, err := f.WriteString(strings.Replace(string(b), "name: contention\n", "name: contention\nbudget: 12s\n", 1)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var stdout, stderr bytes.Buffer
	status := run([]string{"fuzz", f.Name(), "--time", "4m", "--workers", "1", "--findings", t.TempDir()}, &stdout, &stderr)
	out := stdout.String()
	if !strings.Contains(stderr.String(), "the campaign runs under stalefuzz's own driver") {
		t.Errorf("nothing says the campaign ran under the long driver:\n%s", lastLines(stderr.String(), 20))
	}
	if status != exitFinding || !regexp.MustCompile(`result: FINDING after \S+ \(report above\)\. Replay it 20 times:\n  stalefuzz replay \S+ \S+\.input --count 20`).MatchString(out) {
		t.Fatalf("exit %d, want %d and the finding with its replay command:\n%s\n%s", status, exitFinding, lastLines(out, 40), lastLines(stderr.String(), 20))
	}
	if m := regexp.MustCompile(`figures: (\d+) executions`).FindStringSubmatch(out); m == nil || m[1] == "0" {
		t.Errorf("no executions counted:\n%s", lastLines(out, 20))
	}
	t.Logf("%s", lastLines(out, 12))
}

// TestRunLongEndsTheOthersAtAFinding: of a long target's worker processes,
// the first to end with a finding (exit 1) ends the others with an
// interrupt, which they take as a clean end, unless the campaign searches
// on. The processes here are a script: the first to take the lock finds
// something after 0.5 s, the others wait for an interrupt (or 3 s).
func TestRunLongEndsTheOthersAtAFinding(t *testing.T) {
	for _, searchOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("search-on=%v", searchOn), func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "worker.sh")
			body := `#!/bin/sh
trap 'echo interrupted; touch "` + dir + `/interrupted.$$"; exit 0' INT
echo "$STALEFUZZ_LONG_SHARE" >> "` + dir + `/shares"
if mkdir "` + dir + `/lock" 2>/dev/null; then sleep 0.5; echo "found"; exit 1; fi
i=0; while [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done
echo "ran out"; exit 0
`
			if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
				t.Fatal(err)
			}
			work, rp, err := workDir("stalefuzz-runlong-test-")
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Stop()
			start := time.Now()
			c := campaign{workers: 3, duration: time.Minute, searchOn: searchOn}
			var stdout bytes.Buffer
			out, status, err := runLong(context.Background(), rp, &stdout, script, work, filepath.Join(work, "campaign"), c, nil)
			if err != nil {
				t.Fatal(err)
			}
			interrupted, _ := filepath.Glob(filepath.Join(dir, "interrupted.*"))
			switch {
			case status != 1 || !strings.Contains(out, "found"):
				t.Errorf("status %d, want 1 (a finding); output:\n%s", status, out)
			case !searchOn && (len(interrupted) != 2 || time.Since(start) > 2500*time.Millisecond):
				t.Errorf("%d of the 2 other workers interrupted, after %v; want both, at once:\n%s", len(interrupted), time.Since(start), out)
			case searchOn && len(interrupted) != 0:
				t.Errorf("searching on, %d workers interrupted at another's finding; want none:\n%s", len(interrupted), out)
			}
			// Each runs its own share of the seeds.
			b, _ := os.ReadFile(filepath.Join(dir, "shares"))
			shares := strings.Fields(string(b))
			slices.Sort(shares)
			if !slices.Equal(shares, []string{"0/3", "1/3", "2/3"}) {
				t.Errorf("the workers' shares of the seeds: %q, want 0/3, 1/3 and 2/3", shares)
			}
		})
	}
}

// startGroup starts bin with args in a process group of its own, with env
// added to this process's environment and its output collected, killed
// (the whole group) when the test ends; exited has Wait's answer.
func startGroup(t *testing.T, bin string, env []string, args ...string) (cmd *exec.Cmd, out *bytes.Buffer, exited <-chan error) {
	t.Helper()
	cmd = exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, out, done
}
