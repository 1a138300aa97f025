package target

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/mod/modfile"
)

// BinaryPath is where Prepare caches the binary of a Go controller,
// "module/path/cmd@version": $XDG_DATA_HOME/stalefuzz/bin/<path>@<version>/<cmd>.
func BinaryPath(spec string) string {
	pkg, _, _ := strings.Cut(spec, "@")
	return filepath.Join(binDir(), filepath.FromSlash(spec), path.Base(pkg))
}

func binDir() string {
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		data = filepath.Join(os.Getenv("HOME"), ".local", "share")
	}
	return filepath.Join(data, "stalefuzz", "bin")
}

// isLocal reports whether a Go controller is a directory of the target's
// ("./dir" or "../dir": a main package, in a module of its own or in the
// module around it) rather than "module/path/cmd@version".
func isLocal(spec string) bool {
	return strings.HasPrefix(spec, "./") || strings.HasPrefix(spec, "../")
}

// binary is where Prepare caches the binary of Go controller c: BinaryPath
// for a module at a version; with patches, beside it under
// patched-<patchHash>/; for a local directory,
// $XDG_DATA_HOME/stalefuzz/bin/local/<localKey>-<sourceHash>/<dir>, so that
// an edit builds it again (and the build it replaces is removed).
func (t *Target) binary(c Controller) (string, error) {
	spec := c.Go
	patched := ""
	if len(c.Patches) > 0 {
		sum, err := t.patchHash(c.Patches)
		if err != nil {
			return "", err
		}
		patched = "patched-" + sum
	}
	if !isLocal(spec) {
		bin := BinaryPath(spec)
		if patched == "" {
			return bin, nil
		}
		return filepath.Join(filepath.Dir(bin), patched, filepath.Base(bin)), nil
	}
	dir := t.path(spec)
	sum, err := sourceHash(dir)
	if err != nil {
		return "", fmt.Errorf("unable to hash the sources of %s: %w", dir, err)
	}
	if patched != "" {
		sum += "-" + patched
	}
	base := filepath.Base(dir)
	return filepath.Join(binDir(), "local", localKey(dir)+"-"+sum, base), nil
}

