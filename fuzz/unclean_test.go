package fuzz

import (
	"errors"
	"strings"
	"testing"
)

// TestUncleanReferenceSaysWhy: a no-fault reference run that cannot teach
// the learned oracles is named with its reason, which the campaign's log
// prints beside "not clean" (a user otherwise sees the end-state oracle off
// and cannot tell a crash from a run that never settled).
func TestUncleanReferenceSaysWhy(t *testing.T) {
	crash := &Result{Violations: []Violation{{Oracle: "crash", Message: "controller keda exited on its own\npanic: nil pointer"}}, Settled: true}
	for _, tc := range []struct {
		name      string
		res       *Result
		err       error
		counts    int
		endStates int
		want      string
	}{
		{"clean", &Result{Settled: true, ends: []endObjects{{}}}, nil, 0, 1, ""},
		{"harness error", nil, errors.New("the apiserver went away"), 0, 1, "a harness error: the apiserver went away"},
		{"violation", crash, nil, 0, 0, "a violation, [crash] controller keda exited on its own panic: nil pointer"},
		{"never settled", &Result{}, nil, 0, 1, "never settled"},
		{"unsettled without end states is clean", &Result{}, nil, 0, 0, ""},
		{"end state not read", &Result{Settled: true}, nil, 0, 1, "0 of its 1 end states read"},
		{"counts", &Result{Settled: true}, nil, 1, 0, "0 of its 1 count oracles recorded"},
	} {
		got := uncleanReference(tc.res, tc.err, tc.counts, tc.endStates)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
