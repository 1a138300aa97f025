package job

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
)

// TestResumeJobNotYetInInformer: Run creates the metric's Job and asks for
// Resume at once (ResumeAt = now), and Resume reads the Job from the
// informer's lister. Until the Job's ADDED event has reached the informer
// (a Job watch that relists after 410, or simply arrives after the
// AnalysisRun's own update), the lister says NotFound, and Resume marks the
// measurement Error: the analysis controller then runs the metric again
// after DefaultErrorRetryInterval (10 s) with a second Job
// (<uid>.<metric>.2), the first Job's result is never read, and five such
// misses in a row fail the AnalysisRun. Found by stalefuzz
// (scenarios/argorollouts/targets/workflows.yaml).
func TestResumeJobNotYetInInformer(t *testing.T) {
	// The provider's informer is synced, then stopped: the Job Run creates
	// is in the apiserver (the fake clientset) but never in the lister.
	p := newTestJobProvider()
	run := newRunWithJobMetric()
	metric := run.Spec.Metrics[0]

	measurement := p.Run(run, metric)
	assert.Equal(t, v1alpha1.AnalysisPhaseRunning, measurement.Phase)
	assert.NotNil(t, measurement.ResumeAt, "Run asks for Resume at once")

	measurement = p.Resume(run, metric, measurement)
	assert.Equal(t, v1alpha1.AnalysisPhaseRunning, measurement.Phase,
		"the Job this provider just created is still running; got %s: %s", measurement.Phase, measurement.Message)
}
