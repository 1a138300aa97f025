# stalefuzz — targets carry "## help" text; logic lives in hack/*.sh or Go.
SHELL := /usr/bin/env bash
GO ?= go

.PHONY: help assets source-controller deps test test-volume bench trace-memory lint upstream-tests
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

assets: ## build kube-apiserver, etcd, kube-controller-manager and kube-scheduler from Go modules into the envtest store (idempotent; ~7 min cold, +2-6 min for kube-controller-manager, +1 min for kube-scheduler)
	@hack/assets.sh >/dev/null

source-controller: ## build FluxCD source-controller v1.9.3 from its Go module, as scenarios/fluxcd/target.yaml declares it, and download its CRDs (idempotent; ~5 min cold)
	@$(GO) run ./proxy/cmd/stalefuzz prepare --controllers-only scenarios/fluxcd/target.yaml

deps: ## install the system packages the tests need (git; chromium for the report page's browser test and hack/screenshot.sh)
	@hack/deps.sh

test: deps assets source-controller ## run every test against a real apiserver, one package at a time (timing-sensitive specs share no CPU), the scenarios' controllers built beside fuzz/ and proxy/ at nice 19 (hack/test.sh); installs what it needs first
	@# -p 1 would also compile on one core: build every test binary first, on all of them.
	$(GO) test -count=1 -run='^$$' ./... >/dev/null
	GO=$(GO) hack/test.sh

test-volume: deps assets source-controller ## what make test leaves out to fit CI (STALEFUZZ_VOLUME=1): the scenarios' statistics (19 in 20, hundreds of random schedules), truth tables, each fix's control (the controller built with its patch of fix/), and the CLI's go test -fuzz campaign
	STALEFUZZ_VOLUME=1 $(GO) test -count=1 -p 1 -timeout=120m ./scenarios/... ./proxy/cmd/stalefuzz/

bench: assets ## print the proxy's throughput and latency figures against a direct connection, then under load (100 informers over 5,000 ConfigMaps through stalefuzz proxy), and where the proxy's CPU and allocations go per event (from its profiles)
	$(GO) test -run='^$$' -bench=. -benchtime=20x ./proxy/
	$(GO) test -run='^$$' -bench=ProxyUnderLoad -benchtime=1x -timeout=15m ./proxy/cmd/stalefuzz/

