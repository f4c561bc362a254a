# plexporter — build, run and test. `make run` and `make test` are all a
# newcomer needs; everything else is for working on the project.

GO        ?= go
# Static binaries: no dynamic loader or libc to allow in the plugin sandbox,
# and no 8 MiB pthread stacks counted against a plugin's memory limit.
export CGO_ENABLED ?= 0
BIN       := bin
TOOLS     := $(CURDIR)/$(BIN)/tools
PLUGINS   := $(notdir $(patsubst %/main.go,%,$(wildcard plugins/*/main.go)))
LISTEN    ?= 127.0.0.1:9880

# Pinned code generators (installed with `go install`, never downloaded as binaries).
BUF_VERSION                := v1.75.0
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
# The SDK's Go API check (`make proto-check`): golang.org/x/exp/cmd/apidiff.
APIDIFF_VERSION            := v0.0.0-20261113113407-e3970619a1a4
# Packaging tools (`make package`), pinned the same way.
NFPM_VERSION               := v2.45.2
CYCLONEDX_GOMOD_VERSION    := v1.10.0

VERSION  := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X github.com/prometheus/common/version.Version=$(VERSION) \
            -X github.com/prometheus/common/version.Revision=$(REVISION) \
            -X github.com/prometheus/common/version.Branch=main

.PHONY: all build collectors run demo test test-stress unit lint cross conformance proto proto-check sdk-api-check sdk-api-baseline tools bench clean package image-rootfs lab lab-bench python-example python-stubs python-stubs-check ebpf-generate-check

all: build

# Plugins built with cgo, dynamically linked against libc (the list and
# why: deploy/cgo-plugins). Every other binary stays static.
CGO_PLUGINS := $(strip $(shell sed -e 's/\#.*//' deploy/cgo-plugins))
CC ?= gcc

## build: bin/plexporter and bin/plugins/plexporter-<name> with each manifest,
##        and the example shared-object collector in bin/collectors
build: collectors
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/plexporter ./host
	@mkdir -p $(BIN)/plugins
	@set -e; for p in $(PLUGINS); do \
		echo "build plugin $$p"; \
		cgo=0; case " $(CGO_PLUGINS) " in *" $$p "*) cgo=1;; esac; \
		CGO_ENABLED=$$cgo $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/plugins/plexporter-$$p ./plugins/$$p; \
		if [ -f plugins/$$p/plexporter-$$p.yaml ]; then cp plugins/$$p/plexporter-$$p.yaml $(BIN)/plugins/; fi; \
	done

## collectors: the example C collector of sdk/cabi/examples, built as a
##             vendor builds one (sdk/cabi/README.md)
collectors:
	@mkdir -p $(BIN)/collectors
	$(CC) -shared -fPIC -O2 -Wall -Wextra -Werror -Isdk/cabi -o $(BIN)/collectors/libplexporter_loadavg.so sdk/cabi/examples/loadavg.c

## run: build, then serve on $(LISTEN) with the shipped plugins and the
##      shipped config (deploy/etc/plexporter.yml: its opt-ins to the
##      privileged plugins' capabilities matter as root, under the sandbox)
run: build
	./$(BIN)/plexporter --plugin.dir=./$(BIN)/plugins --config.file=deploy/etc/plexporter.yml --web.listen-address=$(LISTEN) $(RUN_ARGS)

## demo: the host and every shipped plugin, each in its manifest's sandbox
##       (as root; unsandboxed otherwise), over one node built from the
##       plugins' fixtures (internal/dev/demo), serving on $(LISTEN). The demo
##       plugins are built with -tags demo: they replay the captured answers
##       of the hardware the fixtures describe (ethtool and NVMe ioctls, RDMA
##       netlink) instead of asking this machine's kernel. plexporter-so loads
##       the example C collector (make collectors) over the node's loadavg
DEMO := $(BIN)/demo
demo: build
	@mkdir -p $(DEMO)/plugins
	@set -e; for p in $(PLUGINS); do \
		cgo=0; case " $(CGO_PLUGINS) " in *" $$p "*) cgo=1;; esac; \
		CGO_ENABLED=$$cgo $(GO) build -tags demo -ldflags '$(LDFLAGS)' -o $(DEMO)/plugins/plexporter-$$p ./plugins/$$p; \
		cp plugins/$$p/plexporter-$$p.yaml $(DEMO)/plugins/; \
	done
	$(GO) run ./internal/dev/demo -dir $(DEMO) -library $(BIN)/collectors/libplexporter_loadavg.so
	@[ "$$(id -u)" = 0 ] || echo "demo: not root, so the plugins run unsandboxed as you (as root, each runs in its manifest's sandbox)"
	./$(BIN)/plexporter --plugin.dir=./$(DEMO)/plugins $$(cat $(DEMO)/flags) --web.listen-address=$(LISTEN) $(RUN_ARGS)

## test: everything CI checks
test: lint cross proto-check unit conformance

## test-stress: the timing-sensitive packages with -count=3 while stress-ng
##              loads the machine (test/stress/run.sh; 30-60 min, not in CI;
##              results in docs/testing.md). PACKAGES, COUNT, STRESS, RUN
##              narrow it, e.g. make test-stress PACKAGES=./host/ COUNT=1
test-stress:
	GO=$(GO) test/stress/run.sh

## conformance: `plexporter plugin check` (docs/plugin-protocol.md, The
##              runner's rules) on every plugin the build makes, in its
##              manifest's sandbox (as root) and unconfined; the full report
##              of a plugin that breaks a rule, the verdict line otherwise.
##              CHECK_CONFIG spells out a setting of each shipped plugin so
##              that configure.wrong-type has a key to get wrong. Then the
##              Python example (skipped without python3-grpcio unless
##              PLEXPORTER_REQUIRE_PYTHON is set, as CI does) and plexporter-so
##              loading the example C collector, as an operator installs one:
##              an instance symlink plexporter-so-loadavg with a manifest that
##              grants the collector directory, and a config naming the
##              library (both generated: they need absolute paths)
CHECK_CONFIG := host/internal/conformance/testdata/plugins.yml
CHECK_SO := $(BIN)/conformance-so
conformance: build
	@set -e; check() { \
		for mode in auto off; do \
			if ! out=$$($(BIN)/plexporter plugin check --log.level=warn --sandbox=$$mode --config=$$1 $$2 2>&1); then \
				echo "$$out"; echo "conformance: $$2 (--sandbox=$$mode) breaks the plugin protocol"; exit 1; \
			fi; \
			echo "$$out" | tail -1; \
		done; \
	}; \
	for b in $(BIN)/plugins/plexporter-*; do \
		case $$b in *.yaml) continue;; esac; \
		check $(CHECK_CONFIG) $$b; \
	done; \
	if $(PYTHON3) -c 'import grpc, google.protobuf' 2>/dev/null; then \
		$(MAKE) --no-print-directory python-example; \
		check $(CHECK_CONFIG) $(BIN)/python/plexporter-pyexample; \
	elif [ -n "$$PLEXPORTER_REQUIRE_PYTHON" ]; then \
		echo "conformance: $(PYTHON3) lacks grpc or protobuf (python3-grpcio, python3-protobuf) and PLEXPORTER_REQUIRE_PYTHON is set"; exit 1; \
	else \
		echo "conformance: the Python example skipped: $(PYTHON3) lacks grpc or protobuf (python3-grpcio, python3-protobuf)"; \
	fi; \
	rm -rf $(CHECK_SO); mkdir -p $(CHECK_SO); \
	ln -s $(abspath $(BIN))/plugins/plexporter-so $(CHECK_SO)/plexporter-so-loadavg; \
	printf 'description: plexporter-so with the example collector, for make conformance\ncapabilities: []\npaths:\n  read_only: ["%s", "{procfs}/loadavg"]\n  read_write: []\n  devices: []\nlimits: {memory: 128MiB, nofile: 64}\nenv: []\n' \
		$(abspath $(BIN))/collectors > $(CHECK_SO)/plexporter-so-loadavg.yaml; \
	printf 'plugins:\n  so-loadavg:\n    config: {library: "%s", collector: {path: /proc/loadavg}}\n' \
		$(abspath $(BIN))/collectors/libplexporter_loadavg.so > $(CHECK_SO)/plexporter.yml; \
	check $(CHECK_SO)/plexporter.yml $(CHECK_SO)/plexporter-so-loadavg

