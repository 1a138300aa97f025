package fuzz

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSignature: executions of one bug that differ in their counts,
// indices or resourceVersions have one signature; another object, oracle
// or message has another.
func TestSignature(t *testing.T) {
	a := Violation{Oracle: "count", Subject: "RayCluster ns/r", Message: "5 live Pods (at most 3)"}
	same := Violation{Oracle: "count", Subject: "RayCluster ns/r", Message: "17 live Pods (at most 3)"}
	if Signature(a) != Signature(same) {
		t.Errorf("signatures of %q and %q differ", a.Message, same.Message)
	}
	for _, other := range []Violation{
		{Oracle: "end-state", Subject: a.Subject, Message: a.Message},
		{Oracle: a.Oracle, Subject: "RayCluster ns/s", Message: a.Message},
		{Oracle: a.Oracle, Subject: a.Subject, Message: "5 live Services (at most 3)"},
	} {
		if Signature(a) == Signature(other) {
			t.Errorf("%+v has the signature of %+v", other, a)
		}
	}
}

// TestClaimFindings: the first execution with a signature claims it, a
// later one (another worker's included: the claims are files) repeats it;
// an execution with one new violation beside a repeated one is a finding;
// past MaxSearchOnFindings nothing more is claimed.
func TestClaimFindings(t *testing.T) {
	dir := t.TempDir()
	v := func(msg string) Violation { return Violation{Oracle: "count", Subject: "s", Message: msg} }
	if n := claimFindings(dir, []Violation{v("4 Pods"), v("5 Pods")}); n != 1 {
		t.Fatalf("first execution: claimed %d signatures, want 1 (its two violations are one finding)", n)
	}
	if n := claimFindings(dir, []Violation{v("6 Pods")}); n != 0 {
		t.Errorf("the same finding again: claimed %d, want 0 (a repeat)", n)
	}
	if n := claimFindings(dir, []Violation{v("6 Pods"), {Oracle: "stuck", Message: "never converged"}}); n != 1 {
		t.Errorf("a repeat beside a new violation: claimed %d, want 1", n)
	}
	for i := 0; i < MaxSearchOnFindings; i++ {
		claimFindings(dir, []Violation{{Oracle: "end-state", Message: "field " + strings.Repeat("x", i+1)}})
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "claimed"))
	if len(ents) != MaxSearchOnFindings {
		t.Errorf("%d claims, want the bound %d", len(ents), MaxSearchOnFindings)
	}
}

// TestLoggedFindingTime: a finding's line carries when it was written, and
// a line of an older campaign directory without it still reads.
func TestLoggedFindingTime(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(campaignEnv, dir)
	before := time.Now()
	logFinding("/f/a.input", Schedule{}, &Result{Violations: []Violation{{Oracle: "count", Message: "tab\there"}}})
	f, err := os.OpenFile(filepath.Join(dir, findingsFile), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("/f/b.input\tsched\t[count] old\n")
	_ = f.Close()
	got := LoggedFindings(dir)
	if len(got) != 2 || got[0].At.Before(before.Add(-time.Second)) || time.Since(got[0].At) > time.Minute || got[0].Violation != "[count] tab here" {
		t.Fatalf("logged %+v: want a.input's with its time and the tab flattened", got)
	}
	if !got[1].At.IsZero() || got[1].Violation != "[count] old" {
		t.Errorf("a line without a time: %+v", got[1])
	}
}
