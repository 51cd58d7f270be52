# Strata: `make help` lists the targets. Everything runs as root on a Debian
# or Ubuntu machine with Go 1.26; Debian packages and Go tools are installed
# on first use.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
BIN := $(CURDIR)/bin
OAPI_CODEGEN_VERSION := v2.8.2
GOLANGCI_LINT_VERSION := v2.15.0
OAPI_CODEGEN := $(BIN)/oapi-codegen-$(OAPI_CODEGEN_VERSION)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Slurm releases the integration tests run on; one test bed each.
SLURM_VERSIONS ?= 26.05 24.11
TESTBED := test/testbed/slurm/testbed.sh
TB_STATE ?= /var/lib/strata/testbed
TESTBED_ENVS = $(foreach v,$(SLURM_VERSIONS),$(TB_STATE)/s$(subst .,,$(v))/env)
DEMO_INST = $(TB_STATE)/s$(subst .,,$(firstword $(SLURM_VERSIONS)))
DEB_PACKAGES := debootstrap zstd curl jq ca-certificates prometheus

.PHONY: help
help: ## show this help
	@echo "Strata make targets (quick start: make demo, then make test):"
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sort | \
		awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## install the Debian packages the test beds need (root)
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $$missing >/dev/null; \
	fi
	@$(GO) version | grep -qE 'go1\.(2[6-9]|[3-9][0-9])' || { echo "Go 1.26 or later is needed (found: $$($(GO) version))"; exit 1; }

# Tools are built into a private folder, then moved to a versioned name with
# a plain-name link beside it.
$(OAPI_CODEGEN):
	@mkdir -p $(BIN)/.build
	GOBIN=$(BIN)/.build $(GO) install github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@$(OAPI_CODEGEN_VERSION)
	mv -f $(BIN)/.build/oapi-codegen $@ && ln -sfn $(notdir $@) $(BIN)/oapi-codegen

$(GOLANGCI_LINT):
	@mkdir -p $(BIN)/.build
	GOBIN=$(BIN)/.build $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv -f $(BIN)/.build/golangci-lint $@ && ln -sfn $(notdir $@) $(BIN)/golangci-lint

.PHONY: tools
tools: $(OAPI_CODEGEN) $(GOLANGCI_LINT) ## install the pinned Go tools into ./bin

.PHONY: build
build: ## compile every package, the binaries (into ./bin) and the demo
	$(GO) build ./...
	$(GO) build -o $(BIN)/topogen ./topogen/cmd/topogen
	$(GO) build -o $(BIN)/reclaimd ./reclaimd/cmd/reclaimd
	$(GO) build -o $(BIN)/strata-policy ./policy/cmd/strata-policy
	$(GO) build -o $(BIN)/strata-demo ./test/demo

.PHONY: generate
generate: generate-slurmrest ## regenerate all generated code

.PHONY: generate-slurmrest
generate-slurmrest: $(OAPI_CODEGEN) ## regenerate the slurmrestd clients from the captured specs
	$(GO) run ./internal/slurmrest/cmd/specprep -parser v0.0.42 \
		-in internal/slurmrest/spec/raw/slurm-24.11.json -out internal/slurmrest/spec/v0.0.42.json
	$(GO) run ./internal/slurmrest/cmd/specprep -parser v0.0.45 \
		-in internal/slurmrest/spec/raw/slurm-26.05.json -out internal/slurmrest/spec/v0.0.45.json
	cd internal/slurmrest/v0042 && $(OAPI_CODEGEN) -config oapi-codegen.yaml ../spec/v0.0.42.json
	cd internal/slurmrest/v0045 && $(OAPI_CODEGEN) -config oapi-codegen.yaml ../spec/v0.0.45.json

.PHONY: test-unit
test-unit: $(OAPI_CODEGEN) ## unit tests: no network, no services (race detector on)
	OAPI_CODEGEN=$(OAPI_CODEGEN) $(GO) test -race -count=1 ./...

.PHONY: testbed-up
testbed-up: deps ## start one Slurm test bed per SLURM_VERSIONS (fresh state)
	@pids=""; for v in $(SLURM_VERSIONS); do SLURM_VERSION=$$v bash $(TESTBED) build & pids="$$pids $$!"; done; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; exit $$rc
	@pids=""; for v in $(SLURM_VERSIONS); do SLURM_VERSION=$$v bash $(TESTBED) up --fresh & pids="$$pids $$!"; done; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; exit $$rc

