package reaper

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Reaper owns child processes and a directory. Create one with New.
type Reaper struct {
	dir     string
	pids    string // dir/pids.d: one file per owned PID
	cmd     *exec.Cmd
	in      io.WriteCloser
	mu      sync.Mutex
	stopped bool
}

// script waits for its stdin to close. If the last line it read is not
// "stop", the process that started it died without cleaning up: it kills
// every recorded process group and removes the directory. It moves pids.d
// away first, so that no PID is recorded after it has listed them: a shim
// that has not yet recorded its PID finds no pids.d and does not exec.
const script = `trap '' INT TERM HUP
last=
while IFS= read -r line; do last=$line; done
[ "$last" = stop ] && exit 0
mv "$1/pids.d" "$1/pids.dead"
for f in "$1"/pids.dead/*; do
  [ -f "$f" ] || continue
  p=${f##*/}
  # dash: "kill -KILL -- -PID" is refused ("Illegal number"); -s works.
  kill -s KILL -- "-$p" 2>/dev/null || kill -s KILL "$p" 2>/dev/null
done
rm -rf "$1"
`

// New starts a reaper for dir, which must exist and belong to the caller
// alone: it is removed when the caller dies, or by Stop.
func New(dir string) (*Reaper, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("reaper: unable to resolve directory %s: %w", dir, err)
	}
	r := &Reaper{dir: abs, pids: filepath.Join(abs, "pids.d")}
	if err := os.Mkdir(r.pids, 0o700); err != nil {
		return nil, fmt.Errorf("reaper: unable to create PID directory in %s: %w", abs, err)
	}
	cmd := exec.Command("/bin/sh", "-c", script, "stalefuzz-reaper", abs)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("reaper: unable to create pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("reaper: unable to start for %s: %w", abs, err)
	}
	r.cmd, r.in = cmd, in
	return r, nil
}

// Dir is the directory the reaper removes.
func (r *Reaper) Dir() string { return r.dir }

// Shim writes an executable into the directory that records its PID and then
// execs bin with its arguments, for a binary that something else launches
// (envtest, say). Launch it as a process group leader, so that a kill of its
// group reaches what it starts. If it cannot record its PID (the owner has
// died and the reaper is at work), it exits without running bin. It returns
// the shim's path.
func (r *Reaper) Shim(name, bin string) (string, error) {
	path := filepath.Join(r.dir, name)
	s := fmt.Sprintf("#!/bin/sh\n: > %s/$$ && exec %s \"$@\"\n", quote(r.pids), quote(bin))
	if err := os.WriteFile(path, []byte(s), 0o700); err != nil {
		return "", fmt.Errorf("reaper: unable to write shim for %s: %w", name, err)
	}
	return path, nil
}

// Start starts cmd as an owned process: in a process group of its own,
// recorded before its binary runs, and SIGKILLed if this process dies first.
// cmd is otherwise started as exec.Cmd.Start would (its Path, Args, Env, Dir
// and standard streams), and the caller waits for it with cmd.Wait as usual;
// call Forget after Wait returns. cmd.Path must be an absolute path or found
// in PATH, as for exec.Command.
func (r *Reaper) Start(cmd *exec.Cmd) error {
	r.mu.Lock()
	stopped := r.stopped
	r.mu.Unlock()
	if stopped {
		return fmt.Errorf("reaper: unable to start %s: the reaper of %s was stopped", cmd.Path, r.dir)
	}
	if cmd.Err != nil {
		return fmt.Errorf("reaper: unable to start %s: %w", cmd.Path, cmd.Err)
	}
	bin := cmd.Path
	args := []string{"sh", "-c", `: > "$0/$$" && exec "$@"`, r.pids, bin}
	if len(cmd.Args) > 1 {
		args = append(args, cmd.Args[1:]...)
	}
	cmd.Path, cmd.Args = "/bin/sh", args
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setPdeathsig(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("reaper: unable to start %s: %w", bin, err)
	}
	// The shim records the PID before the binary runs, which covers this
	// process dying right now (so does Pdeathsig, on Linux); recording it
	// here as well means the record exists when Start returns, for Stop and
	// PIDs.
	if err := os.WriteFile(filepath.Join(r.pids, strconv.Itoa(cmd.Process.Pid)), nil, 0o600); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return fmt.Errorf("reaper: unable to record %s (pid %d): %w", bin, cmd.Process.Pid, err)
	}
	return nil
}

// Forget removes the record of a process that has exited and been waited
// for, so that the reaper never kills a process that reuses its PID.
func (r *Reaper) Forget(pid int) {
	_ = os.Remove(filepath.Join(r.pids, strconv.Itoa(pid)))
}

// PIDs returns the recorded processes that are running now.
func (r *Reaper) PIDs() []int {
	ents, _ := os.ReadDir(r.pids)
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 && syscall.Kill(pid, 0) == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Stop kills the process group of every process still recorded, ends the
// reaper and removes the directory. It is idempotent.
func (r *Reaper) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.stopped = true
	for _, pid := range r.PIDs() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	var errs []error
	_, _ = io.WriteString(r.in, "stop\n")
	_ = r.in.Close()
	if err := r.cmd.Wait(); err != nil {
		errs = append(errs, fmt.Errorf("reaper of %s: %w", r.dir, err))
	}
	if err := os.RemoveAll(r.dir); err != nil {
		errs = append(errs, fmt.Errorf("reaper: unable to remove %s: %w", r.dir, err))
	}
	return errors.Join(errs...)
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Gone reports whether process pid has exited: it no longer exists, or it is
// a zombie waiting for its parent to reap it.
func Gone(pid int) bool {
	return syscall.Kill(pid, 0) != nil || zombie(pid)
}

// Running lists the live processes (Gone excluded) whose executable is bin,
// for a test that checks that none of them survived. On Linux a process's
// executable is the file it runs (/proc/PID/exe); elsewhere it is the path ps
// reports, the one the process was started by, compared with bin with
// symlinks resolved.
func Running(bin string) []int {
	want, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return nil
	}
	var pids []int
	for _, p := range executables() {
		if p.exe == want && !Gone(p.pid) {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// RunningUnder is Running restricted to the descendants of the process
// ancestor (os.Getpid() for a test's own): what a test checks when other
// runs of the same binary may share the machine (a campaign, another
// package's tests), whose processes are not its leaks.
func RunningUnder(bin string, ancestor int) []int {
	var pids []int
	for _, pid := range Running(bin) {
		for p, hops := parent(pid), 0; p > 1 && hops < 64; p, hops = parent(p), hops+1 {
			if p == ancestor {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// executable is a process and the path of its executable, symlinks resolved.
type executable struct {
	pid int
	exe string
}
