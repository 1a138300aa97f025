package contention_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
	"github.com/stalefuzz/stalefuzz/scenarios/contention"
	"github.com/stalefuzz/stalefuzz/scenarios/internal/suite"
)

// TestMain shares one control plane among every Env of this test binary
// (the suite's and the fuzz targets').
func TestMain(m *testing.M) { os.Exit(fuzz.Main(m)) }

func TestContention(t *testing.T) { suite.Run(t, "contention") }

var blind, optimistic, realBlind, realOptimistic *fuzz.Env

var _ = BeforeSuite(func() {
	var err error
	realBlind, err = fuzz.NewEnv(contention.Realistic(contention.Blind))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(realBlind.Stop)
	realOptimistic, err = fuzz.NewEnv(contention.Realistic(contention.Optimistic))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(realOptimistic.Stop)
	blind, err = fuzz.NewEnv(contention.Scenario(contention.Blind))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(blind.Stop)
	optimistic, err = fuzz.NewEnv(contention.Scenario(contention.Optimistic))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(optimistic.Stop)
})

// holdOwnWrites is one replica whose cache does not show its own plan write
// for a second: its next reconcile still sees status.plan empty.
var holdOwnWrites = fuzz.Schedule{
	Knobs: map[string]int{"replicas": 0},
	Steps: []fuzz.Step{{Client: contention.Replica(0), Resource: "rollouts", Types: []string{"MODIFIED"}, Start: 0, Length: time.Second, Action: proxy.Hold}},
}

// seeds are the hand-written schedules: no lag, both replica counts, and
// lag on each replica.
var seeds = []fuzz.Schedule{
	{Knobs: map[string]int{"replicas": 0}},
	{Knobs: map[string]int{"replicas": 1}},
	holdOwnWrites,
	{Knobs: map[string]int{"replicas": 1}, Steps: []fuzz.Step{{Client: contention.Replica(1), Resource: "rollouts", Start: 0, Length: 800 * time.Millisecond, Action: proxy.Hold}}},
	{Knobs: map[string]int{"replicas": 1}, Steps: []fuzz.Step{
		{Client: contention.Replica(0), Resource: "rollouts", Start: 0, Length: 500 * time.Millisecond, Action: proxy.Delay, Delay: 300 * time.Millisecond},
		{Client: contention.Replica(1), Resource: "rollouts", Start: 100 * time.Millisecond, Length: time.Second, Action: proxy.Hold},
	}},
}

func run(env *fuzz.Env, s fuzz.Schedule) *fuzz.Result {
	GinkgoHelper()
	res, err := env.Run(context.Background(), s)
	Expect(err).NotTo(HaveOccurred(), "schedule %s", s)
	return res
}

func conflicts(res *fuzz.Result) int {
	n := 0
	for _, r := range res.Trace.Requests {
		if r.Code == 409 {
			n++
		}
	}
	return n
}

var _ = Describe("contention with MergeFromWithOptimisticLock", func() {
	It("never replaces a plan, over the seed schedules (and 200 random ones in make test-volume)", func() {
		scenario := contention.Scenario(contention.Optimistic)
		rng := rand.New(rand.NewPCG(uint64(GinkgoRandomSeed()), 3))
		schedules := append([]fuzz.Schedule{}, seeds...)
		random := 0
		if suite.Volume() {
			random = 200
		}
		for range random {
			b := make([]byte, 1+rng.IntN(16))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			schedules = append(schedules, scenario.Decode(b))
		}
		total409 := 0
		for _, s := range schedules {
			res := run(optimistic, s)
			Expect(res.Err()).NotTo(HaveOccurred(), res.Report())
			total409 += conflicts(res)
		}
		By(fmt.Sprintf("%d schedules, %d genuine 409s from the apiserver", len(schedules), total409))
		Expect(total409).To(BeNumerically(">", 0), "contention must actually have happened for the invariant to mean something")
	})

	It("meets a 409 where the blind patch loses the plan, and converges once the lag ends", func() {
		res := run(optimistic, holdOwnWrites)
		Expect(res.Err()).NotTo(HaveOccurred(), res.Report())
		Expect(conflicts(res)).To(BeNumerically(">", 0), res.Report())
		Expect(res.SettledIdle).To(BeFalse(), "an event held until the window's end keeps the run from settling before it")
		Expect(res.Trace.Events).To(ContainElement(And(HaveField("Rule", 0), HaveField("Fate", trace.Released))), "the hold released an event at its end")
	})

	It("settles before a window that can act on nothing has ended: a hold on a replica that is not running", func() {
		idle := fuzz.Schedule{Knobs: map[string]int{"replicas": 0}, Steps: []fuzz.Step{{
			Client: contention.Replica(1), Resource: "rollouts", Length: 2 * time.Second, Action: proxy.Hold,
		}}}
		res := run(optimistic, idle)
		Expect(res.Err()).NotTo(HaveOccurred(), res.Report())
		Expect(res.Settled).To(BeTrue(), res.Report())
		Expect(res.SettledIdle).To(BeTrue(), "nothing was held, nobody wrote for the quiet period: the rest of the window could change nothing")
		Expect(res.Trace.Events).NotTo(ContainElement(HaveField("Client", contention.Replica(1))))
	})
})

