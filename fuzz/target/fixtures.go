package target

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/gitserver"
)

// fixtures are what setupFixtures serves for every execution of a process.
type fixtures struct {
	git map[string]string // name → clone URL
}

// checkFixtures refuses, before anything starts, a git fixture whose
// directory is missing or holds no file.
func (t *Target) checkFixtures() error {
	for i, g := range t.Fixtures.Git {
		files, err := readTree(t.path(g.Dir))
		if err != nil {
			return fmt.Errorf("target %s: fixtures.git[%d] %s: %w", t.Name, i, g.Name, err)
		}
		if len(files) == 0 {
			return fmt.Errorf("target %s: fixtures.git[%d] %s: directory %s holds no file to commit", t.Name, i, g.Name, t.path(g.Dir))
		}
	}
	return nil
}

// setupFixtures makes each git fixture a bare repository under root and
// serves them (fuzz.Scenario.Setup).
func (t *Target) setupFixtures(_ context.Context, root string) (any, func() error, error) {
	f := &fixtures{git: map[string]string{}}
	for i, g := range t.Fixtures.Git {
		files, err := readTree(t.path(g.Dir))
		if err != nil {
			return nil, nil, fmt.Errorf("target %s: fixtures.git[%d] %s: %w", t.Name, i, g.Name, err)
		}
		branch := g.Branch
		if branch == "" {
			branch = "main"
		}
		if _, err := gitserver.CreateRepository(root, g.Name, branch, files); err != nil {
			return nil, nil, fmt.Errorf("target %s: fixtures.git[%d] %s: %w", t.Name, i, g.Name, err)
		}
	}
	srv, err := gitserver.Start(root)
	if err != nil {
		return nil, nil, fmt.Errorf("target %s: fixtures.git: %w", t.Name, err)
	}
	for _, g := range t.Fixtures.Git {
		f.git[g.Name] = srv.URL(g.Name)
	}
	return f, srv.Stop, nil
}

// readTree reads the regular files under dir (hidden ones left out: a
// checkout's .git is not content), by slash-separated relative path.
func readTree(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("unable to read directory %s: %w", dir, err)
	}
	return out, nil
}

// procVars are a controller process's own ${dir} and ${port.NAME}.
type procVars struct {
	dir   string
	ports map[string]int
}

// newProcVars makes client's directory in the execution's and a free port
// for each ${port.NAME} its args and env name.
func newProcVars(x *fuzz.Exec, client string, c Controller) (*procVars, error) {
	pv := &procVars{dir: filepath.Join(x.Dir(), "proc-"+client), ports: map[string]int{}}
	if err := os.MkdirAll(pv.dir, 0o700); err != nil {
		return nil, fmt.Errorf("unable to create its directory ${dir}: %w", err)
	}
	vals := append([]string(nil), c.Args...)
	for _, v := range c.Env {
		vals = append(vals, v)
	}
	for _, v := range vals {
		for _, m := range knobRE.FindAllStringSubmatch(v, -1) {
			name, ok := strings.CutPrefix(m[1], "port.")
			if !ok || pv.ports[name] != 0 {
				continue
			}
			port, err := freePort()
			if err != nil {
				return nil, fmt.Errorf("unable to find a free port for ${%s}: %w", m[1], err)
			}
			pv.ports[name] = port
		}
	}
	return pv, nil
}

// freePort is a port of 127.0.0.1 that nothing listened on a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
