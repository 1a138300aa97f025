package certmanager_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/scenarios/internal/suite"
)

// FuzzCertManager searches faults a real cluster produces for the
// controller, as `stalefuzz fuzz target.yaml` does.
func FuzzCertManager(f *testing.F) { target.Fuzz(f, "target.yaml") }

// env starts an Env for tg, stopped when the test ends, building the
// controller first if it is not cached.
func env(t *testing.T) (*target.Target, *fuzz.Env) {
	t.Helper()
	return target.LoadEnv(t, "target.yaml")
}

// twoKeysInput starts an Env (env) and reads finding 1's saved input, the
// campaign's restart onto a lagging apiserver.
func twoKeysInput(t *testing.T) (*fuzz.Env, fuzz.Schedule) {
	t.Helper()
	tg, e := env(t)
	sched, err := tg.Input("testdata/two-keys.input")
	if err != nil {
		t.Fatal(err)
	}
	return e, sched
}

// writes counts the successful creates and deletes per resource.
func writes(res *fuzz.Result) map[string]int {
	n := map[string]int{}
	for _, r := range res.Trace.Requests {
		if r.DryRun || r.Subresource != "" || r.Code/100 != 2 {
			continue
		}
		if r.Verb == "create" || r.Verb == "delete" {
			n[r.Verb+" "+r.Resource]++
		}
	}
	return n
}

// summary is what one run did, then res.Report.
func summary(sched fuzz.Schedule, res *fuzz.Result) string {
	return fmt.Sprintf("schedule %s: settled %v, phases %s; writes %v\n%s", sched, res.Settled, res.Phases, writes(res), res.Report())
}

// known reports whether v is one of the two findings (README.md), which
// need no fault: finding 1 needs a sibling's status write to win the race
// for the Certificate and the first key's event to come after the retry
// (CI's fresh-clone run on 2026-11-26 had it in a no-fault run), finding 2
// two watches out of order (once in 270 campaign executions).
func known(v fuzz.Violation) bool {
	if v.Oracle != "count" {
		return false
	}
	return strings.Contains(v.Message, "live Secrets at once") || strings.Contains(v.Message, "live CertificateRequests at once")
}

// TestCertManager runs the controller without faults in the default gates:
// the knobs' first values (both Certificates issued: a CertificateRequest
// each), a renewal (a second request for the leaf), and all three actions
// (a dnsNames edit during the leaf's issuance, a renewal and a deleted
// Secret), with no violation but the two findings, which a no-fault run
// can have (they are logged).
func TestCertManager(t *testing.T) {
	_, e := env(t)
	for _, c := range []struct {
		name     string
		knobs    map[string]int
		requests int // at least
	}{
		{"issuance", map[string]int{"gates": 0, "edit": 0, "renew": 0, "victim": 0}, 2},
		{"cmctl renew", map[string]int{"gates": 0, "edit": 0, "renew": 1, "victim": 0}, 3},
		{"edit, renew, delete", map[string]int{"gates": 0, "edit": 1, "renew": 1, "victim": 1}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: c.knobs}
			res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			var other []fuzz.Violation
			for _, v := range res.Violations {
				if known(v) {
					t.Logf("schedule %s: a finding with no fault: %s", sched, v.Message)
					continue
				}
				other = append(other, v)
			}
			if n := writes(res)["create certificaterequests"]; n < c.requests || len(other) > 0 {
				t.Errorf("schedule %s: %d CertificateRequests created, violations %v; want at least %d and none but the findings\n%s", sched, n, other, c.requests, summary(sched, res))
			}
		})
	}
}

// twoKeys reports whether res saw two live next private key Secrets for
// one Certificate (the count oracle on Secrets).
func twoKeys(res *fuzz.Result) bool {
	for _, v := range res.Violations {
		if v.Oracle == "count" && strings.Contains(v.Message, "live Secrets at once") && strings.Contains(v.Message, "never had more than 1 per Certificate") {
			return true
		}
	}
	return false
}

// slowSecrets is the knobs' first values (default gates, no edit, no
// renewal, the spare Secret deleted) with every Secrets event of the
// controller's watches delivered d late for 2 s.
func slowSecrets(gates int, d time.Duration) fuzz.Schedule {
	return fuzz.Schedule{Knobs: map[string]int{"gates": gates, "edit": 0, "renew": 0, "victim": 0},
		Steps: []fuzz.Step{{Client: "certmanager", Resource: "secrets", Length: 2 * time.Second, Action: proxy.Delay, Delay: d}}}
}

