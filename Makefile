# kewplan: the commands that matter. `make test` is what CI runs (.ci/run).
GO      ?= go
PKGS    ?= ./...
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build test bench fmt vet

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/kewplan ./cmd/kewplan

vet:
	$(GO) vet $(PKGS)

# The tests build every image they need themselves (FROM scratch plus static Go binaries, or a debootstrap base
# cached in the engine by tag); nothing is pulled.
test: vet
	$(GO) test -race -timeout 30m $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

.PHONY: demo-image bench-apply

# The demo agent's image (examples/demo): one static binary FROM scratch. Then run examples/demo/setup.sh.
demo-image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o examples/demo/agent/kew-demo-agent ./examples/demo/agent
	DOCKER_BUILDKIT=0 docker build -q -t kewplan-demo/agent:latest examples/demo/agent

# Apply's per-node overhead against a shell loop of `docker run` with the planned argv, serial and with
# --parallelism 4 (KEWPLAN_BENCH_NODES nodes, default 8). `make bench` runs it too.
bench-apply:
	$(GO) test -run '^$$' -bench 'BenchmarkApplyVsDockerRun' -benchtime 1x -timeout 30m ./executor

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
	$(GO) test -run '^TestConformTestImages$$' -v -count=1 -timeout 30m ./executor
