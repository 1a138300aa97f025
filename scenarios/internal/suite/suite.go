package suite

import (
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// VolumeLabel marks specs that run only in make test-volume.
const VolumeLabel = "volume"

// Volume reports whether the suite runs its volume (STALEFUZZ_VOLUME).
func Volume() bool { return os.Getenv("STALEFUZZ_VOLUME") != "" }

// VolumeOnly skips t unless Volume, saying what it leaves out and how to
// run it. It is for rows make test cannot afford on a fresh 2-core machine
// (.ci/run fits in 90 minutes with builds): a fix's control, which builds
// the controller with a patch of fix/ and runs it until a run takes the
// finding's path, or a rate over many executions. The finding's own
// regression row at the release stays in make test.
func VolumeOnly(t testing.TB, what string) {
	t.Helper()
	if !Volume() {
		t.Skipf("%s: make test-volume (STALEFUZZ_VOLUME=1) runs it", what)
	}
}

// Run runs the suite's specs: without Volume, those labelled VolumeLabel are
// left out (unless -ginkgo.label-filter says otherwise).
func Run(t *testing.T, name string) {
	t.Helper()
	RegisterFailHandler(Fail)
	cfg, rep := GinkgoConfiguration()
	if cfg.LabelFilter == "" && !Volume() {
		cfg.LabelFilter = "!" + VolumeLabel
	}
	RunSpecs(t, name, cfg, rep)
}

// Reps is n with Volume, else 3: how many executions a spec's statistic
// takes.
func Reps(n int) int {
	if Volume() {
		return n
	}
	return min(n, 3)
}

// Reproduces checks that try (one execution; true when it showed the bug)
// reproduces: with Volume, at least 19 times in 20; otherwise at least once
// in 3 tries (a regression row).
func Reproduces(what string, try func() bool) {
	GinkgoHelper()
	if !Volume() {
		for range 3 {
			if try() {
				return
			}
		}
		Fail(fmt.Sprintf("%s: did not reproduce in 3 tries", what))
	}
	hits := 0
	for range 20 {
		if try() {
			hits++
		}
	}
	By(fmt.Sprintf("%s: %d/20", what, hits))
	Expect(hits).To(BeNumerically(">=", 19), "%s reproduced %d/20 times", what, hits)
}