// TestCertManagerTwoKeys is the finding's regression row: the key manager
// creates a second next private key Secret for one Certificate when its
// status write naming the first one meets a 409 and the first Secret's
// event has not reached its cache by the retry (README.md). From the
// campaign's input (a restart onto a lagging apiserver; 10 to 17 in 20
// runs, 16/20 on 2026-11-27 both idle and beside hack/loaded.sh 2) and from
// Secrets events 100 ms late alone (14/20), each given up to eight runs
// (CI's fresh machine once had the input 0 in 3); its control: with
// ServerSideApply=true the status apply does not conflict, and the same
// slow watch makes none (0/20).
func TestCertManagerTwoKeys(t *testing.T) {
	e, input := twoKeysInput(t)
	for _, c := range []struct {
		name  string
		sched fuzz.Schedule
		want  bool
		tries int
	}{
		{"campaign input", input, true, 8},
		{"Secrets events 100 ms late", slowSecrets(0, 100*time.Millisecond), true, 8},
		{"Secrets events 100 ms late, ServerSideApply=true", slowSecrets(2, 100*time.Millisecond), false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, runs, err := e.RunUntil(context.Background(), c.sched, c.tries, twoKeys, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", c.sched, err)
			}
			if got := twoKeys(res); got != c.want {
				t.Errorf("schedule %s: two next private keys %v in %d runs, want %v\n%s", c.sched, got, runs, c.want, summary(c.sched, res))
			}
		})
	}
}

// reissued lists the CertificateRequests created for a revision after the
// first ("ca-2", "leaf-3"): with no edit, renewal or deleted Secret, each
// is an issuance nobody asked for.
func reissued(res *fuzz.Result) []string {
	var out []string
	for _, r := range res.Trace.Requests {
		if r.Resource == "certificaterequests" && r.Verb == "create" && r.Code == 201 && r.Subresource == "" && !strings.HasSuffix(r.Name, "-1") {
			out = append(out, r.Name)
		}
	}
	return out
}

// TestCertManagerReissue is the second finding's regression row: with
// every Secrets event 100 ms late and nothing else, the trigger controller
// reads the Secret the issuing controller has just written from a cache
// that does not have it yet ("Issuing certificate as Secret does not
// exist"), or has the previous revision's ("Secret contains a private key
// that does not match the current CertificateRequest"), and starts another
// issuance: each Certificate is issued again and again while the lag lasts
// (5/5 runs in each gates value, TestCertManagerTruthTable). Its control:
// no fault, one issuance each, in one of up to three runs (finding 2 needs
// no fault, only two watches out of order: once in 270 campaign
// executions).
func TestCertManagerReissue(t *testing.T) {
	_, e := env(t)
	none := map[string]int{"gates": 0, "edit": 0, "renew": 0, "victim": 0}
	for _, c := range []struct {
		name  string
		sched fuzz.Schedule
		want  bool
		tries int
	}{
		{"Secrets events 100 ms late", slowSecrets(0, 100*time.Millisecond), true, 1},
		{"Secrets events 100 ms late, ServerSideApply=true", slowSecrets(2, 100*time.Millisecond), true, 1},
		{"no fault", fuzz.Schedule{Knobs: none}, false, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			counted := func(res *fuzz.Result) bool {
				for _, v := range res.Violations {
					if v.Oracle == "count" && strings.Contains(v.Message, "live CertificateRequests at once") {
						return true
					}
				}
				return false
			}
			as := func(res *fuzz.Result) bool { return len(reissued(res)) > 0 == c.want && counted(res) == c.want }
			res, runs, err := e.RunUntil(context.Background(), c.sched, c.tries, as, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", c.sched, err)
			}
			if !as(res) {
				t.Errorf("schedule %s: issued again %v (count oracle: %v) in the last of %d runs, want %v\n%s", c.sched, reissued(res), counted(res), runs, c.want, summary(c.sched, res))
			}
		})
	}
}

// TestCertManagerTwoKeysRate measures how often two next private keys
// appear, from the saved input per knob "gates" value and under a slow
// Secrets watch alone (STALEFUZZ_RATE=N runs of each).
func TestCertManagerTwoKeysRate(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STALEFUZZ_RATE"))
	if n == 0 {
		t.Skip("STALEFUZZ_RATE=N runs it")
	}
	e, input := twoKeysInput(t)
	withGates := func(gates int) fuzz.Schedule {
		sched := fuzz.Schedule{Knobs: maps.Clone(input.Knobs), Steps: input.Steps}
		sched.Knobs["gates"] = gates
		return sched
	}
	slow := slowSecrets
	for _, c := range []struct {
		name  string
		sched fuzz.Schedule
	}{
		{"input, default gates", withGates(0)},
		{"input, StableCertificateRequestName=false", withGates(1)},
		{"input, ServerSideApply=true", withGates(2)},
		{"Secrets events 300 ms late, default gates", slow(0, 300*time.Millisecond)},
		{"Secrets events 100 ms late, default gates", slow(0, 100*time.Millisecond)},
		{"Secrets events 300 ms late, ServerSideApply=true", slow(2, 300*time.Millisecond)},
		{"no fault, default gates", fuzz.Schedule{Knobs: map[string]int{"gates": 0, "edit": 0, "renew": 0, "victim": 0}}},
	} {
		hits := 0
		for range n {
			res, err := e.Run(context.Background(), c.sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", c.sched, err)
			}
			if twoKeys(res) {
				hits++
			}
		}
		t.Logf("%s: two next private keys in %d/%d runs", c.name, hits, n)
	}
}

