package target

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPrepareBuildsOnceAtATime: processes (here, Prepare calls with their
// own lock files' descriptors) that prepare one controller at once build it
// once; the others wait for the build and say so, then find the binary.
func TestPrepareBuildsOnceAtATime(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	dir := t.TempDir()
	writeTree(t, filepath.Join(dir, "hello"), map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(\"hello\") }\n",
	})
	tg := &Target{Name: "local", Dir: dir, Controllers: []Controller{{Name: "hello", Go: "./hello"}}}
	const n = 3
	var (
		wg   sync.WaitGroup
		outs [n]bytes.Buffer
		errs [n]error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Prepare(context.Background(), tg, &outs[i])
		}()
	}
	wg.Wait()
	builds, waits := 0, 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Prepare %d: %v", i, errs[i])
		}
		builds += strings.Count(outs[i].String(), "building controller hello")
		waits += strings.Count(outs[i].String(), "waiting for another process's build of controller hello")
	}
	if builds != 1 {
		t.Errorf("%d builds of one controller by %d concurrent Prepare calls, want 1:\n%s%s%s", builds, n, &outs[0], &outs[1], &outs[2])
	}
	if waits == 0 {
		t.Logf("no Prepare call waited: the first build ended before the others began (nothing to judge the wait by)")
	}
}

// TestLockBuildWaits: a build lock held elsewhere keeps lockBuild waiting,
// saying so, until it is released; a context that ends stops the wait.
func TestLockBuildWaits(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ctl", "ctl")
	unlock, err := lockBuild(context.Background(), bin, "ctl", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var said bytes.Buffer
	if _, err := lockBuild(ctx, bin, "ctl", &said); err == nil || !strings.Contains(err.Error(), "wait for another process's build of ctl") {
		t.Fatalf("lock held elsewhere, context ended: err %v, want the wait's end named", err)
	}
	if !strings.Contains(said.String(), "waiting for another process's build of controller ctl") {
		t.Errorf("nothing said about the wait: %q", said.String())
	}
	got := make(chan error, 1)
	go func() {
		u, err := lockBuild(context.Background(), bin, "ctl", &bytes.Buffer{})
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("lock held elsewhere: lockBuild returned (%v) before it was released", err)
	case <-time.After(500 * time.Millisecond):
	}
	unlock()
	if err := <-got; err != nil {
		t.Fatalf("after the release: %v", err)
	}
}
