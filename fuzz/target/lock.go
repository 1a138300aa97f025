package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockBuild takes an exclusive lock on the build of bin (flock(2) on the
// file bin+".lock" beside it), waiting while another process holds it and
// saying so once on progress; unlock releases it. So two processes that
// prepare one controller at once (make test's background builds and a test
// that needs the controller, two campaigns on a fresh machine) build it
// once: the second finds the binary when it gets the lock. The kernel
// releases the lock of a process that dies. ctx ends the wait.
func lockBuild(ctx context.Context, bin, name string, progress io.Writer) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return nil, fmt.Errorf("lock the build of %s: %w", name, err)
	}
	f, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock the build of %s: %w", name, err)
	}
	said := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock the build of %s (%s): %w", name, f.Name(), err)
		}
		if !said {
			fmt.Fprintf(progress, "stalefuzz: waiting for another process's build of controller %s (%s)\n", name, f.Name())
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for another process's build of %s: %w", name, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
