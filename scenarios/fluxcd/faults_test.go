package fluxcd_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
	"github.com/stalefuzz/stalefuzz/scenarios/fluxcd"
	"github.com/stalefuzz/stalefuzz/scenarios/internal/suite"
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

func restartAtEdit(write int, act proxy.Action, lag time.Duration) fuzz.Schedule {
	return fault(1, fuzz.Step{Action: act, After: write - 1, Lag: lag})
}

var _ = Describe("truth table: faults a real cluster produces", Label("truth-table", suite.VolumeLabel), func() {
	It("never leaves the GitRepository stuck or in the claimed state: broken watches, relists after 410, restarts after each write (also before its answer, also onto an apiserver that has not seen it)", func() {
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
		// With the user's edit at t+0.5 s: restarts around the second
		// reconcile, the one whose observedGeneration the claim is about.
		for n := 10; n <= 13; n++ {
			schedules = append(schedules, restartAtEdit(n, proxy.Freeze, 300*time.Millisecond), restartAtEdit(n, proxy.Cut, 300*time.Millisecond))
		}
		rows := []string{"| schedule | 409s | reconcile errors | converged | violations | restart |", "|---|---|---|---|---|---|"}
		for _, s := range schedules {
			o, r := row(s)
			rows = append(rows, r)
			Expect(o.converged).To(BeTrue(), o.res.Report())
			Expect(o.claimed).To(BeFalse(), o.res.Report())
			if st := s.Steps[0]; st.IsRestart() {
				Expect(o.res.Restarts).To(HaveLen(1), "%s restarted source-controller once: %s", s, o.res.Report())
				if st.Lag > 0 && s.Knobs["edit"] == 0 {
					Expect(o.conflicts).To(BeNumerically(">", 0), "the restarted source-controller listed from before its last write, so its first locked patch met a 409: %s", o.res.Report())
				}
			}
		}
		GinkgoWriter.Println(strings.Join(rows, "\n"))
		if out := os.Getenv("STALEFUZZ_TRUTH_TABLE"); out != "" {
			Expect(os.WriteFile(out, []byte(strings.Join(rows, "\n")+"\n"), 0o644)).To(Succeed())
		}
	})

	It("shows a write source-controller never got the answer to, and the new process that followed", func() {
		res := runOn(realistic, restartAt(2, proxy.Cut, 0))
		Expect(res.Err()).NotTo(HaveOccurred(), res.Report())
		var cut []string
		for _, r := range res.Trace.Requests {
			if strings.HasPrefix(r.Fault, "cut:") {
				cut = append(cut, fmt.Sprintf("%s %s/%s %d", r.Verb, r.Resource, r.Subresource, r.Code))
			}
		}
		Expect(cut).To(Equal([]string{"patch gitrepositories/status 200"}), "the 2nd write (the first locked conditions patch) was applied, its answer withheld")
		Expect(res.Restarts).To(HaveLen(1))
		Expect(res.Report()).To(ContainSubstring("killed after sending a write and before reading the answer"), "the report names the fault's real-world cause")
	})
})

var _ = Describe("with source-controller's default retry flags (750 ms to 15 min backoff)", Label("default-retry", suite.VolumeLabel), Ordered, func() {
	var (
		e         *fuzz.Env
		converged time.Time
	)
	BeforeAll(func() {
		s := fluxcd.DefaultRetryScenario()
		// A check that waits for healing: the run may settle (no writes for
		// 1.5 s) while source-controller still waits in its backoff.
		s.Checks = append(s.Checks, fuzz.Check{Name: "heals", Fn: func(ctx context.Context, x *fuzz.Exec, _ trace.Trace) error {
			return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(fluxcd.GVK)
				if err := x.Direct.Get(ctx, client.ObjectKey{Namespace: x.Namespace, Name: fluxcd.Object}, u); err != nil {
					return false, err
				}
				og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
				if og == u.GetGeneration() && readyTrue(u) {
					converged = time.Now()
					return true, nil
				}
				return false, nil
			})
		}})
		var err error
		e, err = fuzz.NewEnv(s)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(e.Stop)
	})

	DescribeTable("how long a user waits for healing after a stall from the first status write",
		func(stall time.Duration) {
			converged = time.Time{}
			sched := fuzz.Schedule{Knobs: map[string]int{"edit": 0}, Steps: []fuzz.Step{{
				Client: fluxcd.Client, Resource: "gitrepositories", Types: []string{"MODIFIED"}, After: 1, Length: stall, Action: proxy.Hold,
			}}}
			res := runOn(e, sched, fuzz.Within(stall+60*time.Second))
			Expect(converged).NotTo(BeZero(), "it heals: %s", res.Report())
			lagEnd := res.Mark.Add(sched.LagEnd())
			failed := 0
			for _, r := range res.Trace.Requests {
				if r.Resource == "events" && r.Fields["reason"] == `"PatchOperationFailed"` {
					failed++
				}
			}
			By(fmt.Sprintf("defaults: %s: %d failed reconciles; converged %.2fs after the stall ended", sched, failed, converged.Sub(lagEnd).Seconds()))
			Expect(failed).To(BeNumerically(">=", 1), "the stall makes a reconcile fail: %s", res.Report())
		},
		Entry("3.3 s (the claim's)", 3300*time.Millisecond),
		Entry("10 s", 10*time.Second),
		Entry("20 s", 20*time.Second),
	)
})

// readyTrue reports whether condition Ready is True.
func readyTrue(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}
