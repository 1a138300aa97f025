package fuzz

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// SearchOnEnv, set to "1" in a campaign's environment (stalefuzz fuzz
// --search-on), makes its workers search on past a finding: the first
// execution that makes a finding writes it (its trace, picture, log and
// input, and a line of findings.log with the time) and passes, so that go
// test -fuzz does not stop; a later execution whose every violation has the
// signature of one the campaign already wrote counts as a repeat
// (repeats.log), as a known finding does. What go test reports is then
// nothing: the campaign reads its findings from findings.log
// (LoggedFindings). Without it a campaign stops at its first finding, as go
// test -fuzz does, and a bug found in seconds hides every other.
const SearchOnEnv = "STALEFUZZ_SEARCH_ON"

// MaxSearchOnFindings bounds the findings one searching-on campaign
// writes: past it, an execution with a new signature counts as a repeat.
// Signatures are coarse (a name that differs run to run makes a new one);
// the bound keeps such a campaign from filling the findings directory.
const MaxSearchOnFindings = 20

// repeatsFile lists, in a campaign's directory, the executions of a
// searching-on campaign that only repeated findings it had written.
const repeatsFile = "repeats.log"

func searchingOn() bool { return os.Getenv(SearchOnEnv) == "1" }

// digitsRE are the runs of digits a signature does not tell apart: counts,
// indices, durations and resourceVersions differ between executions of one
// bug.
var digitsRE = regexp.MustCompile(`[0-9]+`)

// Signature is what a searching-on campaign tells findings apart by: the
// violation's oracle, subject and message with every run of digits the
// same ("5 live Pods" and "4 live Pods" are one finding).
func Signature(v Violation) string {
	return v.Oracle + "\x00" + v.Subject + "\x00" + digitsRE.ReplaceAllString(v.Message, "#")
}

// claimFindings claims, in the campaign's directory dir, the signatures of
// vs that no execution of the campaign (this worker's or another's) has
// claimed yet, and returns how many it claimed: 0 means every violation
// repeats a finding already written. A claim is a file created with
// O_EXCL, so that two workers never both write one finding. Past
// MaxSearchOnFindings claims, none is made.
func claimFindings(dir string, vs []Violation) int {
	claimed := filepath.Join(dir, "claimed")
	if os.MkdirAll(claimed, 0o700) != nil {
		return 1 // cannot tell: written, as without --search-on
	}
	if ents, _ := os.ReadDir(claimed); len(ents) >= MaxSearchOnFindings {
		return 0
	}
	n := 0
	var sigs []string
	for _, v := range vs {
		sigs = append(sigs, Signature(v))
	}
	slices.Sort(sigs)
	for _, sig := range slices.Compact(sigs) {
		name := fmt.Sprintf("%x", sha256.Sum256([]byte(sig)))[:16]
		f, err := os.OpenFile(filepath.Join(claimed, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			continue
		}
		_, _ = f.WriteString(strings.ReplaceAll(sig, "\x00", "\t") + "\n")
		_ = f.Close()
		n++
	}
	return n
}

// logRepeat appends an execution that only repeated written findings to
// repeats.log.
func logRepeat(scenario string, sched Schedule, res *Result) {
	appendLine(repeatsFile, fmt.Sprintf("%s: schedule %s: [%s] %s", scenario, sched, res.Violations[0].Oracle, strings.ReplaceAll(res.Violations[0].Message, "\n", " ")))
}

// Repeats counts the executions of a searching-on campaign, in its
// directory dir, that only repeated findings it had written.
func Repeats(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, repeatsFile))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}
