package fluxcd_test

import (
	"fmt"
	"maps"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/audit"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
	"github.com/stalefuzz/stalefuzz/scenarios/fluxcd"
	"github.com/stalefuzz/stalefuzz/scenarios/internal/suite"
)

// The MODIFIED events source-controller's own writes cause in a clean
// reconcile of a new GitRepository (see the baseline spec): 1 finalizer
// patch, 2 "processing object: new generation", 3 "building artifact",
// 4 "building artifact: new upstream revision", 5 conditions Ready=True,
// 6 the status patch with the artifact and observedGeneration. A window
// "after the first N" stalls the watch right after event N, whatever the
// timing, for the rest of a 3.3 s window: about 3 s of staleness, as claimed.
func stallAfter(n int, action proxy.Action, edit int) fuzz.Schedule {
	return fuzz.Schedule{
		Knobs: map[string]int{"edit": edit},
		Steps: []fuzz.Step{{Client: fluxcd.Client, Resource: "gitrepositories", Types: []string{"MODIFIED"}, After: n, Start: 0, Length: 3300 * time.Millisecond, Action: action}},
	}
}

// outcome is one row of the report's table.
type outcome struct {
	conflicts   int           // 409s the apiserver returned to the conditions patch
	patchFailed int           // PatchOperationFailed events: reconciles that ended in error
	converged   bool          // Ready=True, observedGeneration == generation, artifact present
	claimed     bool          // artifact present, observedGeneration != generation, after settling
	toConverge  time.Duration // from the end of the lag to source-controller's last write
	res         *fuzz.Result
}

func observe(s fuzz.Schedule) outcome {
	GinkgoHelper()
	return observeOn(env, s)
}

// firstReconcileWrites is how many writes source-controller's first
// reconcile of a new GitRepository makes (the baseline spec's sequence).
const firstReconcileWrites = 9

// editAttempts bounds how often observeOn runs a schedule with the user's
// edit again because the edit came before the first reconcile's end.
const editAttempts = 5

// laterEdit is s with the user's edit one EditStep later, if the "edit"
// knob has a later value (fluxcd.Scenario's Knobs).
func laterEdit(s fuzz.Schedule) fuzz.Schedule {
	if s.Knobs["edit"] >= fluxcd.EditValues-1 {
		return s
	}
	knobs := maps.Clone(s.Knobs)
	knobs["edit"]++
	s.Knobs = knobs
	return s
}

// firstReconcileEnd is when source-controller had the answer to its
// first reconcile's last write (zero if it never wrote that many).
func firstReconcileEnd(res *fuzz.Result) time.Time {
	n := 0
	for _, r := range res.Trace.Requests {
		if r.Client == fluxcd.Client && r.Resource == "gitrepositories" && r.Verb == "patch" && r.Code == 200 {
			if n++; n == firstReconcileWrites {
				return r.Start.Add(r.Latency)
			}
		}
	}
	return time.Time{}
}

