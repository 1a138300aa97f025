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

// fileProxy serves modules (path@version: file name: contents) from a
// GOPROXY directory, with the Go environment pointed at it and at a module
// cache and a binary cache of the test's own.
func fileProxy(t *testing.T, mods map[string]map[string]string) {
	t.Helper()
	proxy := t.TempDir()
	for pv, files := range mods {
		path, version, _ := strings.Cut(pv, "@")
		src := t.TempDir()
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dir := filepath.Join(proxy, filepath.FromSlash(path), "@v")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, version+".zip"))
		if err != nil {
			t.Fatal(err)
		}
		if err := zip.CreateFromDir(f, module.Version{Path: path, Version: version}, src); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for name, b := range map[string]string{version + ".mod": files["go.mod"], version + ".info": `{"Version":"` + version + `"}`, "list": version + "\n"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv("GOPROXY", "file://"+proxy)
	t.Setenv("GONOSUMDB", "example.com")
	t.Setenv("GOFLAGS", "-modcacherw")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("XDG_DATA_HOME", t.TempDir())
}

// buildAndRun prepares tg (its one Go controller built, or its build
// error returned) and runs the binary, returning its path and output.
func buildAndRun(t *testing.T, tg *Target) (bin, out string, err error) {
	t.Helper()
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

// greetingDiff is a patch of main.go or greet.go's line
// `return "hello"`/`fmt.Print("hello")` into greeting.
func greetingDiff(t *testing.T, dir, name, file, line, greeting string) string {
	t.Helper()
	diff := "--- a/" + file + "\n+++ b/" + file + "\n@@ -3,5 +3,5 @@\n import \"fmt\"\n \n func main() {\n-\t" + line + "\n+\t" + strings.Replace(line, "hello", greeting, 1) + "\n }\n"
	if file == "greet.go" {
		diff = "--- a/greet.go\n+++ b/greet.go\n@@ -1,3 +1,3 @@\n package greet\n \n-func Greeting() string { return \"hello\" }\n+func Greeting() string { return \"" + greeting + "\" }\n"
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(diff), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestPreparePatched: a Go controller at a version with patches is built
// from a copy of its module with the patches applied, cached apart from
// the release's binary and by the patches' contents; a patch that does
// not apply is refused, naming the patch; the release itself is untouched.
func TestPreparePatched(t *testing.T) {
	fileProxy(t, map[string]map[string]string{"example.com/hello@v1.0.0": {
		"go.mod":  "module example.com/hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Print(\"hello\")\n}\n",
	}})
	dir := t.TempDir()
	patch := func(name, greeting string) string {
		return greetingDiff(t, dir, name, "main.go", `fmt.Print("hello")`, greeting)
	}
	run := func(patches ...string) (bin, out string, err error) {
		t.Helper()
		c := Controller{Name: "hello", Go: "example.com/hello@v1.0.0"}
		for _, p := range patches {
			c.Patches = append(c.Patches, SourcePatch{File: p})
		}
		return buildAndRun(t, &Target{Name: "patched", Dir: dir, Controllers: []Controller{c}})
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

// TestPrepareLocalPatchedDependency: a local main's patch to a module it
// requires (a controller's library, as cert-manager's target links it) is
// applied to a copy of the version the build selects, replaced into a copy
// of its go.mod; the directory's go.mod is not changed, and the build
// without the patch, cached beside it, still links the release.
func TestPrepareLocalPatchedDependency(t *testing.T) {
	fileProxy(t, map[string]map[string]string{"example.com/greet@v1.0.0": {
		"go.mod":   "module example.com/greet\n\ngo 1.22\n",
		"greet.go": "package greet\n\nfunc Greeting() string { return \"hello\" }\n",
	}})
	dir := t.TempDir()
	src := filepath.Join(dir, "main")
	os.MkdirAll(src, 0o755)
	gomod := "module example.com/main\n\ngo 1.22\n\nrequire example.com/greet v1.0.0\n"
	os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod), 0o644)
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/greet\"\n)\n\nfunc main() { fmt.Print(greet.Greeting()) }\n"), 0o644)
	tidy := exec.Command("go", "mod", "download", "example.com/greet")
	tidy.Dir = src
	if out, err := tidy.CombinedOutput(); err != nil {
		t.Fatalf("go mod download: %v\n%s", err, out)
	}
	sum := exec.Command("go", "mod", "tidy")
	sum.Dir = src
	if out, err := sum.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	gomod0, _ := os.ReadFile(filepath.Join(src, "go.mod"))
	patch := greetingDiff(t, dir, "fix.patch", "greet.go", "", "bonjour")
	run := func(patches ...SourcePatch) (bin, out string, err error) {
		t.Helper()
		return buildAndRun(t, &Target{Name: "local", Dir: dir, Controllers: []Controller{{Name: "main", Go: "./main", Patches: patches}}})
	}
	release, out, err := run()
	if err != nil || out != "hello" {
		t.Fatalf("the release: printed %q (%v), want hello", out, err)
	}
	fixed, out, err := run(SourcePatch{File: patch, Module: "example.com/greet"})
	if err != nil || out != "bonjour" {
		t.Fatalf("with the library patched: printed %q (%v), want bonjour", out, err)
	}
	if fixed == release {
		t.Errorf("patched binary at the release's path %s", release)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "go.mod")); string(b) != string(gomod0) {
		t.Errorf("the directory's go.mod changed:\n%s\nwant\n%s", b, gomod0)
	}
	if bin, out, _ := run(); bin != release || out != "hello" {
		t.Errorf("without the patch: binary %s printed %q, want the cached release %s printing hello", bin, out, release)
	}
	if _, _, err := run(SourcePatch{File: patch, Module: "example.com/absent"}); err == nil || !strings.Contains(err.Error(), "requires no module example.com/absent") {
		t.Errorf("a patch to a module the build does not require: error %v, want one naming it", err)
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
	write("name: p\ncontrollers:\n  - name: op\n    go: example.com/op/cmd@v1.0.0\n    patches: [{file: a.patch}]\nworkload:\n  - delete: {apiVersion: v1, kind: ConfigMap, name: x}\n")
	t.Setenv(PatchesEnv, "op="+filepath.Join(dir, "b.patch"))
	tg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := tg.Controllers[0].Patches; len(got) != 2 || got[0] != (SourcePatch{File: "a.patch"}) || got[1] != (SourcePatch{File: filepath.Join(dir, "b.patch")}) {
		t.Errorf("patches %v, want the file's a.patch then the environment's b.patch", got)
	}
	t.Setenv(PatchesEnv, "op:example.com/lib="+filepath.Join(dir, "b.patch")+"\nop="+filepath.Join(dir, "a.patch"))
	if tg, err = Load(file); err != nil {
		t.Fatal(err)
	}
	if got := tg.Controllers[0].Patches; len(got) != 3 || got[1] != (SourcePatch{File: filepath.Join(dir, "b.patch"), Module: "example.com/lib"}) || got[2].Module != "" {
		t.Errorf("patches %v, want a module's patch from NAME:MODULE=FILE, then one of its own", got)
	}
	t.Setenv(PatchesEnv, "nope="+filepath.Join(dir, "b.patch"))
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), `controller "nope"`) || !strings.Contains(err.Error(), "it has: op") {
		t.Errorf("unknown controller: error %v, want one naming nope and op", err)
	}
	t.Setenv(PatchesEnv, "")
	write("name: p\ncontrollers:\n  - name: op\n    command: [./op]\n    patches: [{file: a.patch}]\nworkload:\n  - delete: {apiVersion: v1, kind: ConfigMap, name: x}\n")
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), "patches apply to a Go controller") {
		t.Errorf("patches on a command: error %v, want a refusal", err)
	}
	write("name: p\ncontrollers:\n  - name: op\n    go: example.com/op/cmd@v1.0.0\n    patches: [{file: missing.patch}]\nworkload:\n  - delete: {apiVersion: v1, kind: ConfigMap, name: x}\n")
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), "no patch file") {
		t.Errorf("missing patch: error %v, want no patch file", err)
	}
	write("name: p\ncontrollers:\n  - name: op\n    go: ./op\n    patches: [{file: a.patch}]\nworkload:\n  - delete: {apiVersion: v1, kind: ConfigMap, name: x}\n")
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), "want module") {
		t.Errorf("a local controller's patch without a module: error %v, want module asked for", err)
	}
}