// TestFalseAlarms: executions whose events are only delayed as much as the
// apiserver delayed them in the no-fault reference runs raise no violation
// of the count, lost-update or crash oracle but the two known findings
// (oracles.known), which such a delay brings out and which it counts apart
// (README, False alarms: none in 100, 47 with only finding 1, one of them
// with finding 2 too). It runs only with
// STALEFUZZ_FALSE_ALARMS=N (make false-alarms-targets: 200): each knob
// setting's two reference runs and N executions take minutes.
func TestFalseAlarms(t *testing.T) {
	target.CheckFalseAlarms(t, "target.yaml", 0)
}

// TestCertManagerTruthTable prints, per workload pattern and gates value,
// what each fault makes (the violations by oracle and kind) in
// STALEFUZZ_RATE=N runs: no fault, Secrets events 100 ms late, and the
// campaign input's restart onto an apiserver 0.3 s behind.
// STALEFUZZ_PATTERN=SUBSTRING runs only the patterns whose name has it.
func TestCertManagerTruthTable(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STALEFUZZ_RATE"))
	if n == 0 {
		t.Skip("STALEFUZZ_RATE=N runs it")
	}
	e, input := twoKeysInput(t)
	patterns := []struct {
		name  string
		knobs map[string]int
	}{
		{"issuance", map[string]int{"edit": 0, "renew": 0, "victim": 0}},
		{"dnsNames edit during issuance", map[string]int{"edit": 1, "renew": 0, "victim": 0}},
		{"cmctl renew", map[string]int{"edit": 0, "renew": 1, "victim": 0}},
		{"leaf Secret deleted", map[string]int{"edit": 0, "renew": 0, "victim": 1}},
	}
	faults := []struct {
		name  string
		steps []fuzz.Step
	}{
		{"no fault", nil},
		{"Secrets 100 ms late", slowSecrets(0, 100*time.Millisecond).Steps},
		{"restart, 0.3 s behind", input.Steps},
	}
	for _, p := range patterns {
		if !strings.Contains(p.name, os.Getenv("STALEFUZZ_PATTERN")) {
			continue
		}
		for g := range 3 {
			for _, f := range faults {
				knobs := map[string]int{"gates": g}
				for k, v := range p.knobs {
					knobs[k] = v
				}
				sched := fuzz.Schedule{Knobs: knobs, Steps: f.steps}
				seen := map[string]int{}
				for range n {
					res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
					if err != nil {
						t.Fatalf("schedule %s: %v", sched, err)
					}
					kinds := map[string]bool{}
					for _, v := range res.Violations {
						k := v.Oracle
						for _, kind := range []string{"Secrets", "CertificateRequests"} {
							if strings.Contains(v.Message, "live "+kind) {
								k += " " + kind
							}
						}
						kinds[k] = true
					}
					for k := range kinds {
						seen[k]++
					}
				}
				t.Logf("%s | gates=%d | %s | %v in %d runs", p.name, g, f.name, seen, n)
			}
		}
	}
}

