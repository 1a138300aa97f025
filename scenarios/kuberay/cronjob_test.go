package kuberay_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

// sharedTick reads the count oracle's "had N live RayJobs sharing
// annotation:ray.io/cronjob-scheduled-timestamp at once".
var sharedTick = regexp.MustCompile(`had ([0-9]+) live RayJobs sharing annotation:ray\.io/cronjob-scheduled-timestamp at once`)

// TestKubeRayCronJobDuplicateTick is the regression row of kuberay#4849 at
// v1.6.2, the release targets/cronjob.yaml runs (README.md, "Recall:
// kuberay#4849"): the RayCronJob controller creates a tick's RayJob, then
// writes status.lastScheduleTime; the next reconcile, triggered at once by
// that RayJob's ADDED event (Owns), reads a cached RayCronJob without the
// write and creates the tick's RayJob again under another random name
// (raycronjob_controller.go:64, :104-125 at v1.6.2). Its saved input holds the
// controller's RayCronJob events from just before its first write of one
// (the campaigns' reference seed 0): two RayJobs or more for one tick, in
// the first of up to three runs as a rule. The fix (kuberay#4888,
// testdata/recall/pr4888.patch, deterministic names) is verified by
// stalefuzz replay, not here: it needs a second build of the operator.
func TestKubeRayCronJobDuplicateTick(t *testing.T) {
	tg, env := target.LoadEnv(t, "targets/cronjob.yaml")
	sched, err := tg.Input("testdata/recall-4849-seed.input")
	if err != nil {
		t.Fatal(err)
	}
	twice := func(res *fuzz.Result) bool {
		for _, v := range res.Violations {
			if m := sharedTick.FindStringSubmatch(v.Message); v.Oracle == "count" && m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil && n >= 2 {
					return true
				}
			}
		}
		return false
	}
	res, runs, err := env.RunUntil(context.Background(), sched, 3, twice, fuzz.Retries(3))
	if err != nil {
		t.Fatalf("schedule %s: %v", sched, err)
	}
	if !twice(res) {
		t.Fatalf("schedule %s: no tick with two RayJobs in %d runs; violations %v", sched, runs, res.Violations)
	}
	t.Logf("schedule %s: a tick's RayJob created twice or more in run %d", sched, runs)
}
