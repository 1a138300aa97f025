package gitserver

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Server serves every bare repository under its root directory.
type Server struct {
	root string
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// Start serves the bare repositories under root.
func Start(root string) (*Server, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("gitserver: git is required (apt-get install git): %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gitserver: unable to listen: %w", err)
	}
	s := &Server{root: root, ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{Handler: &cgi.Handler{
		Path: git,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL returns the clone URL of the repository named name (without ".git").
func (s *Server) URL(name string) string {
	return fmt.Sprintf("http://%s/%s.git", s.ln.Addr(), name)
}

// Stop closes the server and waits for it.
func (s *Server) Stop() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// CreateRepository makes a bare repository root/name.git whose branch has one
// commit with the given files, and returns the commit's hash.
func CreateRepository(root, name, branch string, files map[string]string) (string, error) {
	work, err := os.MkdirTemp("", "gitserver-work-")
	if err != nil {
		return "", fmt.Errorf("gitserver: unable to create work tree: %w", err)
	}
	defer os.RemoveAll(work)
	for path, content := range files {
		p := filepath.Join(work, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return "", fmt.Errorf("gitserver: unable to write %s: %w", path, err)
		}
	}
	bare := filepath.Join(root, name+".git")
	env := []string{"GIT_AUTHOR_NAME=stalefuzz", "GIT_AUTHOR_EMAIL=stalefuzz@example.com",
		"GIT_COMMITTER_NAME=stalefuzz", "GIT_COMMITTER_EMAIL=stalefuzz@example.com",
		"GIT_CONFIG_NOSYSTEM=1", "HOME=" + work}
	steps := [][]string{
		{"-C", work, "init", "-q", "-b", branch},
		{"-C", work, "add", "-A"},
		{"-C", work, "commit", "-q", "-m", "stalefuzz fixture"},
		{"clone", "-q", "--bare", work, bare},
		{"-C", bare, "update-server-info"},
	}
	for _, args := range steps {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("gitserver: git %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	out, err := exec.Command("git", "-C", bare, "rev-parse", branch).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("gitserver: unable to read %s of %s: %w", branch, name, err)
	}
	return strings.TrimSpace(string(out)), nil
}
