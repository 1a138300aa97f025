# stalefuzz — targets carry "## help" text; logic lives in hack/*.sh or Go.
SHELL := /usr/bin/env bash
GO ?= go

.PHONY: help assets test bench lint
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

assets: ## build kube-apiserver and etcd from Go modules into the envtest store (idempotent; ~7 min cold)
	@hack/assets.sh >/dev/null

test: assets ## run every test, against a real apiserver
	$(GO) test -count=1 ./...

bench: assets ## print the proxy's throughput and latency figures against a direct connection
	$(GO) test -run='^$$' -bench=. -benchtime=20x ./proxy/

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

.PHONY: demo
demo: assets ## main job until the fuzz engine lands: a stale cache behind the proxy meets a real 409
	$(GO) test -count=1 -run='^Example_staleWrite$$' -v ./proxy/
