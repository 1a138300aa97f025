package reaper_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stalefuzz/stalefuzz/proxy/reaper"
)

const helperEnv = "STALEFUZZ_REAPER_HELPER"

// TestMain lets the test binary act as an owner that starts processes under a
// reaper and then dies (see testNothingOutlives).
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		owner(mode)
		return
	}
	os.Exit(m.Run())
}

// owner starts two owned processes, one of which starts a grandchild in its
// own group, prints every PID and the reaper's directory, then dies as mode
// says.
func owner(mode string) {
	dir, err := os.MkdirTemp("", "reaper-owner-")
	if err != nil {
		panic(err)
	}
	r, err := reaper.New(dir)
	if err != nil {
		panic(err)
	}
	a := exec.Command("sleep", "600")
	b := exec.Command("/bin/sh", "-c", "sleep 600 & echo $!; wait")
	out, _ := b.StdoutPipe()
	for _, c := range []*exec.Cmd{a, b} {
		if err := r.Start(c); err != nil {
			panic(err)
		}
	}
	grandchild, _ := bufio.NewReader(out).ReadString('\n')
	fmt.Printf("PIDS %d %d %s\nDIR %s\n", a.Process.Pid, b.Process.Pid, strings.TrimSpace(grandchild), dir)
	switch mode {
	case "panic":
		panic("owner dies")
	case "exit":
		os.Exit(3)
	default:
		select {}
	}
}

func TestNothingOutlivesPanic(t *testing.T) { testNothingOutlives(t, "panic", nil) }
func TestNothingOutlivesExit(t *testing.T)  { testNothingOutlives(t, "exit", nil) }
func TestNothingOutlivesSIGKILL(t *testing.T) {
	testNothingOutlives(t, "hang", func(p *os.Process) { _ = p.Signal(syscall.SIGKILL) })
}
func TestNothingOutlivesSIGINT(t *testing.T) {
	testNothingOutlives(t, "hang", func(p *os.Process) { _ = p.Signal(syscall.SIGINT) })
}

func testNothingOutlives(t *testing.T, mode string, kill func(*os.Process)) {
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(out)
	var pids []int
	var dir string
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "PIDS "); ok {
			for _, f := range strings.Fields(rest) {
				pid, _ := strconv.Atoi(f)
				pids = append(pids, pid)
			}
		}
		if rest, ok := strings.CutPrefix(sc.Text(), "DIR "); ok {
			dir = rest
			break
		}
	}
	if len(pids) != 3 || dir == "" {
		t.Fatalf("owner printed PIDs %v and directory %q; want 3 PIDs and a directory", pids, dir)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) != nil {
			t.Fatalf("PID %d not running while its owner is alive", pid)
		}
	}
	if kill != nil {
		kill(cmd.Process)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("owner exited cleanly; want a %s death", mode)
	}
	for _, pid := range pids {
		if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return reaper.Gone(pid), nil
		}); err != nil {
			t.Errorf("PID %d still running 10s after its owner died by %s", pid, mode)
		}
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		left, _ := filepath.Glob(filepath.Join(tmp, "*"))
		return len(left) == 0, nil
	}); err != nil {
		left, _ := filepath.Glob(filepath.Join(tmp, "*"))
		t.Errorf("left behind in $TMPDIR after %s: %v", mode, left)
	}
}

// TestStopKillsAndForgets: Stop kills what is still running and removes the
// directory; a process that exited and was forgotten is no longer recorded,
// so its PID, if reused, is never killed.
func TestStopKillsAndForgets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "owned")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := reaper.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	short := exec.Command("true")
	long := exec.Command("sleep", "600")
	for _, c := range []*exec.Cmd{short, long} {
		if err := r.Start(c); err != nil {
			t.Fatal(err)
		}
	}
	_ = short.Wait()
	r.Forget(short.Process.Pid)
	if _, err := os.Stat(filepath.Join(dir, "pids.d", strconv.Itoa(short.Process.Pid))); !os.IsNotExist(err) {
		t.Errorf("forgotten PID %d still recorded (stat: %v)", short.Process.Pid, err)
	}
	if got := r.PIDs(); len(got) != 1 || got[0] != long.Process.Pid {
		t.Errorf("PIDs() = %v, want [%d]", got, long.Process.Pid)
	}
	if err := r.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := long.Wait(); err == nil {
		t.Errorf("sleep exited cleanly; want it killed by Stop")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s survives Stop (stat: %v)", dir, err)
	}
	if err := r.Start(exec.Command("true")); err == nil {
		t.Errorf("Start after Stop succeeded; want an error")
	}
}

// TestShimRunsNothingUnrecorded: a shim that cannot record its PID (the
// reaper of a dead owner has moved the records away) exits without running
// its binary, so nothing starts that the reaper would not kill.
func TestShimRunsNothingUnrecorded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "owned")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := reaper.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	ran := filepath.Join(t.TempDir(), "ran")
	shim, err := r.Shim("touch", "/usr/bin/env")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "pids.d"), filepath.Join(dir, "pids.dead")); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(shim, "touch", ran).Run(); err == nil {
		t.Errorf("shim %s exited cleanly without a PID directory; want a failure", shim)
	}
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("shim %s ran its binary without recording its PID (stat %s: %v)", shim, ran, err)
	}
}

// TestRunningUnder: a child of this process counts, a process of the same
// binary that another parent owns (here one orphaned by its shell, which
// init or a subreaper adopts) does not.
func TestRunningUnder(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	child := exec.Command(sleep, "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	pidFile := filepath.Join(t.TempDir(), "orphan")
	if out, err := exec.Command("sh", "-c", sleep+" 30 </dev/null >/dev/null 2>&1 & echo $! > "+pidFile).CombinedOutput(); err != nil {
		t.Fatalf("sh: %v: %s", err, out)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(orphan, syscall.SIGKILL) })

	all := reaper.Running(sleep)
	under := reaper.RunningUnder(sleep, os.Getpid())
	if !slices.Contains(all, child.Process.Pid) || !slices.Contains(all, orphan) {
		t.Fatalf("Running(%s) = %v, want both %d and %d", sleep, all, child.Process.Pid, orphan)
	}
	if !slices.Contains(under, child.Process.Pid) {
		t.Errorf("RunningUnder(%s, self) = %v: misses the child %d", sleep, under, child.Process.Pid)
	}
	if slices.Contains(under, orphan) {
		t.Errorf("RunningUnder(%s, self) = %v: counts %d, which another parent owns", sleep, under, orphan)
	}
}
