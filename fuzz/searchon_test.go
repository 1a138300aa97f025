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
	for _, same := range []Violation{
		{Oracle: "count", Subject: "RayCluster ns/r", Message: "17 live Pods (at most 3)"},
		{Oracle: "count", Subject: "RayCluster ns/r", Message: "5 live Pods (at most 3)"},
	} {
		if Signature(a) != Signature(same) {
			t.Errorf("signatures of %q and %q differ", a.Message, same.Message)
		}
	}
	// cert-manager's finding in two executions: another namespace, other
	// generated names, another count.
	b := Violation{Oracle: "count", Subject: "Certificate certmanager-16952-13/leaf", Message: "Certificate leaf (namespace certmanager-16952-13) had 2 live Secrets at once at t+0.41s (resourceVersion 1458: leaf-8cffw, leaf-q97f7); the no-fault reference runs never had more than 1 per Certificate"}
	c := Violation{Oracle: "count", Subject: "Certificate certmanager-16952-20/leaf", Message: "Certificate leaf (namespace certmanager-16952-20) had 3 live Secrets at once at t+0.74s (resourceVersion 2221: leaf-2fxrk, leaf-8ln5t, leaf-hdz6h); the no-fault reference runs never had more than 1 per Certificate"}
	if Signature(b) != Signature(c) {
		t.Errorf("one finding, two signatures:\n%q\n%q", Signature(b), Signature(c))
	}
	// Not alike: names that are not generated, a list of other items.
	d := Violation{Oracle: "end-state", Message: "Job work-a: status.x (reference runs: a, b)"}
	e := Violation{Oracle: "end-state", Message: "Job work-b: status.x (reference runs: a, c)"}
	if Signature(d) == Signature(e) {
		t.Errorf("%q and %q have one signature", d.Message, e.Message)
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

// TestClaimFindings: the first SearchOnKeep executions with a signature
// claim it, a later one (another worker's included: the claims are files)
// repeats it; an execution with one new violation beside a repeated one is
// a finding; past MaxSearchOnFindings nothing more is claimed.
func TestClaimFindings(t *testing.T) {
	dir := t.TempDir()
	v := func(msg string) Violation { return Violation{Oracle: "count", Subject: "s", Message: msg} }
	if n := claimFindings(dir, []Violation{v("4 Pods"), v("5 Pods")}); n != 1 {
		t.Fatalf("first execution: claimed %d signatures, want 1 (its two violations are one finding)", n)
	}
	for i := 2; i <= SearchOnKeep; i++ {
		if n := claimFindings(dir, []Violation{v("6 Pods")}); n != 1 {
			t.Fatalf("execution %d of the finding: claimed %d, want 1 (written: one of the first %d)", i, n, SearchOnKeep)
		}
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
	if len(ents) != MaxSearchOnFindings || MaxSearchOnFindings < SearchOnKeep+2 {
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
