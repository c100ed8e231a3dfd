# kewplan: the commands that matter. `make test` is what CI runs (.ci/run).
GO      ?= go
PKGS    ?= ./...
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build test bench bench-plan fmt vet test-deps runsc-setup

all: build

# Static (CGO_ENABLED=0): the same binary runs on the host and, as the egress proxy, in an image FROM scratch.
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/kewplan ./cmd/kewplan

vet:
	$(GO) vet $(PKGS)

# The tests build every image they need themselves (FROM scratch plus static Go binaries, or a debootstrap base
# cached in the engine by tag); nothing is pulled. test-deps installs the host tools they need from Debian's
# packages when they are missing (git for checkouts, debootstrap for the reference image's test base, chromium for
# the run report's headless browser test), and registers
# gVisor's runsc with the engine as the extra runtime "runsc" (scripts/runsc-setup.sh: Debian's package, one merged
# daemon.json entry, a reload; runc stays the default) for the isolation-tier tests. The telemetry tests build their
# OpenTelemetry Collector (internal/testtools/otelcol, a module of its own) once into ~/.cache/kewplan-otelcol.
test: test-deps vet
	$(GO) test -race -timeout 30m $(PKGS)

test-deps:
	@missing=""; \
	for tool in git:git debootstrap:debootstrap chromium:chromium $$(test -x $${KEWPLAN_K8S_CACHE:-$$HOME/.cache/kewplan-k8s}/v1.37.2/kubelet && echo containerd:containerd ctr:containerd ipset:ipset /usr/lib/cni/bridge:containernetworking-plugins); do \
	  command -v $${tool%%:*} >/dev/null 2>&1 || PATH="$$PATH:/usr/sbin:/sbin" command -v $${tool%%:*} >/dev/null 2>&1 || missing="$$missing $${tool##*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make test: installing$$missing from Debian's packages"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	fi
	@docker info >/dev/null 2>&1 || { echo "make test: no Docker engine answers (docker info failed); the integration tests need one." >&2; \
	  [ -z "$$CI" ] || exit 1; }
	@if docker info >/dev/null 2>&1; then scripts/runsc-setup.sh || { \
	  echo "make test: gVisor's runsc is not registered with the engine (scripts/runsc-setup.sh failed above); the runsc tests need it." >&2; \
	  [ -z "$$CI" ] || exit 1; }; fi

# gVisor's runsc as the engine's extra runtime "runsc" (docs/security.md: Isolation tiers). Idempotent; needs root.
runsc-setup:
	@scripts/runsc-setup.sh

# make bench's figures, each a ratio or a figure measured in one run (internal/testtools/benchplan): plan --json against
# hclsyntax.ParseConfig alone (plan/parse), peak memory (peak-MB), growth 10k/1k, validate/plan, start-up
# (wall-ms) and the saved plan's size; then every package's own benchmarks, then apply's (bench-apply).
BENCHTIME ?= 3x
bench: bench-plan
	$(GO) test -run '^$$' -bench . -benchmem $$($(GO) list $(PKGS) | grep -v internal/testtools/benchplan)

bench-plan:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -timeout 60m ./internal/testtools/benchplan

fmt:
	gofmt -w $$(git ls-files '*.go')

.PHONY: proxy-image

# kewplan's egress proxy image: the static kewplan binary FROM scratch, running `kewplan egress-proxy --config -`
# as nobody. The tag is the binary's hash (egress.ImageTag), the one apply looks for and builds when missing.
proxy-image: build
	@rm -rf bin/proxy-image && mkdir -p bin/proxy-image && cp bin/kewplan bin/proxy-image/kewplan
	@bin/kewplan egress-proxy --print-dockerfile > bin/proxy-image/Dockerfile
	@tag=$$(bin/kewplan egress-proxy --print-image-tag bin/kewplan) && \
	  DOCKER_BUILDKIT=0 docker build -q -t $$tag bin/proxy-image >/dev/null && echo "built $$tag"