// patchHash is a hash of the patches, in order: each one's module and
// contents. 16 hex digits.
func (t *Target) patchHash(patches []SourcePatch) (string, error) {
	h := sha256.New()
	for _, p := range patches {
		b, err := os.ReadFile(t.path(p.File))
		if err != nil {
			return "", fmt.Errorf("unable to read patch: %w", err)
		}
		fmt.Fprintf(h, "%s\n%d\n", p.Module, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// localKey names a local controller's directory among the cached builds:
// its base name and a hash of its absolute path. Builds of one directory
// are localKey-<source hash>; a new one replaces the others.
func localKey(dir string) string {
	abs, _ := filepath.Abs(dir)
	h := sha256.Sum256([]byte(abs))
	return filepath.Base(dir) + "-" + hex.EncodeToString(h[:4])
}

// pruneLocal removes the cached builds of dir from other sources than
// bin's: builds of the same sources with other patches, or none, stay.
func pruneLocal(dir, bin string) {
	keep := filepath.Base(filepath.Dir(bin))
	keep, _, _ = strings.Cut(keep, "-patched-")
	old, _ := filepath.Glob(filepath.Join(binDir(), "local", localKey(dir)+"-*"))
	for _, o := range old {
		if name, _, _ := strings.Cut(filepath.Base(o), "-patched-"); name != keep {
			os.RemoveAll(o)
		}
	}
}

// sourceHash is a hash of the sources a build in dir compiles from its own
// tree: the go.mod, go.sum and non-test .go files (paths and contents) of the module
// dir is in (dir's own, or the one above it) and of every module its go.mod
// replaces with a local directory, without nested modules; 16 hex digits.
// So an edit to a package the main links from its enclosing module, or
// from a module it replaces locally, builds it again.
func sourceHash(dir string) (string, error) {
	root, err := moduleRoot(dir)
	if err != nil {
		return "", err
	}
	roots := []string{root}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err == nil {
		if mf, err := modfile.ParseLax("go.mod", b, nil); err == nil {
			for _, r := range mf.Replace {
				if modfile.IsDirectoryPath(r.New.Path) {
					roots = append(roots, filepath.Join(root, filepath.FromSlash(r.New.Path)))
				}
			}
		}
	}
	h := sha256.New()
	for _, r := range roots {
		err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != r && (strings.HasPrefix(d.Name(), ".") || fileExists(filepath.Join(p, "go.mod"))) {
					return filepath.SkipDir // hidden, or a module of its own
				}
				return nil
			}
			if n := d.Name(); n != "go.mod" && n != "go.sum" && (!strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go")) {
				return nil // a test is never linked into a main
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(p), len(b))
			h.Write(b)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// moduleRoot is the directory of the go.mod nearest to dir, upwards.
func moduleRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if fileExists(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is in no Go module (no go.mod in it or above it)", dir)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Prepare builds every Go controller of t that is not cached yet and
// downloads every module its CRDs name, saying what it does on progress
// (nil: silent). Builds take minutes the first time and nothing after.
// Every build is -trimpath: the compiled packages of a module do not depend
// on the directory it was copied to, so a build with a patch recompiles
// only the packages the patch touches and those importing them (the rest
// comes from Go's build cache), and a controller's stack traces name its
// module's paths (github.com/kedacore/keda/v2/pkg/...), not a copy's. It
// refuses a target whose builtins need a binary that is not there
// (kube-controller-manager, kube-scheduler), naming the command that builds
// it.
func Prepare(ctx context.Context, t *Target, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	if err := t.builtinBinaries(); err != nil {
		return err
	}
	for i, c := range t.Controllers {
		if c.Go == "" {
			continue
		}
		bin, err := t.binary(c)
		if err != nil {
			return fmt.Errorf("target %s: controllers[%d] %s: %w", t.Name, i, c.Name, err)
		}
		if err := t.buildController(ctx, c, bin, progress); err != nil {
			return fmt.Errorf("target %s: controllers[%d] %s: %w", t.Name, i, c.Name, err)
		}
	}
	seen := map[string]bool{}
	for i, crd := range t.CRDs {
		if mod, _, ok := strings.Cut(crd, ":"); ok && !seen[mod] {
			seen[mod] = true
			fmt.Fprintf(progress, "stalefuzz: downloading %s for its CRDs\n", mod)
			if _, err := moduleDir(ctx, mod); err != nil {
				return fmt.Errorf("target %s: crds[%d]: %w", t.Name, i, err)
			}
		}
	}
	return nil
}

// buildController builds c into bin unless it is there, holding bin's
// build lock (lockBuild) from its check to its end.
func (t *Target) buildController(ctx context.Context, c Controller, bin string, progress io.Writer) error {
	if _, err := os.Stat(bin); err == nil {
		return nil
	}
	unlock, err := lockBuild(ctx, bin, c.Name, progress)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return nil // another process built it while this one waited
	}
	with := ""
	patches := make([]SourcePatch, len(c.Patches))
	for j, p := range c.Patches {
		patches[j] = SourcePatch{File: t.path(p.File), Module: p.Module}
		with += ", " + p.String()
	}
	if with != "" {
		with = " with " + with[2:]
	}
	fmt.Fprintf(progress, "stalefuzz: building controller %s from %s%s (once: cached at %s; minutes the first time)\n", c.Name, c.Go, with, bin)
	switch {
	case isLocal(c.Go):
		if err = buildLocal(ctx, t.path(c.Go), bin, patches); err == nil {
			pruneLocal(t.path(c.Go), bin)
		}
	case len(c.Patches) > 0:
		err = buildInto(bin, func(built, tmp string) error { return buildInCopy(ctx, c.Go, built, tmp, patches) })
	default:
		err = build(ctx, c.Go, bin)
	}
	if err != nil {
		return fmt.Errorf("unable to build %s: %w", c.Go, err)
	}
	return nil
}

// build installs spec into bin: go install, or, where the module's replace
// directives refuse that, go build inside a copy of the module.
func build(ctx context.Context, spec, bin string) error {
	return buildInto(bin, func(built, tmp string) error {
		install := exec.CommandContext(ctx, "go", "install", "-trimpath", spec)
		install.Env = append(goEnv(), "GOBIN="+tmp)
		out, err := install.CombinedOutput()
		if err == nil {
			return nil
		}
		if !bytes.Contains(out, []byte("replace directives")) && !bytes.Contains(out, []byte("must not contain directives")) {
			return fmt.Errorf("go install %s: %w\n%s", spec, err, out)
		}
		return buildInCopy(ctx, spec, built, tmp, nil)
	})
}

// buildInto runs make with a temporary directory beside bin and the path
// there that make must build (named as bin), then moves it to bin: a build
// that fails or is interrupted leaves no binary behind.
func buildInto(bin string, make func(built, tmp string) error) error {
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return err
	}
	removeOrphanBuilds(filepath.Dir(bin))
	tmp, err := os.MkdirTemp(filepath.Dir(bin), fmt.Sprintf(".build-%d-", os.Getpid()))
	if err != nil {
		return err
	}
	defer removeOnSignal(tmp)()
	defer os.RemoveAll(tmp)
	built := filepath.Join(tmp, filepath.Base(bin))
	if err := make(built, tmp); err != nil {
		return err
	}
	return os.Rename(built, bin)
}

// removeOnSignal removes dir if the process is told to stop (SIGTERM,
// SIGINT, as make and CI stop a test run) while a build is under way, then
// dies of the signal as it would have; the returned func ends that. A build
// copy of a module can be tens of megabytes: a stopped run leaves none.
func removeOnSignal(dir string) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			_ = os.RemoveAll(dir)
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		case <-done:
		}
	}()
	return func() { signal.Stop(sigs); close(done) }
}

