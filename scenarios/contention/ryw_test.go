package contention_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/scenarios/contention"
	"github.com/stalefuzz/stalefuzz/scenarios/internal/suite"
)

// atThePlansEvent is a step on the replica's watch of rollouts from the
// plan's own MODIFIED event on: the plan write's event is the first.
func atThePlansEvent(act proxy.Action, length time.Duration) fuzz.Schedule {
	return fuzz.Schedule{Knobs: map[string]int{"replicas": 0}, Steps: []fuzz.Step{{
		Client: contention.Replica(0), Resource: "rollouts", Types: []string{"MODIFIED"}, Action: act, Length: length,
	}}}
}

// controller-runtime v0.25's experimental read-your-writes consistency
// (client.CacheOptions.EnableReadYourWritesConsistency) on the one-replica
// blind variant: a cache read waits until the cache has seen every write
// the client made before it. It keeps what it waits for in memory.
var _ = Describe("read-your-writes consistency (controller-runtime v0.25, experimental), one replica, blind patch", func() {
	var ryw *fuzz.Env
	BeforeAll(func() {
		var err error
		ryw, err = fuzz.NewEnv(contention.Realistic(contention.BlindReadYourWrites))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(ryw.Stop)
	})
	// Each row: the fault, whether the blind patch loses the plan without
	// read-your-writes, and with it (measured 10/10 and 0/10 in make
	// test-volume; scenarios/contention/README.md has the table).
	DescribeTable("loses the plan only where the replica's memory of its writes is gone", Label(suite.VolumeLabel),
		func(sched fuzz.Schedule, blindLoses, loses bool) {
			runs := suite.Reps(10)
			lost, blindLost := 0, 0
			var last *fuzz.Result
			for range runs {
				res := run(ryw, sched)
				if lostPlan(res) {
					lost++
					last = res
				}
				if lostPlan(run(realBlind, sched)) {
					blindLost++
				}
			}
			By(fmt.Sprintf("%s: read-your-writes lost the plan %d/%d times, the same blind patch without it %d/%d", sched, lost, runs, blindLost, runs))
			if blindLoses {
				Expect(blindLost).To(BeNumerically(">=", runs-1), "schedule %s without read-your-writes", sched)
			} else {
				Expect(blindLost).To(BeZero(), "schedule %s without read-your-writes", sched)
			}
			if loses {
				Expect(lost).To(BeNumerically(">=", runs-1), "schedule %s", sched)
				GinkgoWriter.Println(last.Report())
			} else {
				if last != nil {
					GinkgoWriter.Println(last.Report())
				}
				Expect(lost).To(BeZero(), "schedule %s", sched)
			}
		},
		Entry("the plan's own event held 1 s (a slow watch)", atThePlansEvent(proxy.Hold, time.Second), true, false),
		Entry("a watch broken at the plan's own event (re-watch from the last version seen)", atThePlansEvent(proxy.Break, contention.RealisticBounds.MaxLength), false, false),
		Entry("a watch broken at the plan's own event whose re-watch meets 410 Gone (a relist after client-go's backoff)", atThePlansEvent(proxy.Expire, contention.RealisticBounds.MaxLength), true, false),
		Entry("a restart right after the plan, reconnecting to a current apiserver", restartAfterPlan(false, 0), false, false),
		Entry("a restart before the answer to the plan, reconnecting to a current apiserver", restartAfterPlan(true, 0), false, false),
		Entry("a restart right after the plan, reconnecting to an apiserver that has not seen it, 0.2 s behind", restartAfterPlan(false, 200*time.Millisecond), true, true),
		Entry("a restart before the answer to the plan, reconnecting to an apiserver that has not seen it, 0.2 s behind", restartAfterPlan(true, 200*time.Millisecond), true, true),
	)
}, Ordered)