var _ = Describe("contention with a blind MergeFrom patch", func() {
	It("loses the plan under a fixed schedule (at least 19 times in 20 in make test-volume)", func() {
		var last *fuzz.Result
		suite.Reproduces(fmt.Sprintf("schedule %s: the lost plan", holdOwnWrites), func() bool {
			res := run(blind, holdOwnWrites)
			for _, v := range res.Violations {
				if v.Oracle == "lost-update" {
					last = res
					return true
				}
			}
			return false
		})
		GinkgoWriter.Println(last.Report())
		Expect(last.Violations).To(ContainElement(HaveField("Oracle", "plan-kept")))
	})

	// Each committed finding is also replayed once by its fuzz target (a
	// KnownBug scenario's corpus entry must reproduce); this is how reliably.
	DescribeTable("reproduces the lost plan from each committed fuzz finding, at least 19 times in 20", Label(suite.VolumeLabel),
		func(target string, scenario fuzz.Scenario, env func() *fuzz.Env) {
			entries, err := filepath.Glob("testdata/fuzz/" + target + "/*")
			Expect(err).NotTo(HaveOccurred())
			Expect(entries).NotTo(BeEmpty(), "%s's findings must be committed as regression inputs", target)
			for _, path := range entries {
				input, err := fuzz.ReadCorpusEntry(path)
				Expect(err).NotTo(HaveOccurred())
				sched := scenario.Decode(input)
				suite.Reproduces(fmt.Sprintf("%s (%s): the lost plan", path, sched), func() bool { return lostPlan(run(env(), sched)) })
			}
		},
		Entry("two replicas, lag", "FuzzContentionBlind", contention.Scenario(contention.Blind), func() *fuzz.Env { return blind }),
		Entry("one replica, faults a real cluster produces", "FuzzContentionRealisticBlind", contention.Realistic(contention.Blind), func() *fuzz.Env { return realBlind }),
	)
})

// restartAfterPlan restarts the single replica right after (or, with cut,
// before the answer to) its first write, the plan, reconnecting to an
// apiserver lag behind.
func restartAfterPlan(cut bool, lag time.Duration) fuzz.Schedule {
	act := proxy.Freeze
	if cut {
		act = proxy.Cut
	}
	return fuzz.Schedule{Knobs: map[string]int{"replicas": 0}, Steps: []fuzz.Step{{
		Client: contention.Replica(0), Action: act, Length: contention.RealisticBounds.MaxLength, Lag: lag,
	}}}
}

func lostPlan(res *fuzz.Result) bool {
	for _, v := range res.Violations {
		if v.Oracle == "plan-kept" || v.Oracle == "lost-update" {
			return true
		}
	}
	return false
}

