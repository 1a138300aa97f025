package target

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCommittedTargetFilesLoad: every target file committed under
// scenarios/ loads (parsed, checked, its paths resolved), so that one no
// test runs, such as a recall target a campaign uses, cannot rot unseen.
func TestCommittedTargetFilesLoad(t *testing.T) {
	files, _ := filepath.Glob("../../scenarios/*/target.yaml")
	more, _ := filepath.Glob("../../scenarios/*/targets/*.yaml")
	n := 0
	for _, f := range append(files, more...) {
		if strings.HasPrefix(filepath.Base(f), ".") {
			continue // a gitignored working copy (.stalefuzz-composed-*)
		}
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		n++
	}
	if n < 20 {
		t.Fatalf("loaded %d committed target files, want the 20 or more there are", n)
	}
}