// observeOn runs s on e and tells what happened. The schedules with the
// user's edit (at t+0.5 s, a workload timer) count events in an order that
// holds only if source-controller's first reconcile has ended before the
// edit: its 6 MODIFIED events, then the edit's. On a loaded machine the
// first reconcile can take longer (0.50-0.64 s beside hack/loaded.sh 2);
// such a run is not the schedule the spec means, so it is run again with
// the edit one EditStep later (knob "edit" + 1, up to its last value), up
// to editAttempts runs in all: the spec is about the edit after the first
// reconcile, not about its time. It fails naming the load if the order
// never held.
func observeOn(e *fuzz.Env, s fuzz.Schedule) outcome {
	GinkgoHelper()
	var res *fuzz.Result
	for attempt := 1; ; attempt++ {
		res = runOn(e, s)
		edit := s.Knobs["edit"]
		if edit == 0 {
			break
		}
		at := res.Mark.Add(time.Duration(edit) * fluxcd.EditStep)
		end := firstReconcileEnd(res)
		if !end.IsZero() && end.Before(at) {
			break
		}
		By(fmt.Sprintf("%s: the first reconcile's last write ended at t%+.2fs, not before the edit at t%+.2fs (a loaded machine): not the schedule meant, run %d of %d", s, end.Sub(res.Mark).Seconds(), at.Sub(res.Mark).Seconds(), attempt, editAttempts))
		if attempt == editAttempts {
			Fail(fmt.Sprintf("%s: in %d runs, source-controller's first reconcile never ended before the user's edit (the last at t%+.2fs); the machine is too loaded for this spec", s, editAttempts, at.Sub(res.Mark).Seconds()))
		}
		s = laterEdit(s)
	}
	o := outcome{res: res, converged: true}
	var last time.Time
	for _, r := range res.Trace.Requests {
		if r.Client != fluxcd.Client {
			continue
		}
		if r.Code == 409 && r.Resource == "gitrepositories" && r.Subresource == "status" {
			Expect(r.SentRV).NotTo(BeEmpty(), "only the optimistic-lock conditions patch can meet a 409")
			o.conflicts++
		}
		if r.Resource == "events" && r.Fields["reason"] == `"PatchOperationFailed"` {
			o.patchFailed++
		}
		if r.Verb == "patch" || r.Verb == "create" {
			last = r.Start.Add(r.Latency)
		}
	}
	for _, v := range res.Violations {
		switch v.Oracle {
		case "claimed-state":
			o.claimed = true
			o.converged = false
		default:
			o.converged = false
		}
	}
	o.toConverge = last.Sub(res.Mark.Add(s.LagEnd()))
	By(fmt.Sprintf("%s: %d×409, %d reconcile errors, converged=%v (last write %+.2fs after the lag ended), claimed state=%v",
		s, o.conflicts, o.patchFailed, o.converged, o.toConverge.Seconds(), o.claimed))
	return o
}

var _ = Describe("the baseline write sequence", func() {
	It("is: finalizer patch, then per step an optimistic-lock conditions patch and a plain status patch; Ready with artifact and observedGeneration", func() {
		res := run(fuzz.Schedule{Knobs: map[string]int{"edit": 0}})
		Expect(res.Err()).NotTo(HaveOccurred(), res.Report())
		var seq []string
		for _, r := range res.Trace.Requests {
			if r.Client == fluxcd.Client && r.Resource == "gitrepositories" && r.Verb == "patch" {
				lock := "plain"
				if r.SentRV != "" {
					lock = "optimistic"
				}
				seq = append(seq, fmt.Sprintf("%s/%s %s %d", r.Resource, r.Subresource, lock, r.Code))
			}
		}
		GinkgoWriter.Println(strings.Join(seq, "\n"))
		Expect(seq).To(Equal([]string{
			"gitrepositories/ plain 200",
			"gitrepositories/status optimistic 200", "gitrepositories/status plain 200", // processing object: new generation
			"gitrepositories/status optimistic 200", "gitrepositories/status plain 200", // building artifact
			"gitrepositories/status optimistic 200", "gitrepositories/status plain 200", // new upstream revision
			"gitrepositories/status optimistic 200", "gitrepositories/status plain 200", // Ready, artifact, observedGeneration
		}))

		// The audit tells the same from behaviour: the conditions go through
		// the optimistic-lock patch, observedGeneration through the plain one
		// (fluxcd/pkg runtime/patch: patchStatusConditions, then patchStatus).
		rep := res.Audit()
		var table strings.Builder
		Expect(rep.WriteTable(&table)).To(Succeed())
		GinkgoWriter.Printf("audit:\n%s", table.String())
		status := func(lock string) audit.Row {
			for _, r := range rep.Rows {
				if r.Client == fluxcd.Client && r.Resource == "gitrepositories" && r.Subresource == "status" && r.Lock == lock {
					return r
				}
			}
			Fail(fmt.Sprintf("no %s status patch in the audit:\n%s", lock, table.String()))
			return audit.Row{}
		}
		locked, plain := status("resourceVersion"), status("none")
		Expect(locked).To(And(HaveField("Kind", "merge patch"), HaveField("Writes", 4)), table.String())
		Expect(locked.Fields).To(ContainElement(HavePrefix("status.conditions")), table.String())
		Expect(locked.Fields).NotTo(ContainElement("status.observedGeneration"), table.String())
		Expect(plain).To(And(HaveField("Kind", "merge patch"), HaveField("Writes", 4)), table.String())
		Expect(plain.Fields).To(ContainElement("status.observedGeneration"), table.String())
		Expect(plain.Fields).NotTo(ContainElement(HavePrefix("status.conditions")), table.String())
		Expect(rep.Overwrites).To(BeEmpty(), table.String())
	})
})

