package fluxcd_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/scenarios/fluxcd"
	"github.com/stalefuzz/stalefuzz/scenarios/internal/suite"
)

var _ = Describe("baseline without lag", func() {
	It("makes the GitRepository Ready with an artifact and observedGeneration == generation", func() {
		res := run(fuzz.Schedule{})
		GinkgoWriter.Println(res.Report())
		Expect(res.Err()).NotTo(HaveOccurred(), res.Report())
		GinkgoWriter.Printf("elapsed %v\n", res.Elapsed)
	})
})

var _ = Describe("settling", func() {
	// The user's edit is a workload timer: its write goes around the proxy,
	// and source-controller's answer to it comes a reconcile later. A run
	// must not settle in between, even when source-controller's metrics
	// said idle just before the edit and the window acts on nothing.
	It("waits for source-controller's answer to a user's edit that comes during a window that acts on nothing", func() {
		sched := fuzz.Schedule{Knobs: map[string]int{"edit": 3}, Steps: []fuzz.Step{{
			Client: fluxcd.Client, Resource: "gitrepositories", Types: []string{"DELETED"}, Action: proxy.Drop, Length: 3 * time.Second,
		}}}
		for range suite.Reps(3) {
			res := run(sched)
			Expect(res.Err()).NotTo(HaveOccurred(), res.Report())
			Expect(res.Settled).To(BeTrue(), res.Report())
		}
	})
})
