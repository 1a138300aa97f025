package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// TestTruthTableCommand makes the Python example's truth table against the
// real apiserver, once a cell, at its first two knob settings (mode
// optimistic and blind): no pattern loses the user's edit with the
// optimistic writes; a restart onto an apiserver that has not seen the
// controller's write loses it with the blind ones (lost-edit.input's
// finding), which no cluster on 1.37's defaults does.
func TestTruthTableCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "truth-table.md")
	findings := t.TempDir()
	var stdout, stderr bytes.Buffer
	status := run([]string{"truth-table", pymirror + "target.yaml", "--runs", "1", "--settings", "2", "--out", out, "--findings", findings}, &stdout, &stderr)
	if status != exitClean || !strings.Contains(stdout.String(), "result: the truth table of "+pymirror+"target.yaml") {
		t.Fatalf("exit %d, want %d; output:\n%s\n%s", status, exitClean, stdout.String(), lastLines(stderr.String(), 40))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	// pattern → its cells: on 1.37's defaults, optimistic, blind.
	rows := map[string][]string{}
	for _, l := range strings.Split(md, "\n") {
		if cells := strings.Split(strings.Trim(l, "| "), " | "); strings.HasPrefix(l, "| ") && len(cells) == 4 {
			rows[cells[0]] = cells[1:]
		}
	}
	if h := rows["pattern"]; len(h) != 3 || h[1] != "defaults" || h[2] != "mode=blind" {
		t.Errorf("header %q: want the two settings named by the target file's values", h)
	}
	if r := rows["no lag"]; len(r) != 3 || r[1] != "— 1/1" || r[2] != "— 1/1" {
		t.Errorf("no-fault row %q: want clean at both settings", r)
	}
	lost := 0
	for p, r := range rows {
		if strings.Contains(r[1], "lost-update") {
			t.Errorf("%s: %q with the optimistic writes", p, r[1])
		}
		if !strings.Contains(p, "restart mirror") || !strings.Contains(p, "has not seen that write") {
			continue
		}
		if r[0] != "only without WatchList" {
			t.Errorf("%s: %q, want it labelled as needing a cluster without WatchList", p, r[0])
		}
		if r[2] == "**lost-update 1/1**" {
			lost++
		}
	}
	if lost == 0 {
		t.Errorf("no restart onto a lagging apiserver lost the edit with the blind writes:\n%s", md)
	}
	// Each cell with a violation is kept as an input, and the table says
	// how to replay it.
	m := regexp.MustCompile("(?m)^- (.*has not seen that write.*) \\| mode=blind: \\*\\*lost-update 1/1\\*\\*\n  `stalefuzz replay \\S+ (\\S+\\.input) --count 20`$").FindStringSubmatch(md)
	if m == nil {
		t.Fatalf("no replay command for the blind mode's lost edit:\n%s", md)
	}
	if o := fuzz.InputOrigin(m[2]); o != "stalefuzz truth-table: "+m[1]+" | mode=blind" {
		t.Errorf("origin of %s: %q", m[2], o)
	}
}