.PHONY: demo-image bench-apply

# The demo agent's image (examples/demo): one static binary FROM scratch. Then run examples/demo/setup.sh.
demo-image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o examples/demo/agent/kew-demo-agent ./examples/demo/agent
	DOCKER_BUILDKIT=0 docker build -q -t kewplan-demo/agent:latest examples/demo/agent

# Apply's per-node overhead against a shell loop of `docker run` with the planned argv, serial and with
# --parallelism 4, and the per-node cost of gVisor's runsc against runc (KEWPLAN_BENCH_NODES nodes, default 8).
# `make bench` runs it too.
bench-apply:
	$(GO) test -run '^$$' -bench 'BenchmarkApplyVsDockerRun|BenchmarkApplyRunscVsRunc|BenchmarkApplyEgressOverhead' -benchtime 1x -timeout 30m ./executor

.PHONY: image test-base

# The reference images (docker/): they need Docker Hub (debian:bookworm-slim by digest), the Debian and NodeSource
# mirrors, GitHub (uv) and npm. Where no registry is reachable, use `make test-base` and the offline test variant.
IMAGE_AGENT    ?= kew-agent:latest
IMAGE_OPENCODE ?= kew-opencode:latest
image:
	@docker build -f docker/agent.Dockerfile --target agent -t $(IMAGE_AGENT) docker/ && \
	docker build -f docker/opencode.Dockerfile --target agent -t $(IMAGE_OPENCODE) docker/ || { \
	  echo "make image: the build failed. The reference images need a registry (Docker Hub) and the internet;" >&2; \
	  echo "without them, make test-base builds the offline test variants of the same Dockerfiles." >&2; exit 1; }
	$(GO) run ./cmd/kewplan smoke $(IMAGE_AGENT) --runner claude-code
	$(GO) run ./cmd/kewplan conform $(IMAGE_AGENT) --runner claude-code
	$(GO) run ./cmd/kewplan conform $(IMAGE_OPENCODE) --runner opencode

# The debootstrap base the smoke and conform tests build on (root and debootstrap needed, once per machine: the
# engine keeps it by the tag of its recipe's hash), and the offline test variants of docker/ on top of it.
test-base:
	$(GO) test -run '^TestConformTestImages$$' -v -count=1 -timeout 30m ./executor/conform

.PHONY: adversarial

# The adversarial suite: every attack and fault of the security checklist, tried against the real engine,
# then one table with totals. The suite's own tests write rows to $(ADV_DIR)/rows.jsonl; the tests that already
# covered an item are selected by name (internal/testtools/advreport's catalogue) and judged from `go test -json`.
ADV_DIR  ?= bin/adversarial
ADV_PKGS ?= ./executor/... ./egress ./runners ./budget ./views ./cmd/kewplan ./internal/redact ./transcript ./planfile ./config ./internal/money
adversarial:
	@mkdir -p $(ADV_DIR) && rm -f $(ADV_DIR)/rows.jsonl $(ADV_DIR)/events.json
	@KEWPLAN_ADV_REPORT=$(abspath $(ADV_DIR))/rows.jsonl $(GO) test -count=1 -json -timeout 30m \
	  -run '$(shell $(GO) run ./internal/testtools/advreport -pattern)' $(ADV_PKGS) > $(ADV_DIR)/events.json; \
	  status=$$?; \
	  $(GO) run ./internal/testtools/advreport -rows $(ADV_DIR)/rows.jsonl -events $(ADV_DIR)/events.json || status=1; \
	  echo "rows: $(ADV_DIR)/rows.jsonl, test events: $(ADV_DIR)/events.json"; \
	  exit $$status

.PHONY: fuzz

