package target

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestBuildStoppedLeavesNothing: a test run stopped with SIGTERM while it
// builds a controller (as make or CI stop it) leaves no build copy in the
// binary cache, and a copy a killed build left is removed by the next.
func TestBuildStoppedLeavesNothing(t *testing.T) {
	if dir := os.Getenv("STALEFUZZ_TEST_BUILD_INTO"); dir != "" {
		_ = buildInto(filepath.Join(dir, "bin"), func(built, tmp string) error {
			_ = os.WriteFile(filepath.Join(tmp, "big"), make([]byte, 1<<20), 0o600)
			time.Sleep(time.Minute) // stopped here
			return nil
		})
		return
	}
	dir := t.TempDir()
	orphan := filepath.Join(dir, ".build-999999999-1") // no such pid
	if err := os.Mkdir(orphan, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBuildStoppedLeavesNothing$")
	cmd.Env = append(os.Environ(), "STALEFUZZ_TEST_BUILD_INTO="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	building := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, ".build-*"))
		return m
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := building(); len(m) == 1 && m[0] != orphan {
			if _, err := os.Stat(filepath.Join(m[0], "big")); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("no build under way after 30 s: %v", building())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("the stopped run did not die of SIGTERM: %v", err)
	}
	if m := building(); len(m) > 0 {
		t.Errorf("left behind: %v", m)
	}
}
