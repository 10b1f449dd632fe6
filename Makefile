# Every check the project has. CONTRIBUTING.md explains each target.
GO ?= go
GANTRY_CACHE ?= $(HOME)/.cache/gantry
export GANTRY_CACHE

.PHONY: all build run test test-short controlplane vet fmt-check generate manifests deploy bench

all: build

build:
	$(GO) build -o bin/gantry ./cmd/gantry

# Gantry's main job on one machine: the Cypress paper matrix in the simulator.
run: build
	./bin/gantry sim --experiment paper --out out/paper

# Builds the pinned etcd, kube-apiserver, kube-controller-manager, kube-scheduler
# and kwok into $(GANTRY_CACHE) once; later calls reuse the cache.
controlplane:
	./hack/build-controlplane.sh

# The README's test command: every test, race detector on, against a real
# control plane.
test: controlplane vet fmt-check
	$(GO) test -race -count=1 -timeout 60m ./...

# Unit tests only: skips the tests that need the control plane.
test-short:
	$(GO) test -race -short ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