# Every fuzz target of the module (found with go test -list, so new targets join by themselves), one after another
# for FUZZTIME each with one worker (-parallel 1: the machine is shared). New crashers land in the package's
# testdata/fuzz/<Target>/ directory: fix the bug and commit the file, and every `go test` then replays it.
# FUZZ_PKGS narrows the packages, e.g. make fuzz FUZZ_PKGS=./config FUZZTIME=30s. FUZZMINIMIZETIME bounds the
# time a worker spends shrinking each new interesting input (Go's default, 60s, can eat a short run whole).
FUZZTIME         ?= 10m
FUZZMINIMIZETIME ?= 10s
FUZZ_PKGS        ?= ./...
fuzz:
	@$(GO) test -list '^Fuzz' $(FUZZ_PKGS) | \
	  awk '/^Fuzz/ { t[n++] = $$1; next } /^ok / { for (i = 0; i < n; i++) print $$2, t[i]; n = 0 }' | \
	  { status=0; while read -r pkg target; do \
	      echo "make fuzz: $$target ($$pkg) for $(FUZZTIME)"; \
	      $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) -parallel 1 $$pkg || status=1; \
	    done; exit $$status; }

.PHONY: k8s-binaries k8s-test

# The Kubernetes engine's end-to-end tests against a real kube-apiserver, etcd and kube-controller-manager
# on loopback. k8s-binaries builds them once into ${KEWPLAN_K8S_CACHE:-$HOME/.cache/kewplan-k8s}/v1.37.2/ (niced:
# 20 minutes on a quiet 2-core machine, about 3 hours on a crowded one); `make test` never builds them and skips these tests when they are
# not cached. KEWPLAN_K8S_E2E_CONTEXT=<kubeconfig context> runs the same tests against a real cluster instead.
k8s-binaries:
	@if [ -z "$$KEWPLAN_K8S_E2E_CONTEXT" ] && [ -z "$$KEWPLAN_K8S_BINARIES" ]; then internal/testtools/k8stools/build-binaries.sh; fi

k8s-test: k8s-binaries
	KEWPLAN_K8S_REQUIRE=1 $(GO) test -race -count=1 -timeout 20m ./k8srender ./k8sengine ./config ./cmd/kewplan -run 'Render|Kubernetes|JobOutcome|ReadVerdict|FollowLog|ApplyDelete|Preflight|E2E|ErrorFiles|TestScripts/render'
	KEWPLAN_K8S_REQUIRE=1 $(GO) test -race -count=1 -timeout 10m ./executor -run 'TestKubernetes'

.PHONY: k8s-node-binaries k8s-node-test k8s-node-up k8s-node-down

# A real single-node cluster on this machine (internal/testtools/k8snode): the control plane above plus
# kube-scheduler, a second containerd with its CRI plugin, the kubelet, kube-proxy and CoreDNS, in a network
# namespace of its own. k8s-node-binaries builds everything once (niced, tens of minutes the first time) into the
# same cache and installs the host packages the node needs; `make test` runs the node tests when the binaries are
# cached and skips them, saying so, when they are not. k8s-node-up starts the same node for trying kewplan by hand
# and prints its kubeconfig (KEWPLAN_K8S_IMAGES: more Docker images to import into it); k8s-node-down removes it.
K8S_NODE_PKGS := containerd runc containernetworking-plugins iptables ipset iproute2 util-linux debootstrap
k8s-node-binaries:
	@missing=""; for p in $(K8S_NODE_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "make k8s-node-binaries: installing$$missing from Debian's packages"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	internal/testtools/k8stools/build-binaries.sh all

k8s-node-test: k8s-node-binaries
	KEWPLAN_K8S_NODE_REQUIRE=1 $(GO) test -race -count=1 -timeout 30m -v ./executor/kubernetes -run 'TestNode'

k8s-node-up: k8s-node-binaries
	@$(GO) run ./internal/testtools/k8snode/cmd/k8s-node up

k8s-node-down:
	@$(GO) run ./internal/testtools/k8snode/cmd/k8s-node down