## cross: the whole tree builds for arm64 (Grace-class AI nodes), and the SDK
##        and plugins build on macOS (vendors develop plugins on laptops)
cross:
	GOOS=linux GOARCH=arm64 $(GO) build ./...
	GOOS=linux GOARCH=arm64 $(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) build ./sdk/... ./plugins/...

unit:
	@# -timeout: the deploy package builds every release binary twice (the
	@# packages, and the reproducibility check's copy, which shares the build
	@# cache); it once passed 30 minutes on a 2-core machine at load 13
	@# (beside stress-ng, when the check's cache was empty), so the safety
	@# net is an hour
	$(GO) test -count=1 -timeout 60m ./...
	@# the concurrent core again under the race detector (needs cgo)
	CGO_ENABLED=1 $(GO) test -count=1 -race ./sdk/ ./sdk/fixture/ ./sdk/metricfilter/ ./internal/wire/ ./internal/guard/ ./host/internal/expose/ ./host/internal/scrape/ ./host/internal/supervise/ ./host/internal/push/
	@# plexporter-so's in-process tests load real shared objects (dlopen needs cgo)
	CGO_ENABLED=1 $(GO) test -count=1 -race -skip '^(TestBadCollectorsCostTheirInstanceOnly|TestConformanceWithTheExampleCollector)$$' ./plugins/so/
	@# nixl drains rings in the background while scrapes read its sums, and
	@# decodes files any process may write: the race detector, then a short
	@# fuzz run of the ring decoder beyond its seeds. Fuzz budgets are counts,
	@# not durations: Go 1.26's fuzz coordinator can report a duration's end
	@# as "context deadline exceeded" and fail (golang/go#75804, fixed in 1.27)
	CGO_ENABLED=1 $(GO) test -count=1 -race -short ./plugins/nixl/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 50000x ./plugins/nixl/
	@# guest's kmsg tailer and statfs runner run beside the scrapes:
	@# the race detector, then a short fuzz run of the tailer's record split
	CGO_ENABLED=1 $(GO) test -count=1 -race -short ./plugins/guest/
	$(GO) test -run '^$$' -fuzz '^FuzzTailerSplit$$' -fuzztime 100000x ./plugins/guest/
	@# probe's prober runs beside the scrapes: the race detector
	CGO_ENABLED=1 $(GO) test -count=1 -race -short ./plugins/probe/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@# the demo builds of the plugins (make demo) replay captures
	$(GO) vet -tags demo ./plugins/...

tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/apidiff
$(TOOLS)/buf:
	GOBIN=$(TOOLS) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(TOOLS)/apidiff:
	GOBIN=$(TOOLS) $(GO) install golang.org/x/exp/cmd/apidiff@$(APIDIFF_VERSION)

## bench: build, then run the performance harness (internal/dev/bench,
##        ~8 min on 2 cores, 5 of them scenario 8): medians and same-run ratios
##        as markdown on stdout and between the markers of docs/performance.md
##        (its hand-written sections are kept). Harness flags go in
##        BENCH_FLAGS, e.g. BENCH_FLAGS='-scenarios 1 -sizes 100000', or
##        BENCH_FLAGS='-scenarios 8 -out=' (textfile vs node_exporter only, to stdout).
BENCH_FLAGS ?=
bench: build
	@mkdir -p $(BIN)/bench
	$(GO) build -o $(BIN)/bench/plexporter-chaos ./internal/testkit/testplugins/chaos
	$(GO) build -o $(BIN)/bench/plexporter-bench ./internal/dev/bench/benchplugin
	$(GO) run ./internal/dev/bench -bin $(BIN) $(BENCH_FLAGS)

## ebpf-generate-check: compile plugins/ebpf's BPF programs again with the
##              pinned clang (plugins/ebpf/bpf/CLANG_VERSION) and fail if the
##              committed *_bpfel.{go,o} differ. A developer check, not part of
##              test: CI builds from the committed objects, without clang
ebpf-generate-check:
	bash plugins/ebpf/bpf/generate-check.sh