// unrecordedKey reports whether the run took finding 1's path to its end:
// the key manager created a next private key Secret (generateName: the
// Certificate's name and a 5-character suffix, answered 201), its status
// write of that Certificate then met a 409, so that nothing but the
// Secret itself recorded the key, and the controller read that
// Certificate from the apiserver again (the key manager's live read before
// it makes a key) before the Secret's ADDED event reached it: a retry that
// could not see the first key in its cache. The release makes a second key
// in such a run.
func unrecordedKey(res *fuzz.Result) bool {
	type key struct {
		secret         string
		created, at409 time.Time
	}
	keys := map[string]*key{} // by Certificate name: its first key
	for _, r := range res.Trace.Requests {
		if r.Client != "certmanager" || r.DryRun {
			continue
		}
		switch {
		case r.Resource == "secrets" && r.Verb == "create" && r.Code == 201 && len(r.Name) > 6 && r.Name[len(r.Name)-6] == '-':
			if crt := r.Name[:len(r.Name)-6]; keys[crt] == nil {
				keys[crt] = &key{secret: r.Name, created: r.Start}
			}
		case r.Resource == "certificates" && r.Subresource == "status" && r.Verb == "update" && r.Code == 409:
			if k := keys[r.Name]; k != nil && k.at409.IsZero() && r.Start.After(k.created) {
				k.at409 = r.Start
			}
		}
	}
	seen := func(k *key) time.Time { // when the key's ADDED event reached the controller
		for _, ev := range res.Trace.Events {
			if ev.Client == "certmanager" && ev.Resource == "secrets" && ev.Type == "ADDED" && ev.Name == k.secret {
				if !ev.Released.IsZero() {
					return ev.Released
				}
				return ev.Arrived
			}
		}
		return time.Time{}
	}
	for crt, k := range keys {
		if k.at409.IsZero() {
			continue
		}
		by := seen(k)
		for _, r := range res.Trace.Requests {
			if r.Client == "certmanager" && r.Resource == "certificates" && r.Subresource == "" && r.Verb == "get" && r.Name == crt &&
				r.Start.After(k.at409) && (by.IsZero() || r.Start.Before(by)) {
				return true
			}
		}
	}
	return false
}

// TestCertManagerTwoKeysFixed verifies the suggested fix for finding 1
// (fix/adopt-unrecorded-key.patch: when the Certificate's status names no
// next private key, the key manager looks for a Secret it owns in the
// apiserver before generating another) against the real apiserver: the
// controller built with cert-manager v1.21.2 patched, each of finding 1's
// schedules run until a run takes the finding's path (a key created, then
// a 409 on the status write that records it), and that run must end with
// one next private key per Certificate. Up to 8 runs each; a schedule none
// of whose runs took the path is skipped, saying so.
//
// It builds the patched controller: make test-volume runs it, make test
// does not (suite.VolumeOnly).
func TestCertManagerTwoKeysFixed(t *testing.T) {
	suite.VolumeOnly(t, "the fix's control (the controller built with its patch of fix/)")
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tg.Controllers[0].Patches = append(tg.Controllers[0].Patches, target.SourcePatch{File: "fix/adopt-unrecorded-key.patch", Module: "github.com/cert-manager/cert-manager"})
	e := target.StartEnv(t, tg)
	input, err := tg.Input("testdata/two-keys.input")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		sched fuzz.Schedule
	}{
		{"campaign input", input},
		{"Secrets events 100 ms late", slowSecrets(0, 100*time.Millisecond)},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, runs, err := e.RunUntil(context.Background(), c.sched, 8, unrecordedKey, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", c.sched, err)
			}
			if !unrecordedKey(res) {
				t.Skipf("schedule %s: in none of %d runs did the key manager's status write meet a 409 after its key's create: nothing to judge the fix by\n%s", c.sched, runs, summary(c.sched, res))
			}
			if twoKeys(res) {
				t.Errorf("schedule %s: with the fix, two next private keys for one Certificate\n%s", c.sched, summary(c.sched, res))
			}
		})
	}
}

// TestCertManagerReissueFixed verifies the fix for finding 2
// (fix/recheck-live-secret.patch: before it sets Issuing, the trigger
// controller evaluates its policies again on the Secret read from the
// apiserver) against the real apiserver: with every Secrets event 100 ms
// late, the release issues each Certificate again in 20 of 20 runs; with
// the fix, no Certificate is issued twice in either of two runs.
//
// It builds the patched controller: make test-volume runs it, make test
// does not (suite.VolumeOnly).
func TestCertManagerReissueFixed(t *testing.T) {
	suite.VolumeOnly(t, "the fix's control (the controller built with its patch of fix/)")
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tg.Controllers[0].Patches = append(tg.Controllers[0].Patches, target.SourcePatch{File: "fix/recheck-live-secret.patch", Module: "github.com/cert-manager/cert-manager"})
	e := target.StartEnv(t, tg)
	sched := slowSecrets(0, 100*time.Millisecond)
	for i := range 2 {
		res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
		if err != nil {
			t.Fatalf("schedule %s: %v", sched, err)
		}
		if again := reissued(res); len(again) > 0 {
			t.Errorf("schedule %s, run %d: with the fix, issued again: %v\n%s", sched, i+1, again, summary(sched, res))
		}
		for _, v := range res.Violations {
			if v.Oracle == "count" && strings.Contains(v.Message, "live CertificateRequests at once") {
				t.Errorf("schedule %s, run %d: with the fix: [%s] %s", sched, i+1, v.Oracle, v.Message)
			}
		}
	}
}