.PHONY: testbed-down
testbed-down: ## stop the test beds
	@for v in $(SLURM_VERSIONS); do SLURM_VERSION=$$v bash $(TESTBED) down; done

.PHONY: testbed-status
testbed-status: ## show the test beds' daemons
	@for v in $(SLURM_VERSIONS); do SLURM_VERSION=$$v bash $(TESTBED) status || true; done

.PHONY: test-integration
test-integration: testbed-up $(OAPI_CODEGEN) ## integration tests on a real Slurm of every SLURM_VERSIONS
	OAPI_CODEGEN=$(OAPI_CODEGEN) STRATA_TESTBEDS="$(TESTBED_ENVS)" $(GO) test -race -count=1 -tags integration -timeout 20m ./...

.PHONY: test
test: test-unit test-integration ## every test: unit, then integration on the test beds

.PHONY: capture-slurmrest
capture-slurmrest: deps ## re-capture the OpenAPI specs and replay records from fresh test beds
	$(MAKE) testbed-up SLURM_VERSIONS="26.05 24.11"
	for v in 2605 2411; do bash test/testbed/slurm/capture-openapi.sh $(TB_STATE)/s$$v/env internal/slurmrest/spec/raw; done
	rm -rf internal/slurmrest/testdata/replay
	STRATA_TESTBEDS="$(TB_STATE)/s2605/env $(TB_STATE)/s2411/env" $(GO) test -count=1 -tags integration \
		-run TestCapture ./internal/slurmrest/ -capture $(CURDIR)/internal/slurmrest/testdata/replay

.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt, go vet and golangci-lint
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	$(GOLANGCI_LINT) run ./...
	$(GOLANGCI_LINT) run --build-tags integration ./...
	@# systemd units: every complaint except the binary that is not installed here
	@out=$$(systemd-analyze verify packaging/systemd/*.service packaging/systemd/*.timer 2>&1 | grep -v 'Command /usr/bin/[a-z-]* is not executable' || true); \
		if [ -n "$$out" ]; then echo "$$out"; exit 1; fi

.PHONY: bench
bench: ## benchmarks (topogen on real and generated fabrics; reclaimd's decide on 1,000 nodes x 8 GPUs)
	$(GO) test -run '^$$' -bench . -benchtime 5x -cpu 1 ./topogen/... ./reclaimd/...

.PHONY: demo
demo: deps ## start a local Slurm 26.05 with fake GPUs and show it working
	$(MAKE) --no-print-directory testbed-up SLURM_VERSIONS=$(firstword $(SLURM_VERSIONS))
	$(GO) build -o $(BIN)/topogen ./topogen/cmd/topogen
	$(GO) run ./test/demo -env $(DEMO_INST)/env -topogen-dir $(DEMO_INST)/demo
	@echo; echo "== topogen plan: what topogen would change in the cluster's topology.conf for that fabric"
	@rc=0; $(BIN)/topogen -c $(DEMO_INST)/demo/topogen.yaml --log-level warn plan || rc=$$?; \
		echo "(topogen plan exited $$rc: 0 = up to date, 2 = changes; apply them with: $(BIN)/topogen -c $(DEMO_INST)/demo/topogen.yaml apply)"; \
		[ $$rc = 0 ] || [ $$rc = 2 ]
	$(GO) build -o $(BIN)/reclaimd ./reclaimd/cmd/reclaimd
	$(GO) build -o $(BIN)/strata-policy ./policy/cmd/strata-policy
	@echo; echo "== strata-policy: the example tenant policy, checked, and the reclaim rules it renders for reclaimd"
	@$(BIN)/strata-policy check --policy etc/strata/policy.yaml
	@$(BIN)/strata-policy render --policy etc/strata/policy.yaml -o $(DEMO_INST)/demo --slurm-dir $(DEMO_INST)/demo/slurm
	@echo; echo "== reclaimd simulate: the example rules over a recorded trace (what reclaim would do before it acts)"
	@$(BIN)/reclaimd simulate --rules reclaimd/internal/simulate/testdata/example-rules.json --step 1m \
		--jobs reclaimd/internal/simulate/testdata/example.jobs.csv --samples reclaimd/internal/simulate/testdata/example.samples.csv

.PHONY: ci
ci: lint test ## what CI runs: lint and every test

.PHONY: clean
clean: ## remove build outputs (the cached test-bed roots stay)
	rm -rf $(BIN) dist
