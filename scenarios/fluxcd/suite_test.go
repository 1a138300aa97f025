package fluxcd_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/scenarios/fluxcd"
)

func TestFluxCD(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "fluxcd")
}

var env *fuzz.Env

var _ = BeforeSuite(func() {
	var err error
	env, err = fuzz.NewEnv(fluxcd.Scenario(fuzz.LagAndLoss))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(env.Stop)
})

func run(s fuzz.Schedule) *fuzz.Result {
	GinkgoHelper()
	res, err := env.Run(context.Background(), s)
	Expect(err).NotTo(HaveOccurred(), "schedule %s", s)
	return res
}
