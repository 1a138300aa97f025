package fuzz

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// TestCommandRestartsAsGiven: a controller started with Exec.Command and
// restarted twice runs each time as the caller gave it: its standard input,
// extra files, directory and environment kept, and never wrapped in another
// layer of the reaper's shell for each restart.
func TestCommandRestartsAsGiven(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	extra := filepath.Join(dir, "extra")
	out := filepath.Join(dir, "out")
	for path, body := range map[string]string{in: "stdin\n", extra: "extra\n"} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Each instance appends one line: what it read on its stdin and on fd
	// 3, its directory, its environment and its arguments; then waits.
	script := `read a; read b <&3; echo "$a $b $(pwd) $GREETING $0 $*" >> ` + out + `; exec sleep 60`
	// lines waits until out has n lines, and returns them.
	lines := func(ctx context.Context, n int) ([]string, error) {
		var got []string
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
			b, _ := os.ReadFile(out)
			got = strings.Split(strings.TrimSpace(string(b)), "\n")
			return len(b) > 0 && len(got) >= n, nil
		})
		if err != nil {
			return got, fmt.Errorf("want %d lines in %s, got %q: %w", n, out, got, err)
		}
		return got, nil
	}
	var got []string
	s := Scenario{
		Name: "restart-as-given",
		Start: func(ctx context.Context, x *Exec) error {
			_ = os.Remove(out)
			stdin, err := os.Open(in)
			if err != nil {
				return err
			}
			defer stdin.Close() // Command keeps its own copy
			fd3, err := os.Open(extra)
			if err != nil {
				return err
			}
			defer fd3.Close()
			cmd := exec.Command("/bin/sh", "-c", script, "zero", "one", "two")
			cmd.Stdin, cmd.ExtraFiles, cmd.Dir = stdin, []*os.File{fd3}, dir
			cmd.Env = append(os.Environ(), "GREETING=hello")
			return x.Command("ctl", cmd)
		},
		Drive: func(context.Context, *Exec) error { return nil },
		// Restart it twice, each time once the instance before has
		// written its line.
		Checks: []Check{{Name: "restarts", Fn: func(ctx context.Context, x *Exec, _ trace.Trace) error {
			for n := 1; n <= 2; n++ {
				if _, err := lines(ctx, n); err != nil {
					return err
				}
				if err := x.Restart(ctx, "ctl"); err != nil {
					return err
				}
			}
			var err error
			got, err = lines(ctx, 3)
			return err
		}}},
	}
	env := testEnv(t, s)
	res, err := env.Run(context.Background(), Schedule{}, Within(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	want := "stdin extra " + dir + " hello zero one two"
	if len(got) != 3 {
		t.Fatalf("want a line from the first instance and from each of two restarts, got %q", got)
	}
	for i, l := range got {
		if l != want {
			t.Errorf("instance %d: got %q, want %q (as the caller gave it)", i, l, want)
		}
	}
}