// removeOrphanBuilds removes the build directories in dir of processes
// that no longer run (".build-PID-*"): a build killed outright (SIGKILL)
// can leave one.
func removeOrphanBuilds(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), ".build-")
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil {
			continue // an older layout's: its process is unknown
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// buildLocal builds the main package in dir into bin with go build, the
// go.mod and go.sum of its module as they are (no workspace). Patches
// (each to a module it requires) are applied to copies of those modules,
// replaced into a copy of the go.mod that the build reads (-modfile): the
// directory itself is not changed.
func buildLocal(ctx context.Context, dir, bin string, patches []SourcePatch) error {
	return buildInto(bin, func(built, tmp string) error {
		args := []string{"build", "-trimpath", "-o", built}
		env := append(goEnv(), "GOWORK=off")
		if len(patches) > 0 {
			root, err := moduleRoot(dir)
			if err != nil {
				return err
			}
			modfile := filepath.Join(tmp, "go.mod")
			for _, f := range []string{"go.mod", "go.sum"} {
				b, err := os.ReadFile(filepath.Join(root, f))
				if err != nil && !(f == "go.sum" && errors.Is(err, fs.ErrNotExist)) {
					return err
				}
				if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
					return err
				}
			}
			env = append(env, "GOFLAGS=-mod=mod")
			if err := replacePatched(ctx, dir, tmp, "-modfile="+modfile, env, patches); err != nil {
				return err
			}
			args = append(args, "-modfile="+modfile)
		}
		cmd := exec.CommandContext(ctx, "go", append(args, ".")...)
		cmd.Dir = dir
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build in %s: %w\n%s", dir, err, out)
		}
		return nil
	})
}

// replacePatched applies each patch with a Module to a copy (under tmp) of
// the version of that module the build in dir selects, and replaces the
// module with the copy in the build's go.mod (modfile: "" for dir's own,
// or "-modfile=PATH"). Patches without a Module are left to the caller.
func replacePatched(ctx context.Context, dir, tmp, modfile string, env []string, patches []SourcePatch) error {
	copies := map[string]string{}
	for _, p := range patches {
		if p.Module == "" {
			continue
		}
		dst, ok := copies[p.Module]
		if !ok {
			args := []string{"list", "-m", "-json"}
			if modfile != "" {
				args = append(args, modfile)
			}
			cmd := exec.CommandContext(ctx, "go", append(args, p.Module)...)
			cmd.Dir, cmd.Env = dir, env
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("patch %s: the build requires no module %s (go list -m %s): %w", p.File, p.Module, p.Module, err)
			}
			var m struct {
				Path, Version, Dir string
				Replace            *struct{ Path, Version, Dir string }
			}
			if err := json.Unmarshal(out, &m); err != nil {
				return fmt.Errorf("patch %s: go list -m %s: %w", p.File, p.Module, err)
			}
			src := m.Dir
			if m.Replace != nil {
				src = m.Replace.Dir
			}
			if src == "" {
				if src, err = moduleDir(ctx, m.Path+"@"+m.Version); err != nil {
					return fmt.Errorf("patch %s: %w", p.File, err)
				}
			}
			dst = filepath.Join(tmp, "patched", strconv.Itoa(len(copies)))
			if err := copyTree(src, dst); err != nil {
				return fmt.Errorf("patch %s: unable to copy module %s: %w", p.File, p.Module, err)
			}
			copies[p.Module] = dst
			edit := []string{"mod", "edit"}
			if modfile != "" {
				edit = append(edit, modfile)
			}
			cmd = exec.CommandContext(ctx, "go", append(edit, "-replace="+p.Module+"="+dst)...)
			cmd.Dir, cmd.Env = dir, env
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("patch %s: go mod edit -replace %s: %w\n%s", p.File, p.Module, err, out)
			}
		}
		if err := applyPatch(ctx, dst, p.File); err != nil {
			return fmt.Errorf("module %s: %w", p.Module, err)
		}
	}
	return nil
}

