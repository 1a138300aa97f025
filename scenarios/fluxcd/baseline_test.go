package fluxcd_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

var _ = Describe("baseline without lag", func() {
	It("makes the GitRepository Ready with an artifact and observedGeneration == generation", func() {
		res := run(fuzz.Schedule{})
		GinkgoWriter.Println(res.Report())
		Expect(res.Err()).NotTo(HaveOccurred(), res.Report())
		GinkgoWriter.Printf("elapsed %v\n", res.Elapsed)
	})
})
