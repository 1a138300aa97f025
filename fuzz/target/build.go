package target

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// BinaryPath is where Prepare caches the binary of a Go controller,
// "module/path/cmd@version": $XDG_DATA_HOME/stalefuzz/bin/<path>@<version>/<cmd>.
func BinaryPath(spec string) string {
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		data = filepath.Join(os.Getenv("HOME"), ".local", "share")
	}
	pkg, _, _ := strings.Cut(spec, "@")
	return filepath.Join(data, "stalefuzz", "bin", filepath.FromSlash(spec), path.Base(pkg))
}

// Prepare builds every Go controller of t that is not cached yet and
// downloads every module its CRDs name, saying what it does on progress
// (nil: silent). Builds take minutes the first time and nothing after.
func Prepare(ctx context.Context, t *Target, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	for i, c := range t.Controllers {
		if c.Go == "" {
			continue
		}
		bin := BinaryPath(c.Go)
		if _, err := os.Stat(bin); err == nil {
			continue
		}
		fmt.Fprintf(progress, "stalefuzz: building controller %s from %s (once: cached at %s; minutes the first time)\n", c.Name, c.Go, bin)
		if err := build(ctx, c.Go, bin); err != nil {
			return fmt.Errorf("target %s: controllers[%d] %s: unable to build %s: %w", t.Name, i, c.Name, c.Go, err)
		}
	}
	for i, crd := range t.CRDs {
		if mod, _, ok := strings.Cut(crd, ":"); ok {
			fmt.Fprintf(progress, "stalefuzz: downloading %s for its CRDs\n", mod)
			if _, err := moduleDir(ctx, mod); err != nil {
				return fmt.Errorf("target %s: crds[%d]: %w", t.Name, i, err)
			}
		}
	}
	return nil
}

// build installs spec into bin: go install, or, where the module's replace
// directives refuse that, go build inside a copy of the module.
func build(ctx context.Context, spec, bin string) error {
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(bin), ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	install := exec.CommandContext(ctx, "go", "install", spec)
	install.Env = append(os.Environ(), "GOBIN="+tmp)
	out, err := install.CombinedOutput()
	built := filepath.Join(tmp, filepath.Base(bin))
	if err != nil {
		if !bytes.Contains(out, []byte("replace directives")) && !bytes.Contains(out, []byte("must not contain directives")) {
			return fmt.Errorf("go install %s: %w\n%s", spec, err, out)
		}
		if err := buildInCopy(ctx, spec, built, tmp); err != nil {
			return err
		}
	}
	return os.Rename(built, bin)
}

// buildInCopy builds spec's main package inside a writable copy of its
// module, so that the module's own go.mod (its replace directives) applies.
func buildInCopy(ctx context.Context, spec, out, tmp string) error {
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
	rel := "./" + strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, rel)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in a copy of %s@%s: %w\n%s", rel, mod, version, err, b)
	}
	return nil
}

// moduleDir downloads mod ("path@version") into the module cache and
// returns its directory.
func moduleDir(ctx context.Context, mod string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
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
