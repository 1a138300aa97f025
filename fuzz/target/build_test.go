package target

import (
	"os"
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
		bin, out, err := buildAndRun(t, tg)
		if err != nil {
			t.Fatal(err)
		}
		return bin, out
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

// TestPrepareLocalEnclosingModule: a main that is a package of the module
// it sits in, linking a sibling package, is built again when the sibling
// changes, though nothing in its own directory did.
func TestPrepareLocalEnclosingModule(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	dir := t.TempDir()
	write := func(name, text string) { t.Helper(); writeTree(t, dir, map[string]string{name: text}) }
	greet := func(greeting string) string {
		return "package greet\n\nconst Greeting = \"" + greeting + "\"\n"
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("greet/greet.go", greet("hello"))
	write("cmd/hello/main.go", "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/m/greet\"\n)\n\nfunc main() { fmt.Print(greet.Greeting) }\n")
	tg := &Target{Name: "local", Dir: filepath.Join(dir, "cmd"), Controllers: []Controller{{Name: "hello", Go: "./hello"}}}
	run := func() (bin, out string) {
		t.Helper()
		bin, out, err := buildAndRun(t, tg)
		if err != nil {
			t.Fatal(err)
		}
		return bin, out
	}
	bin1, out := run()
	if out != "hello" {
		t.Fatalf("first build: binary %s printed %q, want hello", bin1, out)
	}
	write("greet/greet.go", greet("bonjour"))
	if bin, out := run(); bin == bin1 || out != "bonjour" {
		t.Errorf("sibling package edited: binary %s printed %q, want a new binary printing bonjour", bin, out)
	}
	if _, err := os.Stat(bin1); err == nil {
		t.Errorf("the build before the edit, %s, is still cached: one build per directory is kept", bin1)
	}
}

// TestDropMissingReplaces: in a copy of a module from its zip, a replace by a
// nested module's directory (which zips leave out) is dropped, so that the
// required published version builds; replaces by present directories and by
// other modules stay.
func TestDropMissingReplaces(t *testing.T) {
	dir := t.TempDir()
	gomod := `module example.com/ctl

go 1.22

replace example.com/ctl/api => ./api

replace example.com/ctl/here => ./here

replace example.com/digest => example.com/digest v1.0.1

require example.com/ctl/api v1.9.3
`
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "here"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "here", "go.mod"), []byte("module example.com/ctl/here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := dropMissingReplaces(dir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	got := string(b)
	if strings.Contains(got, "=> ./api") {
		t.Errorf("the replace by the absent ./api stayed:\n%s", got)
	}
	for _, want := range []string{"=> ./here", "=> example.com/digest v1.0.1", "require example.com/ctl/api v1.9.3"} {
		if !strings.Contains(got, want) {
			t.Errorf("go.mod lost %q:\n%s", want, got)
		}
	}
}

// writeTree writes files (path relative to dir: contents) under dir,
// making their directories.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
