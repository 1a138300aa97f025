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
// --search-on), makes its workers search on past a finding: an execution
// that makes a finding writes it (its trace, picture, log and input, and a
// line of findings.log with the time) and passes, so that go test -fuzz
// does not stop. The first SearchOnKeep executions of each Signature are
// written, so that a look-alike with another cause can be told apart in
// their traces; a later execution whose every violation has a Signature
// written that often counts as a repeat (repeats.log), as a known finding
// does. What go test reports is then nothing: the campaign reads its
// findings from findings.log (LoggedFindings). Without it a campaign stops
// at its first finding, as go test -fuzz does, and a bug found in seconds
// hides every other.
const SearchOnEnv = "STALEFUZZ_SEARCH_ON"

// SearchOnKeep is how many executions of one Signature a searching-on
// campaign writes as findings.
const SearchOnKeep = 3

// MaxSearchOnFindings bounds the findings one searching-on campaign
// writes: past it, an execution with a new signature counts as a repeat.
const MaxSearchOnFindings = 30

// repeatsFile lists, in a campaign's directory, the executions of a
// searching-on campaign that only repeated findings it had written.
const repeatsFile = "repeats.log"

func searchingOn() bool { return os.Getenv(SearchOnEnv) == "1" }

var (
	// generatedRE are the suffixes generateName (and a client choosing a
	// random name itself) gives names: "-" and five characters of
	// randomAlphabet.
	generatedRE = regexp.MustCompile(`-[` + randomAlphabet + `]{5}\b`)
	// digitsRE are the runs of digits a signature does not tell apart:
	// counts, indices, durations, namespaces and resourceVersions differ
	// between executions of one bug.
	digitsRE = regexp.MustCompile(`[0-9]+`)
	// listRE is a list of two or more alike items ("leaf-#, leaf-#,
	// leaf-#"), whose length differs between executions of one bug.
	listRE = regexp.MustCompile(`[^,;:()]+(?:, ?[^,;:()]+)+`)
)

// Signature is what a searching-on campaign tells findings apart by: the
// violation's oracle, subject and message, with generated name suffixes,
// runs of digits and lists of alike items made the same ("3 live Secrets
// (leaf-8cffw, leaf-q97f7, leaf-2fxrk)" and "2 live Secrets (leaf-vcdwk,
// leaf-zgvkq)" are one finding).
func Signature(v Violation) string {
	norm := func(s string) string {
		s = digitsRE.ReplaceAllString(generatedRE.ReplaceAllString(s, "-*"), "#")
		return listRE.ReplaceAllStringFunc(s, func(list string) string {
			items := strings.Split(list, ",")
			for _, it := range items[1:] {
				if strings.TrimSpace(it) != strings.TrimSpace(items[0]) {
					return list
				}
			}
			return strings.TrimSpace(items[0]) + "…"
		})
	}
	return v.Oracle + "\x00" + norm(v.Subject) + "\x00" + norm(v.Message)
}

// claimFindings claims, in the campaign's directory dir, the signatures of
// vs that executions of the campaign (this worker's or others') have
// claimed fewer than SearchOnKeep times, and returns how many it claimed:
// 0 means every violation repeats a finding already written that often. A
// claim is a file created with O_EXCL, so that two workers never take one
// claim. Past MaxSearchOnFindings claims, none is made.
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
		for k := 1; k <= SearchOnKeep; k++ {
			f, err := os.OpenFile(filepath.Join(claimed, fmt.Sprintf("%s-%d", name, k)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				continue
			}
			_, _ = f.WriteString(strings.ReplaceAll(sig, "\x00", "\t") + "\n")
			_ = f.Close()
			n++
			break
		}
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
