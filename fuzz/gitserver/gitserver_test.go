package gitserver_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz/gitserver"
)

func TestCloneOverSmartHTTP(t *testing.T) {
	root := t.TempDir()
	rev, err := gitserver.CreateRepository(root, "podinfo", "master", map[string]string{"README.md": "hello\n"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := gitserver.Start(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	out, err := exec.Command("git", "ls-remote", s.URL("podinfo"), "refs/heads/master").CombinedOutput()
	if err != nil {
		t.Fatalf("ls-remote %s: %v: %s", s.URL("podinfo"), err, out)
	}
	if !strings.HasPrefix(string(out), rev) {
		t.Errorf("ls-remote says %q, want master at %s", out, rev)
	}
	dst := t.TempDir()
	if out, err := exec.Command("git", "clone", "-q", s.URL("podinfo"), dst+"/c").CombinedOutput(); err != nil {
		t.Fatalf("clone: %v: %s", err, out)
	}
}