var _ = Describe("faults a real cluster produces, one replica", func() {
	DescribeTable("a restart between the plan write and the step writes",
		func(sched fuzz.Schedule, blindLoses bool) {
			runs := suite.Reps(10)
			lost := 0
			var last *fuzz.Result
			for range runs {
				res := run(realBlind, sched)
				Expect(res.Restarts).To(HaveLen(1), "schedule %s restarted the replica once: %s", sched, res.Report())
				if lostPlan(res) {
					lost++
					last = res
				}
			}
			By(fmt.Sprintf("blind: %s lost the plan %d/%d times", sched, lost, runs))
			if blindLoses {
				Expect(lost).To(BeNumerically(">=", runs-1), "schedule %s", sched)
				GinkgoWriter.Println(last.Report())
			} else {
				Expect(lost).To(BeZero(), "schedule %s: a restart that reconnects to a current apiserver lists the plan (WatchList is a consistent read)", sched)
			}
			total409 := 0
			for range runs {
				res := run(realOptimistic, sched)
				Expect(res.Err()).NotTo(HaveOccurred(), res.Report())
				total409 += conflicts(res)
			}
			By(fmt.Sprintf("optimistic: %s never lost it, %d genuine 409s in %d runs", sched, total409, runs))
			if blindLoses {
				Expect(total409).To(BeNumerically(">=", runs), "where the blind patch loses the plan, the locked one meets a 409")
			}
		},
		Entry("right after the plan, reconnecting to a current apiserver", restartAfterPlan(false, 0), false),
		Entry("before the answer to the plan, reconnecting to a current apiserver", restartAfterPlan(true, 0), false),
		Entry("right after the plan, reconnecting to an apiserver that has not seen it, 0.2 s behind", restartAfterPlan(false, 200*time.Millisecond), true),
		Entry("before the answer to the plan, reconnecting to an apiserver that has not seen it, 0.2 s behind", restartAfterPlan(true, 200*time.Millisecond), true),
	)

	It("shows in the trace a write the apiserver applied and the replica never received, and the restart that followed", func() {
		res := run(realOptimistic, restartAfterPlan(true, 0))
		Expect(res.Err()).NotTo(HaveOccurred(), res.Report())
		var cut *trace.Request
		for i, r := range res.Trace.Requests {
			if strings.HasPrefix(r.Fault, "cut:") {
				cut = &res.Trace.Requests[i]
			}
		}
		Expect(cut).NotTo(BeNil(), res.Report())
		Expect(cut.Code).To(Equal(200), "the apiserver applied the plan write")
		Expect(cut.Fields).To(HaveKey(contention.PlanID))
		Expect(res.Restarts).To(ConsistOf(HaveField("Client", contention.Replica(0))))
		Expect(res.Restarts[0].Stopped).To(BeTemporally(">=", cut.Start.Add(cut.Latency)))
		Expect(res.Report()).To(ContainSubstring("restart replica-0"))
	})

	It("a watch broken at the plan's own event, whose re-watch meets 410 Gone: the blind patch replans from the stale cache during client-go's relist backoff; the locked one meets 409s", func() {
		sched := fuzz.Schedule{Knobs: map[string]int{"replicas": 0}, Steps: []fuzz.Step{{
			Client: contention.Replica(0), Resource: "rollouts", Types: []string{"MODIFIED"}, Action: proxy.Expire, Length: contention.RealisticBounds.MaxLength,
		}}}
		runs := suite.Reps(10)
		lost := 0
		var last *fuzz.Result
		for range runs {
			res := run(realBlind, sched)
			Expect(res.Report()).To(ContainSubstring("expire:"), "the re-watch met the 410")
			if lostPlan(res) {
				lost++
				last = res
			}
		}
		By(fmt.Sprintf("blind: %s lost the plan %d/%d times", sched, lost, runs))
		Expect(lost).To(BeNumerically(">=", runs-1))
		GinkgoWriter.Println(last.Report())
		total409 := 0
		for range runs {
			res := run(realOptimistic, sched)
			Expect(res.Err()).NotTo(HaveOccurred(), res.Report())
			total409 += conflicts(res)
		}
		By(fmt.Sprintf("optimistic: never lost it, %d genuine 409s in %d runs", total409, runs))
		Expect(total409).To(BeNumerically(">=", runs))
	})
})
