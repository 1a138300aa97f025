package fluxcd_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy/reaper"
	"github.com/stalefuzz/stalefuzz/scenarios/fluxcd"
	"github.com/stalefuzz/stalefuzz/scenarios/internal/suite"
)

// TestMain shares one control plane among every Env of this test binary
// (the suite's and the fuzz targets').
func TestMain(m *testing.M) { os.Exit(fuzz.Main(m)) }

func TestFluxCD(t *testing.T) { suite.Run(t, "fluxcd") }

var env, realistic *fuzz.Env

var _ = BeforeSuite(func() {
	var err error
	env, err = fuzz.NewEnv(fluxcd.Scenario(fuzz.LagAndLoss))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(env.Stop)
	realistic, err = fuzz.NewEnv(fluxcd.Scenario(fuzz.Realistic))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(realistic.Stop)
})

// Every execution kills every source-controller it started, the ones a
// restart started included.
var _ = AfterEach(func() {
	Eventually(sourceControllers).WithTimeout(5*time.Second).Should(BeEmpty(), "source-controller processes left running")
})

// sourceControllers lists the PIDs of running processes of the
// source-controller binary.
func sourceControllers() []int { return reaper.RunningUnder(fluxcd.Binary(), os.Getpid()) }

func run(s fuzz.Schedule) *fuzz.Result {
	GinkgoHelper()
	return runOn(env, s)
}

// runOn runs s on e. An execution that could not be judged (a harness error:
// source-controller, a fresh process, now and then takes longer than the
// start budget to sync on a loaded 2-core machine) is run again, up to three
// times in all; a harness error is never a finding.
func runOn(e *fuzz.Env, s fuzz.Schedule, opts ...fuzz.RunOption) *fuzz.Result {
	GinkgoHelper()
	res, err := e.Run(context.Background(), s, append(opts, fuzz.Retries(3))...)
	Expect(err).NotTo(HaveOccurred(), "schedule %s", s)
	return res
}
