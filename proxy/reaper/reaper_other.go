//go:build !linux

package reaper

import (
	"bufio"
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// setPdeathsig does nothing: only Linux has a parent-death signal. The
// reaper process still kills every recorded process group when this process
// dies (see the package documentation for what that leaves open).
func setPdeathsig(*syscall.SysProcAttr) {}

// zombie reports whether pid is a zombie, or has gone, by the state ps
// reports for it. If ps cannot be run at all, pid counts as live.
func zombie(pid int) bool {
	out, err := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
	if errors.As(err, new(*exec.ExitError)) {
		return true // ps lists no such process
	}
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(out)), "Z")
}

// executables lists every process with the absolute command path ps reports
// for it (the path it was started by), symlinks resolved.
func executables() []executable {
	out, err := exec.Command("ps", "-A", "-o", "pid=,comm=").Output()
	if err != nil {
		return nil
	}
	var procs []executable
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f, path, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		pid, err := strconv.Atoi(f)
		path = strings.TrimSpace(path)
		if err != nil || !filepath.IsAbs(path) {
			continue
		}
		if exe, err := filepath.EvalSymlinks(path); err == nil {
			procs = append(procs, executable{pid: pid, exe: exe})
		}
	}
	return procs
}

// parent is pid's parent process as ps reports it, 0 if pid has gone or ps
// cannot be run.
func parent(pid int) int {
	out, err := exec.Command("ps", "-o", "ppid=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return 0
	}
	ppid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return ppid
}
