package target

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// fileProxy serves module example.com/hello at v1.0.0, a main printing
// "hello", from a GOPROXY directory, with the Go environment pointed at it
// and at a module cache of the test's own.
func fileProxy(t *testing.T) {
	t.Helper()
	src := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Print(\"hello\")\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	proxy := t.TempDir()
	dir := filepath.Join(proxy, "example.com", "hello", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mv := module.Version{Path: "example.com/hello", Version: "v1.0.0"}
	f, err := os.Create(filepath.Join(dir, "v1.0.0.zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zip.CreateFromDir(f, mv, src); err != nil {
		t.Fatal(err)
	}
	f.Close()
	mod, _ := os.ReadFile(filepath.Join(src, "go.mod"))
	for name, b := range map[string][]byte{"v1.0.0.mod": mod, "v1.0.0.info": []byte(`{"Version":"v1.0.0"}`), "list": []byte("v1.0.0\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GOPROXY", "file://"+proxy)
	t.Setenv("GONOSUMDB", "example.com")
	t.Setenv("GOFLAGS", "-modcacherw")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("XDG_DATA_HOME", t.TempDir())
}

// TestPreparePatched: a Go controller at a version with patches is built
// from a copy of its module with the patches applied, cached apart from
// the release's binary and by the patches' contents; a patch that does
// not apply is refused, naming the patch; the release itself is untouched.
func TestPreparePatched(t *testing.T) {
	fileProxy(t)
	dir := t.TempDir()
	patch := func(name, greeting string) string {
		p := filepath.Join(dir, name)
		diff := "--- a/main.go\n+++ b/main.go\n@@ -3,5 +3,5 @@\n import \"fmt\"\n \n func main() {\n-\tfmt.Print(\"hello\")\n+\tfmt.Print(\"" + greeting + "\")\n }\n"
		if err := os.WriteFile(p, []byte(diff), 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	run := func(patches ...string) (bin, out string, err error) {
		t.Helper()
		tg := &Target{Name: "patched", Dir: dir, Controllers: []Controller{{Name: "hello", Go: "example.com/hello@v1.0.0", Patches: patches}}}
		if err := Prepare(context.Background(), tg, nil); err != nil {
			return "", "", err
		}
		procs, err := tg.processes()
		if err != nil {
			t.Fatal(err)
		}
		b, err := exec.Command(procs[0].path).Output()
		if err != nil {
			t.Fatalf("run %s: %v", procs[0].path, err)
		}
		return procs[0].path, string(b), nil
	}

	release, out, err := run()
	if err != nil || out != "hello" {
		t.Fatalf("the release: printed %q (%v), want hello", out, err)
	}
	fixed, out, err := run(patch("fix.patch", "bonjour"))
	if err != nil || out != "bonjour" {
		t.Fatalf("patched: printed %q (%v), want bonjour", out, err)
	}
	if fixed == release || !strings.Contains(fixed, string(filepath.Separator)+"patched-") {
		t.Errorf("patched binary at %s, want it apart from the release's %s, under patched-<hash>", fixed, release)
	}
	if _, out, _ := run(); out != "hello" {
		t.Errorf("the release after a patched build printed %q, want hello", out)
	}
	other, out, err := run(patch("fix.patch", "hola"))
	if err != nil || out != "hola" || other == fixed {
		t.Errorf("edited patch: binary %s printed %q (%v), want a new binary printing hola", other, out, err)
	}

	bad := filepath.Join(dir, "bad.patch")
	os.WriteFile(bad, []byte("--- a/main.go\n+++ b/main.go\n@@ -6,1 +6,1 @@\n-\tfmt.Print(\"nothing like this\")\n+\tfmt.Print(\"x\")\n"), 0o644)
	if _, _, err := run("bad.patch"); err == nil || !strings.Contains(err.Error(), "bad.patch does not apply") {
		t.Errorf("a patch that does not apply: error %v, want one naming bad.patch", err)
	}
}

// TestPatchesEnv: STALEFUZZ_PATCHES adds patches to the controllers it
// names, after the target file's; a controller the target lacks is an
// error naming the ones it has; patches on a command are refused.
func TestPatchesEnv(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.patch"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "b.patch"), nil, 0o644)
	file := filepath.Join(dir, "t.yaml")
	write := func(text string) {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("name: p\ncontrollers:\n  - name: op\n    go: example.com/op/cmd@v1.0.0\n    patches: [a.patch]\nworkload:\n  - delete: {apiVersion: v1, kind: ConfigMap, name: x}\n")
	t.Setenv(PatchesEnv, "op="+filepath.Join(dir, "b.patch"))
	tg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := tg.Controllers[0].Patches; len(got) != 2 || got[0] != "a.patch" || got[1] != filepath.Join(dir, "b.patch") {
		t.Errorf("patches %q, want the file's a.patch then the environment's b.patch", got)
	}
	t.Setenv(PatchesEnv, "nope="+filepath.Join(dir, "b.patch"))
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), `controller "nope"`) || !strings.Contains(err.Error(), "it has: op") {
		t.Errorf("unknown controller: error %v, want one naming nope and op", err)
	}
	t.Setenv(PatchesEnv, "")
	write("name: p\ncontrollers:\n  - name: op\n    command: [./op]\n    patches: [a.patch]\nworkload:\n  - delete: {apiVersion: v1, kind: ConfigMap, name: x}\n")
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), "patches apply to a Go module at a version") {
		t.Errorf("patches on a command: error %v, want a refusal", err)
	}
	write("name: p\ncontrollers:\n  - name: op\n    go: example.com/op/cmd@v1.0.0\n    patches: [missing.patch]\nworkload:\n  - delete: {apiVersion: v1, kind: ConfigMap, name: x}\n")
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), "no patch file") {
		t.Errorf("missing patch: error %v, want no patch file", err)
	}
}