var _ = Describe("the claim: ~3 s of GitRepository watch lag during a reconcile", func() {
	DescribeTable("genuine 409s and reconcile errors, then convergence within a second of the lag ending; the claimed state never appears",
		func(s fuzz.Schedule, wantConflicts bool) {
			o := observe(s)
			Expect(o.claimed).To(BeFalse(), o.res.Report())
			Expect(o.converged).To(BeTrue(), o.res.Report())
			Expect(o.toConverge).To(BeNumerically("<", fluxcd.MaxRetryDelay+time.Second), "convergence is bounded by the retry delay after the lag")
			if wantConflicts {
				Expect(o.conflicts).To(BeNumerically(">=", 5), "the conditions patch exhausts its 5 attempts at least once: %s", o.res.Report())
				Expect(o.patchFailed).To(BeNumerically(">=", 1), "a reconcile ends in error: %s", o.res.Report())
			} else {
				Expect(o.conflicts).To(BeZero(), o.res.Report())
			}
		},
		Entry("from the start (the ADDED event waits too)", fuzz.Schedule{Knobs: map[string]int{"edit": 0}, Steps: []fuzz.Step{{Client: fluxcd.Client, Resource: "gitrepositories", Start: 0, Length: 3 * time.Second, Action: proxy.Hold}}}, false),
		Entry("from the first status write", stallAfter(1, proxy.Hold, 0), true),
		Entry("around the intermediate patches", stallAfter(2, proxy.Hold, 0), true),
		Entry("around the last intermediate patch, before the final one", stallAfter(3, proxy.Hold, 0), true),
		Entry("around the final patch", stallAfter(4, proxy.Hold, 0), false),
		Entry("with a user edit (generation 2) at t+0.5s, from the edit's own event on", stallAfter(6, proxy.Hold, 1), false),
		Entry("with a user edit at t+0.5s, around the second reconcile's first status write", stallAfter(7, proxy.Hold, 1), true),
	)
})

var _ = Describe("under lost watch events (a fault a real informer repairs by relisting)", func() {
	It("losing the user's generation-change event leaves the claimed state, never healing (19/20 or better in make test-volume)", func() {
		var last outcome
		suite.Reproduces("the claimed state after the generation change's event is lost", func() bool {
			last = observe(stallAfter(6, proxy.Drop, 1))
			return last.claimed
		})
		Expect(last.res.Trace.Events).To(ContainElement(SatisfyAll(HaveField("Type", "MODIFIED"), HaveField("Fate", trace.Dropped))))
	})

	It("losing the event of the last intermediate patch leaves artifact and observedGeneration set but Ready stuck Unknown", func() {
		o := observe(stallAfter(3, proxy.Drop, 0))
		Expect(o.claimed).To(BeFalse(), o.res.Report())
		Expect(o.converged).To(BeFalse(), o.res.Report())
		Expect(o.res.Violations).To(ContainElement(SatisfyAll(
			HaveField("Oracle", BeElementOf("convergence", "stuck")),
			HaveField("Message", ContainSubstring("want condition Ready=True, got Unknown")),
			HaveField("Message", Not(ContainSubstring("observedGeneration"))),
		)), o.res.Report())
		Expect(o.conflicts).To(BeNumerically(">=", 10), "every reconcile's conditions patch meets 409s: the cache never catches up")
	})
})
