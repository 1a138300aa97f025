package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// TestIndexedJobExample: the Indexed Job that runs a campaign in shards is
// accepted by the real apiserver (a server-side dry run), each pod's shard
// taken from JOB_COMPLETION_INDEX out of as many as the Job's completions.
func TestIndexedJobExample(t *testing.T) {
	b, err := os.ReadFile("../../../hack/shard/indexed-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(b, &job); err != nil {
		t.Fatalf("hack/shard/indexed-job.yaml: %v", err)
	}
	cp, _ := startControlPlane(t)
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	job.Namespace = "default"
	got, err := cs.BatchV1().Jobs("default").Create(context.Background(), &job, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("the apiserver refused hack/shard/indexed-job.yaml: %v", err)
	}
	if got.Spec.CompletionMode == nil || *got.Spec.CompletionMode != batchv1.IndexedCompletion || *got.Spec.Completions != 4 {
		t.Errorf("want an Indexed Job of 4 completions, got %v completions in mode %v", got.Spec.Completions, got.Spec.CompletionMode)
	}
	args := got.Spec.Template.Spec.Containers[0].Args[0]
	if want := `--shard "$JOB_COMPLETION_INDEX/4"`; !strings.Contains(args, want) {
		t.Errorf("the pod's command %q does not pass %s", args, want)
	}
}

// TestGitHubActionsExample: the workflow's matrix runs one job per shard,
// 0 to SHARDS-1, each passing its own --shard K/SHARDS, and the merge job
// copies every shard's corpus and findings.
func TestGitHubActionsExample(t *testing.T) {
	b, err := os.ReadFile("../../../hack/shard/github-actions.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Env  map[string]string
		Jobs map[string]struct {
			Strategy struct{ Matrix struct{ Shard []int } }
			Steps    []struct{ Run string }
		}
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("hack/shard/github-actions.yml: %v", err)
	}
	n, err := strconv.Atoi(wf.Env["SHARDS"])
	if err != nil {
		t.Fatalf("env SHARDS %q: %v", wf.Env["SHARDS"], err)
	}
	shards := wf.Jobs["fuzz"].Strategy.Matrix.Shard
	if len(shards) != n {
		t.Errorf("matrix shards %v: want 0..%d", shards, n-1)
	}
	for i, k := range shards {
		if k != i {
			t.Errorf("matrix shards %v: want 0..%d", shards, n-1)
		}
	}
	var runs []string
	for _, st := range wf.Jobs["fuzz"].Steps {
		runs = append(runs, st.Run)
	}
	if all := strings.Join(runs, "\n"); !strings.Contains(all, `--shard "${{ matrix.shard }}/$SHARDS"`) || !strings.Contains(all, "--corpus corpus") {
		t.Errorf("the fuzz job's steps do not pass --shard K/SHARDS and --corpus: %s", all)
	}
	var merge []string
	for _, st := range wf.Jobs["merge"].Steps {
		merge = append(merge, st.Run)
	}
	if all := strings.Join(merge, "\n"); !strings.Contains(all, "corpus/* merged/corpus/") {
		t.Errorf("the merge job does not copy the shards' corpora: %s", all)
	}
}
