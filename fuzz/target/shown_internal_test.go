package target

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestShownQuotesStatusMessage: a missed wait shows the value the object
// had and, when that is not the one wanted, its status.message (two causes
// of an aborted Argo Rollout, argo-rollouts#4804's and #4842's, tell
// apart there and nowhere else in the stuck violation), cut to
// maxStatusMessage.
func TestShownQuotesStatusMessage(t *testing.T) {
	obj := func(msg any) *unstructured.Unstructured {
		status := map[string]any{"phase": "Degraded"}
		if msg != nil {
			status["message"] = msg
		}
		return &unstructured.Unstructured{Object: map[string]any{"status": status}}
	}
	aborted := `RolloutAborted: Rollout aborted update to revision 2: Experiment analysis phase is error/failed: analysisruns.argoproj.io "c-2-1-smoke" not found`
	for _, c := range []struct {
		name        string
		cur         *unstructured.Unstructured
		value, want string
		shows       string
	}{
		{"with a message", obj(aborted), "Degraded", "Healthy", `"Degraded" (its status.message: "RolloutAborted: Rollout aborted update to revision 2: Experiment analysis phase is error/failed: analysisruns.argoproj.io \"c-2-1-smoke\" not found")`},
		{"without one", obj(nil), "Degraded", "Healthy", `"Degraded"`},
		{"an empty one", obj(""), "Degraded", "Healthy", `"Degraded"`},
		{"not a string", obj(map[string]any{"a": "b"}), "Degraded", "Healthy", `"Degraded"`},
		{"the value wanted", obj(aborted), "Healthy", "Healthy", `"Healthy"`},
		{"a long one, cut", obj(strings.Repeat("x", 400)), "Degraded", "Healthy", `"Degraded" (its status.message: "` + strings.Repeat("x", maxStatusMessage) + `…")`},
	} {
		if got := shown(c.cur, c.value, c.want); got != c.shows {
			t.Errorf("%s: shown = %s, want %s", c.name, got, c.shows)
		}
	}
}
