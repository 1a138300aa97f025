package fluxcd_test

import (
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/scenarios/fluxcd"
)

// fault is one Realistic step on source-controller, over the whole window.
func fault(edit int, st fuzz.Step) fuzz.Schedule {
	st.Client, st.Length = fluxcd.Client, fluxcd.RealisticBounds.MaxLength
	return fuzz.Schedule{Knobs: map[string]int{"edit": edit}, Steps: []fuzz.Step{st}}
}

func atModified(edit, after int, act proxy.Action) fuzz.Schedule {
	return fault(edit, fuzz.Step{Resource: "gitrepositories", Types: []string{"MODIFIED"}, After: after, Action: act})
}

func restartAt(write int, act proxy.Action, lag time.Duration) fuzz.Schedule {
	return fault(0, fuzz.Step{Action: act, After: write - 1, Lag: lag})
}

// row observes one schedule on the realistic env and renders a table row.
func row(s fuzz.Schedule) (outcome, string) {
	GinkgoHelper()
	o := observeOn(realistic, s)
	var oracles []string
	for _, v := range o.res.Violations {
		oracles = append(oracles, v.Oracle)
	}
	restarts := ""
	for _, r := range o.res.Restarts {
		restarts = fmt.Sprintf("restarted (ready %.2fs after)", r.Ready.Sub(r.Stopped).Seconds())
	}
	return o, fmt.Sprintf("| %s | %d | %d | %v | %s | %s |", s, o.conflicts, o.patchFailed, o.converged, or(strings.Join(oracles, ", "), "none"), restarts)
}

func or(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

var _ = Describe("truth table: faults a real cluster produces", Label("truth-table"), func() {
	It("prints every row", func() {
		var schedules []fuzz.Schedule
		for n := 1; n <= 6; n++ {
			schedules = append(schedules, atModified(0, n-1, proxy.Break))
		}
		schedules = append(schedules, atModified(1, 6, proxy.Break))
		for n := 1; n <= 6; n++ {
			schedules = append(schedules, atModified(0, n-1, proxy.Expire))
		}
		schedules = append(schedules, atModified(1, 6, proxy.Expire))
		for n := 1; n <= 10; n++ {
			schedules = append(schedules, restartAt(n, proxy.Freeze, 0), restartAt(n, proxy.Cut, 0), restartAt(n, proxy.Freeze, 300*time.Millisecond))
		}
		var rows []string
		for _, s := range schedules {
			o, r := row(s)
			rows = append(rows, r)
			if !o.converged {
				GinkgoWriter.Println(o.res.Report())
			}
		}
		out := strings.Join(rows, "\n")
		GinkgoWriter.Println(out)
		Expect(os.WriteFile("/tmp/fluxcd-truth.md", []byte(out+"\n"), 0o644)).To(Succeed())
	})
})
