package fuzz

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestReconcileMetricsNeverIdleWhileARetryIsDue walks the probe through a
// controller's life as its metrics endpoint shows it: idle only when nothing
// moved since the last look, nothing is in flight or queued, and the latest
// reconciles that moved were not errors.
func TestReconcileMetricsNeverIdleWhileARetryIsDue(t *testing.T) {
	type state struct {
		errors, success, requeueAfter, active, depth int
		idle                                         bool
		why                                          string
	}
	steps := []state{
		{0, 0, 0, 0, 0, false, "the first look has nothing to compare with"},
		{0, 0, 0, 0, 0, true, "nothing moved, nothing in flight or queued"},
		{0, 0, 0, 1, 1, false, "a reconcile in flight, an item queued"},
		{1, 0, 0, 0, 0, false, "a reconcile failed"},
		{1, 0, 0, 0, 0, false, "a retry is due after the failure: silent, not done"},
		{1, 0, 0, 0, 0, false, "still due"},
		{1, 0, 1, 0, 0, false, "the retry succeeded (requeue after a delay): counts moved"},
		{1, 0, 1, 0, 0, true, "done"},
		{1, 0, 1, 0, 1, false, "an event queued a request"},
		{1, 1, 1, 0, 0, false, "it succeeded: counts moved"},
		{1, 1, 1, 0, 0, true, "done"},
	}
	var cur state
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE controller_runtime_reconcile_total counter\n")
		fmt.Fprintf(w, "controller_runtime_reconcile_total{controller=\"gitrepository\",result=\"error\"} %d\n", cur.errors)
		fmt.Fprintf(w, "controller_runtime_reconcile_total{controller=\"gitrepository\",result=\"requeue\"} 0\n")
		fmt.Fprintf(w, "controller_runtime_reconcile_total{controller=\"gitrepository\",result=\"requeue_after\"} %d\n", cur.requeueAfter)
		fmt.Fprintf(w, "controller_runtime_reconcile_total{controller=\"gitrepository\",result=\"success\"} %d\n", cur.success)
		fmt.Fprintf(w, "# TYPE controller_runtime_active_workers gauge\ncontroller_runtime_active_workers{controller=\"gitrepository\"} %d\n", cur.active)
		fmt.Fprintf(w, "# TYPE workqueue_depth gauge\nworkqueue_depth{controller=\"gitrepository\",name=\"gitrepository\"} %d\n", cur.depth)
	}))
	defer srv.Close()
	probe := ReconcileMetrics(srv.URL)
	for i, st := range steps {
		cur = st
		idle, err := probe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if idle != st.idle {
			t.Fatalf("step %d (%s): idle = %v, want %v", i, st.why, idle, st.idle)
		}
	}
	srv.Close()
	if idle, err := probe(context.Background()); idle || err == nil {
		t.Errorf("an endpoint that does not answer: idle = %v, err = %v; want not idle and an error", idle, err)
	}
}
