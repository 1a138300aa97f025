package target

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrepareLocal: a Go controller given as a directory of the target's is
// built there with go build and cached by a hash of its sources; the same
// sources reuse the binary, an edit builds another.
func TestPrepareLocal(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	dir := t.TempDir()
	src := filepath.Join(dir, "hello")
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	main := func(greeting string) string {
		return "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(\"" + greeting + "\") }\n"
	}
	write("go.mod", "module example.com/hello\n\ngo 1.22\n")
	write("main.go", main("hello"))
	tg := &Target{Name: "local", Dir: dir, Controllers: []Controller{{Name: "hello", Go: "./hello"}}}
	if !validGo("./hello") || validGo("./hello@v1") {
		t.Fatalf("validGo: want ./hello valid, ./hello@v1 not")
	}

	run := func() (bin, out string) {
		t.Helper()
		if err := Prepare(context.Background(), tg, nil); err != nil {
			t.Fatal(err)
		}
		procs, err := tg.processes()
		if err != nil {
			t.Fatal(err)
		}
		b, err := exec.Command(procs[0].path).Output()
		if err != nil {
			t.Fatalf("run %s: %v", procs[0].path, err)
		}
		return procs[0].path, string(b)
	}
	bin1, out := run()
	if out != "hello" || !strings.Contains(bin1, filepath.Join("stalefuzz", "bin", "local", "hello-")) {
		t.Fatalf("first build: binary %s printed %q, want hello under stalefuzz/bin/local/hello-<hash>", bin1, out)
	}
	if bin, _ := run(); bin != bin1 {
		t.Errorf("unchanged sources: binary %s, want the cached %s", bin, bin1)
	}
	write("main.go", main("bonjour"))
	if bin, out := run(); bin == bin1 || out != "bonjour" {
		t.Errorf("edited sources: binary %s printed %q, want a new binary printing bonjour", bin, out)
	}
}