// buildInCopy builds spec's main package inside a writable copy of its
// module, so that the module's own go.mod (its replace directives) applies,
// after applying patches (files, in order; patch -p1) to the copy.
func buildInCopy(ctx context.Context, spec, out, tmp string, patches []SourcePatch) error {
	pkg, version, _ := strings.Cut(spec, "@")
	mod, dir := pkg, ""
	for {
		d, err := moduleDir(ctx, mod+"@"+version)
		if err == nil {
			dir = d
			break
		}
		i := strings.LastIndex(mod, "/")
		if i < 0 {
			return fmt.Errorf("no module of %s at %s found: %w", pkg, version, err)
		}
		mod = mod[:i]
	}
	src := filepath.Join(tmp, "src")
	if err := copyTree(dir, src); err != nil {
		return fmt.Errorf("unable to copy module %s: %w", mod, err)
	}
	if err := dropMissingReplaces(src); err != nil {
		return fmt.Errorf("module %s@%s: %w", mod, version, err)
	}
	for _, p := range patches {
		if p.Module != "" {
			continue
		}
		if err := applyPatch(ctx, src, p.File); err != nil {
			return fmt.Errorf("module %s@%s: %w", mod, version, err)
		}
	}
	if err := replacePatched(ctx, src, tmp, "", append(goEnv(), "GOFLAGS=-mod=mod", "GOWORK=off"), patches); err != nil {
		return err
	}
	rel := "./" + strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, rel)
	cmd.Dir = src
	cmd.Env = append(goEnv(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in a copy of %s@%s: %w\n%s", rel, mod, version, err, b)
	}
	return nil
}

// applyPatch applies the unified diff in file to the tree in dir (patch
// -p1): every hunk must apply, exactly or with an offset, and none may be
// applied already.
func applyPatch(ctx context.Context, dir, file string) error {
	cmd := exec.CommandContext(ctx, "patch", "-p1", "--batch", "--forward", "--fuzz=0", "--no-backup-if-mismatch", "-r", "-", "-i", file)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return fmt.Errorf("unable to apply patch %s: the patch command is not installed (apt-get install patch)", file)
		}
		return fmt.Errorf("patch %s does not apply (patch -p1 in the module's root): %w\n%s", file, err, out)
	}
	return nil
}

// dropMissingReplaces removes from the go.mod in dir each replace by a
// directory the module's zip does not hold: a nested module (FluxCD
// source-controller's "./api"), which module zips leave out. The version
// the go.mod requires, published from the same repository, is used instead.
func dropMissingReplaces(dir string) error {
	p := filepath.Join(dir, "go.mod")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	mf, err := modfile.Parse(p, b, nil)
	if err != nil {
		return err
	}
	dropped := false
	for _, r := range mf.Replace {
		if modfile.IsDirectoryPath(r.New.Path) && !fileExists(filepath.Join(dir, filepath.FromSlash(r.New.Path), "go.mod")) {
			if err := mf.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
			dropped = true
		}
	}
	if !dropped {
		return nil
	}
	mf.Cleanup()
	out, err := mf.Format()
	if err != nil {
		return err
	}
	return os.WriteFile(p, out, 0o644)
}

// ModuleDir downloads mod ("path@version") into the module cache, unless it
// is there, and returns its directory: where a Go scenario finds the CRDs a
// controller's module ships.
func ModuleDir(ctx context.Context, mod string) (string, error) { return moduleDir(ctx, mod) }

func moduleDir(ctx context.Context, mod string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Env = append(goEnv(), "GOFLAGS=-mod=mod", "GOWORK=off")
	cmd.Dir = os.TempDir() // outside any module, so that none's go.mod is read
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr == nil && info.Error != "" {
		return "", fmt.Errorf("unable to download module %s: %s", mod, info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("unable to download module %s: %w", mod, err)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("unable to download module %s: go mod download gave no directory", mod)
	}
	return info.Dir, nil
}

// copyTree copies the regular files of src to dst, writable (the module
// cache's are read-only).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// goEnv is the environment of the go commands that build and download a
// target's modules: this process's, with GOTOOLCHAIN=auto where it is unset
// or "local", so that a module whose go.mod asks for a newer Go (Argo
// Rollouts v1.10.2: go 1.26.10) gets that toolchain from the module proxy,
// as a plain `go install` on a developer's machine would. (go test runs its
// test binaries with GOTOOLCHAIN=local, which would refuse it.) A user's
// explicit GOTOOLCHAIN=go1.x.y is kept.
func goEnv() []string {
	env := os.Environ()
	if v := os.Getenv("GOTOOLCHAIN"); v == "" || v == "local" {
		env = append(env, "GOTOOLCHAIN=auto")
	}
	return env
}
