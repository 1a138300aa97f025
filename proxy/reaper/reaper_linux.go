package reaper

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// setPdeathsig has the kernel SIGKILL an owned process as soon as the thread
// that started it dies, before the reaper process gets to it.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// zombie reports whether pid is a zombie, or has gone, by its state in
// /proc/PID/stat.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// executables lists every process whose /proc/PID/exe can be read.
func executables() []executable {
	dirs, _ := os.ReadDir("/proc")
	var out []executable
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", d.Name(), "exe")); err == nil {
			out = append(out, executable{pid: pid, exe: exe})
		}
	}
	return out
}

// parent is pid's parent process (the fourth field of /proc/PID/stat), 0 if
// pid has gone.
func parent(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
