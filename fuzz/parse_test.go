package fuzz

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestParseWhatStringPrints: every schedule the decoder gives, in every
// space, is read back from its words (Schedule.String) to one that prints
// the same and encodes to an input that decodes to one that prints the
// same: a schedule copied from a report replays as it reads.
func TestParseWhatStringPrints(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, space := range []Space{LagOnly, LagAndLoss, Realistic, AnchoredLoss, RealisticLatency, OrdinaryLatency, Composed} {
		s := testScenario
		s.Space = space
		for range 3000 {
			b := make([]byte, r.IntN(40))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			sched := s.Decode(b)
			parsed, err := s.ParseSchedule(sched.String())
			if err != nil {
				t.Fatalf("%v: ParseSchedule(%q): %v", space, sched, err)
			}
			if parsed.String() != sched.String() {
				t.Fatalf("%v: %q parsed to %q", space, sched, parsed)
			}
			_, got, err := s.EncodeText(sched.String())
			if err != nil {
				t.Fatalf("%v: EncodeText(%q): %v", space, sched, err)
			}
			if got.String() != sched.String() {
				t.Fatalf("%v: %q encoded to an input of %q", space, sched, got)
			}
		}
	}
}

func TestParseShorthandAndErrors(t *testing.T) {
	s := testScenario
	s.Space = RealisticLatency
	got, err := s.ParseSchedule("at=3; latency 30ms on every watch of every client")
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != "at=3; replicas=0; t+0.00s–2.00s latency 0.030s on every watch of every client" {
		t.Errorf("got %q", got)
	}
	if _, got, err := s.EncodeText("latency 30ms on every watch of replica-1"); err != nil || got.String() != "at=0; replicas=0; t+0.00s–2.00s latency 0.026s on every watch of replica-1" {
		t.Errorf("latency in RealisticLatency: %v, %q: want the nearest delay the layout holds, 26 ms", err, got)
	}
	s.Space = Realistic
	if _, _, err := s.EncodeText("latency 30ms on every watch of replica-1"); err == nil || !strings.Contains(err.Error(), "cannot hold step 1") {
		t.Errorf("latency in Realistic: got %v, want an error naming the step", err)
	}
	for text, want := range map[string]string{
		"nope=1":                             `no knob "nope"`,
		"at=9":                               "knob at has values 0 to 4",
		"latency 30ms on every watch of bob": `client "bob": not one of the scenario's clients (replica-0, replica-1)`,
		"hold pods for replica-0":            `resource "pods"`,
		"wiggle the apiserver":               "not a step",
		"t+2-1s hold rollouts for replica-0": "want t+A–Bs with A <= B",
	} {
		if _, err := s.ParseSchedule(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSchedule(%q): got %v, want an error with %q", text, err, want)
		}
	}
}