UPSTREAM = hack/upstream-test.sh
KUBERAY_TEST = github.com/ray-project/kuberay/ray-operator@v1.6.2 controllers/ray scenarios/kuberay/testdata/upstream/raycluster_lost_head_create_test.go
KUBERAY_RESTART_TEST = github.com/ray-project/kuberay/ray-operator@v1.6.2 controllers/ray scenarios/kuberay/testdata/upstream/raycluster_restart_stale_list_test.go
KEDA_SCALE_JOBS_TEST = github.com/kedacore/keda/v2@v2.21.0 pkg/scaling/executor scenarios/keda/testdata/upstream/scale_jobs_cache_behind_test.go
KEDA_FIRST_POLL_TEST = github.com/kedacore/keda/v2@v2.21.0 controllers/keda scenarios/keda/testdata/upstream/scaledjob_first_poll_cache_behind_test.go
KEDA_STATUS_TEST = github.com/kedacore/keda/v2@v2.21.0 pkg/scaling scenarios/keda/testdata/upstream/scale_handler_status_cache_behind_test.go
CERTMANAGER_TEST = github.com/cert-manager/cert-manager@v1.21.2 pkg/controller/certificates/keymanager scenarios/certmanager/testdata/upstream/keymanager_status_conflict_test.go
PROMOP_TEST = github.com/prometheus-operator/prometheus-operator@v0.93.0 pkg/operator scenarios/prometheusoperator/testdata/upstream/resource_reconciler_tombstone_test.go
CERTMANAGER_TRIGGER_TEST = github.com/cert-manager/cert-manager@v1.21.2 pkg/controller/certificates/trigger scenarios/certmanager/testdata/upstream/trigger_secret_cache_behind_test.go
ARGO_JOB_TEST = github.com/argoproj/argo-rollouts@v1.10.2 metricproviders/job scenarios/argorollouts/testdata/upstream/job_resume_cache_behind_test.go
NODELIFECYCLE_TEST = --published v0.37.1 k8s.io/kubernetes@v1.37.1 pkg/controller/nodelifecycle scenarios/kcm/testdata/upstream/node_lifecycle_lease_written_test.go
upstream-tests: assets ## each new finding's test in its project's own style, run inside the release's module: it must fail at the release and pass with the fix (minutes: a build per project)
	$(UPSTREAM) --expect fail $(KUBERAY_TEST) -run 'TestReconcile_HeadPodCreateAnswerLost/generated'
	$(UPSTREAM) --expect pass $(KUBERAY_TEST) -run 'TestReconcile_HeadPodCreateAnswerLost/deterministic'
	$(UPSTREAM) --expect pass --patch scenarios/kuberay/fix/expect-unacknowledged-head.patch $(KUBERAY_TEST) -run 'TestReconcile_HeadPodCreateAnswerLost'
	$(UPSTREAM) --expect fail $(KUBERAY_RESTART_TEST) -run 'TestReconcile_HeadPodAfterRestartOntoStaleList/generated'
	$(UPSTREAM) --expect pass $(KUBERAY_RESTART_TEST) -run 'TestReconcile_HeadPodAfterRestartOntoStaleList/deterministic'
	$(UPSTREAM) --expect pass --patch scenarios/kuberay/fix/recheck-live-pods.patch $(KUBERAY_RESTART_TEST) -run 'TestReconcile_HeadPodAfterRestartOntoStaleList'
	$(UPSTREAM) --expect fail $(KUBERAY_RESTART_TEST) -run 'TestReconcile_WorkerPodsAfterRestartOntoStaleList'
	$(UPSTREAM) --expect pass --patch scenarios/kuberay/fix/recheck-live-pods.patch $(KUBERAY_RESTART_TEST) -run 'TestReconcile_WorkerPodsAfterRestartOntoStaleList'
	$(UPSTREAM) --expect fail $(PROMOP_TEST) -run 'TestOnDeleteStatefulSetTombstone'
	$(UPSTREAM) --expect pass --patch scenarios/prometheusoperator/fix/tombstone.patch $(PROMOP_TEST) -run 'TestOnDeleteStatefulSetTombstone'
	$(UPSTREAM) --expect fail $(CERTMANAGER_TEST) -run 'TestProcessItem_StatusConflictAfterSecretCreate'
	$(UPSTREAM) --expect pass --patch scenarios/certmanager/fix/adopt-unrecorded-key.patch $(CERTMANAGER_TEST) -run 'TestProcessItem_StatusConflictAfterSecretCreate'
	$(UPSTREAM) --expect fail $(CERTMANAGER_TRIGGER_TEST) -run 'Test_controller_ProcessItem_SecretCacheBehind'
	@# With the fix, the package's every test (the patch updates two of them: a decision to re-issue now reads the Secret).
	$(UPSTREAM) --expect pass --patch scenarios/certmanager/fix/recheck-live-secret.patch $(CERTMANAGER_TRIGGER_TEST)
	$(UPSTREAM) --expect fail $(KEDA_SCALE_JOBS_TEST) -run 'TestRequestJobScale_CreatedJobsNotYetInCache'
	@# With the fix, the package's every test.
	$(UPSTREAM) --expect pass --patch scenarios/keda/fix/expect-created-jobs.patch $(KEDA_SCALE_JOBS_TEST)
	KUBEBUILDER_ASSETS=$$(. hack/versions.sh && envtest_assets_dir) $(UPSTREAM) --expect fail $(KEDA_FIRST_POLL_TEST) -run 'TestScaledJobFirstPollJobsNotDeletedAsPreviousVersion' -count=1
	KUBEBUILDER_ASSETS=$$(. hack/versions.sh && envtest_assets_dir) $(UPSTREAM) --expect pass --patch scenarios/keda/fix/finalizer-patch.patch $(KEDA_FIRST_POLL_TEST) -run 'TestScaledJobFirstPollJobsNotDeletedAsPreviousVersion' -count=1
	$(UPSTREAM) --expect fail $(KEDA_STATUS_TEST) -run 'TestHandleResult_CachedObjectBehindKeepsConditions'
	@# With the fix, the package's every test.
	$(UPSTREAM) --expect pass --patch scenarios/keda/fix/status-patch-precondition.patch $(KEDA_STATUS_TEST)
	@# The status fix touches the controllers package's setup too: its envtest suite, with both KEDA controller fixes.
	KUBEBUILDER_ASSETS=$$(. hack/versions.sh && envtest_assets_dir) $(UPSTREAM) --expect pass --patch scenarios/keda/fix/finalizer-patch.patch --patch scenarios/keda/fix/status-patch-precondition.patch $(KEDA_FIRST_POLL_TEST) -count=1
	$(UPSTREAM) --expect fail $(NODELIFECYCLE_TEST) -run 'TestMonitorNodeHealthLeaseWrittenWithoutRenewal'
	@# With the fix, the package's every test: the circuit breaker's own included.
	$(UPSTREAM) --expect pass --patch scenarios/kcm/fix/compare-cached-lease.patch $(NODELIFECYCLE_TEST)
	@# Argo Rollouts v1.10.2's go.mod asks for go 1.26.10: GOTOOLCHAIN=auto fetches it.
	GOTOOLCHAIN=auto $(UPSTREAM) --expect fail $(ARGO_JOB_TEST) -run 'TestResumeJobNotYetInInformer'
	@# With the fix, the package's every test.
	GOTOOLCHAIN=auto $(UPSTREAM) --expect pass --patch scenarios/argorollouts/fix/job-resume-live-get.patch $(ARGO_JOB_TEST)
	@echo "upstream-tests: every finding's test fails at its release, and passes with its fix where one is built"