## proto: regenerate the committed Go code from proto/
proto: tools
	PATH=$(TOOLS):$$PATH $(TOOLS)/buf generate

## python-example: the Python example plugin (examples/python), packed into
##                 one executable with its stubs, and its manifest, in
##                 $(BIN)/python: ./$(BIN)/plexporter --plugin.dir=$(BIN)/python
python-example:
	@mkdir -p $(BIN)/python
	examples/python/package.sh $(BIN)/python/plexporter-pyexample
	cp examples/python/plexporter-pyexample.yaml $(BIN)/python/

## python-stubs: regenerate the Python example's stubs (examples/python)
##               from proto/ with Debian's python3-grpc-tools
PYTHON3 ?= /usr/bin/python3
PY_STUBS = $(PYTHON3) -m grpc_tools.protoc -Iproto --python_out=$(1) --grpc_python_out=$(1) proto/plexporter/plugin/v1/plugin.proto
python-stubs:
	$(call PY_STUBS,examples/python)

## python-stubs-check: fail if the Python example's committed stubs are not
##                     what proto/ generates; skipped without grpc_tools
##                     unless PLEXPORTER_REQUIRE_PYTHON is set (CI sets it)
python-stubs-check:
	@if ! $(PYTHON3) -c 'import grpc_tools' 2>/dev/null; then \
		if [ -n "$$PLEXPORTER_REQUIRE_PYTHON" ]; then \
			echo "python-stubs-check: $(PYTHON3) has no grpc_tools (Debian package python3-grpc-tools) and PLEXPORTER_REQUIRE_PYTHON is set"; exit 1; \
		fi; \
		echo "python-stubs-check: skipped, $(PYTHON3) has no grpc_tools (install python3-grpc-tools)"; exit 0; \
	fi; \
	tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(call PY_STUBS,$$tmp) && \
	if ! diff -r -x __pycache__ $$tmp/plexporter examples/python/plexporter >/dev/null; then \
		echo "the Python stubs in examples/python are stale: run 'make python-stubs' and commit"; \
		diff -r -x __pycache__ $$tmp/plexporter examples/python/plexporter | head -20; exit 1; \
	fi; echo "Python stubs are up to date"

