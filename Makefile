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