TRACE_MEMORY_FOR ?= 30m
trace-memory: assets ## the standalone proxy's memory (RSS, Go heap) every minute for TRACE_MEMORY_FOR (default 30m) at 100 watch events a second, its trace written as it grows and kept in memory
	@hack/trace-memory.sh $(TRACE_MEMORY_FOR)

lint: ## gofmt, and go vet for this platform and for macOS (darwin/arm64: the library builds there; no file of the module is per architecture, so darwin/amd64 would check nothing more)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@arch=$$(git ls-files '*.go' | grep -E '_(amd64|arm64|386|arm|riscv64|ppc64le|s390x)(_test)?\.go$$' || true); if [ -n "$$arch" ]; then echo "files per architecture: vet them for darwin/amd64 too:"; echo "$$arch"; exit 1; fi
	$(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...

.PHONY: recall recall-argo recall-argo-experiment recall-kcm recall-certmanager recall-promop truth-table false-alarms-targets fuzz-target false-alarms sweep-figures picture demo fuzz fuzz-fluxcd-lag fuzz-fluxcd-loss fuzz-contention fuzz-figures fuzz-kcm kcm-figures truth-table-kcm truth-table-nodelifecycle truth-table-nodezones truth-table-kuberay
picture: deps assets ## replay the README's finding, check its picture in headless Chromium, render it to scenarios/contention/finding.png
	@hack/picture.sh

demo: assets ## a stale cache behind the proxy meets a real 409, in one small example
	$(GO) test -count=1 -run='^Example_staleWrite$$' -v ./proxy/

FUZZTIME ?= 3m
fuzz: deps assets source-controller ## main job: campaigns over faults a real cluster produces (FluxCD source-controller, then the contention controller), FUZZTIME (default 3m) each, from an empty corpus; prints findings and figures
	@hack/fuzz.sh FuzzFluxGitRepositoryRealistic ./scenarios/fluxcd/ $(FUZZTIME)
	@hack/fuzz.sh FuzzContentionRealisticBlind ./scenarios/contention/ $(FUZZTIME)

fuzz-fluxcd-lag: deps assets source-controller ## the FluxCD campaign over lag only (FUZZTIME)
	@hack/fuzz.sh FuzzFluxGitRepository ./scenarios/fluxcd/ $(FUZZTIME)

fuzz-fluxcd-loss: deps assets source-controller ## the FluxCD campaign over lag and silent loss, which no real cluster produces (FUZZTIME)
	@hack/fuzz.sh FuzzFluxGitRepositoryLoss ./scenarios/fluxcd/ $(FUZZTIME)

fuzz-contention: assets ## a bounded campaign (FUZZTIME) on the contention scenario's blind variant with two replicas; prints the finding
	@hack/fuzz.sh FuzzContentionBlind ./scenarios/contention/ $(FUZZTIME)

fuzz-figures: deps assets source-controller ## per target, 5 campaigns from an empty corpus: median time to a finding, seed or mutator, execs/min, an execution's time by phase
	@hack/fuzz-figures.sh FuzzContentionBlind ./scenarios/contention/ 5 120s
	@hack/fuzz-figures.sh FuzzContentionRealisticBlind ./scenarios/contention/ 5 300s
	@hack/fuzz.sh FuzzContentionRealisticOptimistic ./scenarios/contention/ 3m
	@hack/fuzz-figures.sh FuzzFluxGitRepositoryAnchoredLoss ./scenarios/fluxcd/ 5 90s
	@hack/fuzz-figures.sh FuzzFluxGitRepositoryLoss ./scenarios/fluxcd/ 5 5m

FALSE_ALARM_TIME ?= 5m
false-alarms: deps assets source-controller ## campaigns that must find nothing, on a machine saturated by 2 busy loops: the FluxCD realistic and the contention optimistic targets, FALSE_ALARM_TIME each; every finding is a false alarm (a slow machine judged as a bug)
	@hack/loaded.sh 2 hack/fuzz.sh FuzzFluxGitRepositoryRealistic ./scenarios/fluxcd/ $(FALSE_ALARM_TIME)
	@hack/loaded.sh 2 hack/fuzz.sh FuzzContentionRealisticOptimistic ./scenarios/contention/ $(FALSE_ALARM_TIME)

SWEEP_EXECUTIONS ?= 1000
sweep-figures: assets ## SWEEP_EXECUTIONS (default 1000) executions of the contention scenario in one Env: executions a minute in each tenth of the run, and what is left in the apiserver afterwards (each execution's namespace is swept away)
	STALEFUZZ_SWEEP_FIGURES=$(SWEEP_EXECUTIONS) $(GO) test -count=1 -run='^TestSweepFigures$$' -v -timeout=2h ./scenarios/contention/

KCM_TARGET ?= FuzzJobGateOff
fuzz-kcm: assets ## a campaign (FUZZTIME) on kube-controller-manager's Job controller with its KEP-5647 gate off; KCM_TARGET=Fuzz{Job,ReplicaSet,DaemonSet,StatefulSet}Gate{Off,On}, FuzzNodeLifecycleGate{Off,On} or FuzzNodeZones picks another
	@hack/fuzz.sh $(KCM_TARGET) ./scenarios/kcm/ $(FUZZTIME)

KCM_RUNS ?= 5
KCM_BUDGET ?= 120s
kcm-figures: assets ## per kube-controller-manager controller, gate off and on: median time to a finding from an empty corpus (KCM_RUNS campaigns of KCM_BUDGET)
	@for c in Job ReplicaSet DaemonSet StatefulSet; do for g in Off On; do \
		echo "== Fuzz$${c}Gate$${g}"; hack/fuzz-figures.sh Fuzz$${c}Gate$${g} ./scenarios/kcm/ $(KCM_RUNS) $(KCM_BUDGET); done; done

truth-table-nodelifecycle: assets ## the node lifecycle controller's truth table (each pattern 3 times, NodeControllerLeaseCircuitBreaker off and on) into scenarios/kcm/nodelifecycle-truth-table.md
	STALEFUZZ_NODE_TRUTH_TABLE=$(CURDIR)/scenarios/kcm/nodelifecycle-truth-table.md $(GO) test -count=1 -run=TestKCM -v -timeout=60m ./scenarios/kcm/ -ginkgo.focus='node lifecycle truth table'

truth-table-nodezones: assets ## the node lifecycle controller over two zones (nodes lost, back, joining, leaving): each pattern twice under each workload into scenarios/kcm/nodezones-truth-table.md
	STALEFUZZ_NODEZONES_TRUTH_TABLE=$(CURDIR)/scenarios/kcm/nodezones-truth-table.md $(GO) test -count=1 -run=TestKCM -v -timeout=60m ./scenarios/kcm/ -ginkgo.focus='node zones truth table'

truth-table-kcm: assets ## the kube-controller-manager truth table (each pattern with the gate off and on) into scenarios/kcm/truth-table.md
	STALEFUZZ_TRUTH_TABLE=$(CURDIR)/scenarios/kcm/truth-table.md $(GO) test -count=1 -run=TestKCM -v ./scenarios/kcm/ -ginkgo.label-filter=truth-table

truth-table-kuberay: assets ## KubeRay's truth table (each realistic fault pattern under each action, ENABLE_DETERMINISTIC_HEAD_POD_NAME off and on, STALEFUZZ_TRUTH_TABLE_RUNS (default 3) runs a cell) into scenarios/kuberay/truth-table.md
	STALEFUZZ_TRUTH_TABLE=$(CURDIR)/scenarios/kuberay/truth-table.md $(GO) test -count=1 -run='^TestTruthTable$$' -v -timeout=60m ./scenarios/kuberay/

TARGET ?= scenarios/pymirror/target.yaml
fuzz-target: assets ## a campaign (FUZZTIME) on a target file (TARGET, default the Python example scenarios/pymirror/target.yaml) with the stalefuzz command, as a controller author runs it
	$(GO) run ./proxy/cmd/stalefuzz fuzz $(TARGET) --time $(FUZZTIME)

RECALL_RUNS ?= 5
RECALL_TIME ?= 10m
recall: assets ## the recall method of issue 31 on a target file (TARGET) at another release (VERSION, e.g. v1.9.1): a copy with its pinned versions replaced, RECALL_RUNS (5) campaigns of RECALL_TIME (10m) from an empty corpus, each to its first finding (RECALL_FLAGS=--search-on for all); prints the table's figures (hack/recall.sh)
	@hack/recall.sh $(TARGET) $(VERSION) $(RECALL_RUNS) $(RECALL_TIME)

recall-argo: ## Argo Rollouts' positive control, argo-rollouts#4073 at v1.9.1 and v1.10.2 with the workflows target (scenarios/argorollouts/README.md, "Recall")
	@$(MAKE) --no-print-directory recall TARGET=scenarios/argorollouts/targets/workflows.yaml VERSION=v1.9.1
	@$(MAKE) --no-print-directory recall TARGET=scenarios/argorollouts/targets/workflows.yaml VERSION=v1.10.2

recall-argo-experiment: ## Argo Rollouts' positive controls in experiments, argo-rollouts#4804 (an AnalysisRun missing from the cache) and #4842 (a ReplicaSet's AlreadyExists with the cache still without it) at v1.9.1 and v1.10.2 with targets/experiment.yaml (scenarios/argorollouts/README.md, "Recall: experiments")
	@$(MAKE) --no-print-directory recall TARGET=scenarios/argorollouts/targets/experiment.yaml VERSION=v1.9.1
	@$(MAKE) --no-print-directory recall TARGET=scenarios/argorollouts/targets/experiment.yaml VERSION=v1.10.2

KCM_RECALL ?= job replicaset daemonset
recall-kcm: ## kube-controller-manager's positive controls, KEP-5647's fixes (kubernetes#137210 Job, #137212 ReplicaSet, #134937 DaemonSet) at v1.35.4 and v1.37.1 with targets/$(KCM_RECALL).yaml (scenarios/kcm/README.md, "Recall"; KCM_RECALL=job for one); RECALL_KNOWN=scenarios/kcm/targets/testdata/known-restarts.yaml searches past the restart duplicate (not the method)
	@for t in $(KCM_RECALL); do for v in v1.35.4 v1.37.1; do $(MAKE) --no-print-directory recall TARGET=scenarios/kcm/targets/$$t.yaml VERSION=$$v || exit 1; done; done

recall-certmanager: assets ## cert-manager's positive control, cert-manager#4956 (two CertificateRequests for one revision after a lost answer) at v1.12.14 and v1.13.0 (StableCertificateRequestName on by default): the target file without its known findings, its controller main built against each release (hack/recall-certmanager.sh; RECALL_SUPPLEMENTARY=1 keeps the known findings: the hunt's file as it is, not the method) (scenarios/certmanager/README.md, "Recall")
	hack/recall-certmanager.sh

# GONOSUMDB: the checksum database the module proxy here answers for does
# not list v0.86.1 (404); the proxy serves its zip, which go then trusts
# without a sumdb line (v0.86.2 and v0.87.0, the releases either side of
# the fix, are refused outright: 403).
recall-promop: assets ## prometheus-operator's positive control, prometheus-operator#8028 (concurrent binding patches on a ServiceMonitor's status overwrite each other) at v0.86.1 and v0.87.1 with targets/bindings.yaml (scenarios/prometheusoperator/README.md, "Recall")
	@for v in v0.86.1 v0.87.1; do GONOSUMDB=github.com/prometheus-operator $(MAKE) --no-print-directory recall TARGET=scenarios/prometheusoperator/targets/bindings.yaml VERSION=$$v || exit 1; done

TRUTH_TABLE_RUNS ?= 2
TRUTH_TABLE_SETTINGS ?= 0
TRUTH_TABLE_OUT ?= $(dir $(TARGET))patterns.md
truth-table: assets ## a target file's truth table (TARGET; TRUTH_TABLE_RUNS runs a cell, default 2; TRUTH_TABLE_SETTINGS knob settings, default 0: all) into TRUTH_TABLE_OUT (default patterns.md beside it): each realistic one-fault pattern at each knob setting
	$(GO) run ./proxy/cmd/stalefuzz truth-table $(TARGET) --runs $(TRUTH_TABLE_RUNS) --settings $(TRUTH_TABLE_SETTINGS) --out $(TRUTH_TABLE_OUT)

FALSE_ALARMS ?= 200
false-alarms-targets: assets ## per committed target file (and the node lifecycle scenario, per gate value), FALSE_ALARMS (default 200) executions under ordinary latency only (and, with FALSE_ALARMS_ANSWERS="lose slow ...", under each fault on answers besides; FALSE_ALARMS_TARGETS="kuberay keda" for some targets only, FALSE_ALARMS_ANSWERS_ONLY=1 for the answers only), each violation triaged as a race (a finding) or the controller's nondeterminism (a false alarm); prints a table, keeps every alarm's files and replay command (hack/false-alarms-targets.sh)
	@hack/false-alarms-targets.sh $(FALSE_ALARMS)