## proto-check: buf lint; buf breaking against every released protocol in
##              proto/baseline (the wire rules of buf.yaml); the SDK's Go API
##              against sdk/baseline (sdk-api-check, below); and fail if the
##              committed generated code (Go, and the Python example's) is stale
proto-check: tools python-stubs-check
	PATH=$(TOOLS):$$PATH $(TOOLS)/buf lint
	@set -e; ls proto/baseline/*.binpb >/dev/null 2>&1 || \
		{ echo "no protocol baseline in proto/baseline (proto/baseline/README.md)"; exit 1; }; \
	for b in proto/baseline/*.binpb; do \
		if ! PATH=$(TOOLS):$$PATH $(TOOLS)/buf breaking --against $$b; then \
			echo "proto/ breaks the wire protocol of the release in $$b: a v1 change keeps field numbers, wire types and RPCs (docs/plugin-protocol.md, Versioning); anything else is a plexporter.plugin.v2 package"; \
			exit 1; \
		fi; \
		echo "wire-compatible with $$b"; \
	done
	@$(MAKE) --no-print-directory sdk-api-check
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
		PATH=$(TOOLS):$$PATH $(TOOLS)/buf generate -o $$tmp && \
		if ! diff -r $$tmp/proto/plexporter proto/plexporter -x '*.proto' >/dev/null; then \
			echo "generated code in proto/ is stale: run 'make proto' and commit"; \
			diff -r $$tmp/proto/plexporter proto/plexporter -x '*.proto' | head -20; exit 1; \
		fi; echo "generated code is up to date"

## sdk-api-check: (part of proto-check) fail if the SDK's Go API (every
##                package of ./sdk/... but internal ones) drops or changes
##                anything the baseline in sdk/baseline exports, by apidiff;
##                additions pass (sdk/baseline/README.md)
## sdk-api-baseline: write sdk/baseline from today's SDK, for a release
SDK_MODULE := github.com/plexporter/plexporter
SDK_API_PACKAGES = $(shell $(GO) list ./sdk/... | grep -v /internal)
sdk-api-check: $(TOOLS)/apidiff
	@set -e; ls sdk/baseline/*.export >/dev/null 2>&1 || \
		{ echo "no SDK API baseline in sdk/baseline (sdk/baseline/README.md)"; exit 1; }; \
	for b in sdk/baseline/*.export; do \
		pkg=$(SDK_MODULE)/$$(basename $$b .export | tr - /); \
		out=$$($(TOOLS)/apidiff -incompatible $$b $$pkg 2>&1) || { echo "$$pkg: $$out"; exit 1; }; \
		if [ -n "$$out" ]; then \
			echo "$$pkg breaks the SDK API of $$b (a plugin built against it would not compile):"; echo "$$out"; \
			echo "keep what is exported and add beside it; a break waits for the SDK's next major version (sdk/baseline/README.md)"; \
			exit 1; \
		fi; \
		echo "API-compatible with $$b"; \
	done
sdk-api-baseline: $(TOOLS)/apidiff
	@mkdir -p sdk/baseline; rm -f sdk/baseline/*.export
	@set -e; for pkg in $(SDK_API_PACKAGES); do \
		f=sdk/baseline/$$(echo $${pkg#$(SDK_MODULE)/} | tr / -).export; \
		$(TOOLS)/apidiff -w $$f $$pkg; echo "wrote $$f"; \
	done

## package: the .deb packages (host + one per plugin), reproducible, each
##          with a CycloneDX SBOM, in bin/packages (deploy/README.md)
package: $(TOOLS)/nfpm $(TOOLS)/cyclonedx-gomod
	GO=$(GO) NFPM=$(TOOLS)/nfpm CYCLONEDX=$(TOOLS)/cyclonedx-gomod \
		VERSION=$(VERSION) REVISION=$(REVISION) deploy/package.sh
$(TOOLS)/nfpm:
	GOBIN=$(TOOLS) $(GO) install -trimpath github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)
$(TOOLS)/cyclonedx-gomod:
	@# -trimpath: the SBOMs record this tool's own hash, which must not depend
	@# on where the module cache is
	GOBIN=$(TOOLS) $(GO) install -trimpath github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)

## lab: the real-kernel lab (test/lab/README.md): Debian's kernel under QEMU
##      (TCG), the project's packages installed in the guest, each plugin
##      checked against the real kernel; TAP results, failed checks named.
##      Skipped when QEMU cannot start unless PLEXPORTER_REQUIRE_LAB=1 (CI)
lab:
	GO=$(GO) test/lab/run.sh

## lab-bench: make lab, then in the guest the rdma plugin against Debian's
##            node_exporter on the kernel's rxe devices at three paces
##            and the plugin on a tmpfs copy of that sysfs (CPU per scrape;
##            bin/lab/bench.md). Opt-in, never in
##            CI: it adds about 4.5 min of TCG time. LAB_RXE sets the devices
lab-bench:
	LAB_BENCH=1 GO=$(GO) test/lab/run.sh

## image-rootfs: the container image's file tree in bin/image-rootfs, the
##               build context of deploy/Dockerfile (FROM scratch)
image-rootfs:
	GO=$(GO) VERSION=$(VERSION) REVISION=$(REVISION) deploy/image-rootfs.sh

clean:
	rm -rf $(BIN)
