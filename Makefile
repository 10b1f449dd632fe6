# Every check the project has. CONTRIBUTING.md explains each target.
GO ?= go
GANTRY_CACHE ?= $(HOME)/.cache/gantry
export GANTRY_CACHE

.PHONY: all build build-local run paper test test-short controlplane knative vet fmt-check generate manifests render deploy bench bench-queue bench-sim

all: build

# bin/gantry-fn is the example functions' slim runtime: the local runtime
# runs it for "gantry fn ..." when it is beside bin/gantry (fast cold starts).
# One go build for both, so their packages compile in one parallel graph.
build:
	$(GO) build -o bin/ ./cmd/gantry ./examples/functions/cmd/gantry-fn

# bin/gantry without the commands that need Kubernetes (cluster, controller,
# node, bench queue/orchestration/e2e, serve --backend kubernetes and
# --knative-ingress answer that make build has them): about 490 packages
# instead of 1580 (internal/cli/build.go). make build replaces it.
build-local:
	$(GO) build -tags gantry_local -o bin/ ./cmd/gantry ./examples/functions/cmd/gantry-fn

# Gantry's main job on one machine: serve the example functions on the
# local process runtime, drive an app with load, and report (out/up/).
# It needs only the local build, which compiles in a third of the time.
run: build-local
	./bin/gantry up --out out/up

# The Cypress paper matrix in the simulator (out/paper/).
paper: build
	./bin/gantry sim --experiment paper --out out/paper

# Builds the pinned etcd, kube-apiserver, kube-controller-manager, kube-scheduler
# and kwok into $(GANTRY_CACHE) once; later calls reuse the cache.
controlplane:
	./hack/build-controlplane.sh

# Builds Knative Serving's controller, webhook, autoscaler, activator and
# queue-proxy (hack/knative pins the version) and assembles its manifests
# into $(GANTRY_CACHE)/knative once; `gantry cluster up --knative` runs them.
knative:
	./hack/build-knative.sh

# The README's test command: every test, race detector on, against a real
# control plane (and Knative on it: pkg/knativeinstall's test).
test: controlplane knative vet fmt-check
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

# Enqueue-to-start latency of critical events (docs/engine.md).
bench-queue: build
	./bin/gantry bench queue --duration 5s --workers 5,20

# Gateway overhead beside the OpenFaaS gateway (docs/benchmarks.md), then
# 5000 requests/s sustained through the gateway with the generator, gateway
# and instance in three processes (docs/platform.md); builds the pinned
# OpenFaaS gateway into $(GANTRY_CACHE) once.
.PHONY: bench-gateway
bench-gateway: build
	./hack/build-openfaas.sh >/dev/null
	./bin/gantry bench gateway --out out/bench-gateway
	./bin/gantry bench gateway --sustain 5000 --duration 60s --gomaxprocs 2 --out out/bench-gateway-sustain

# PREEMPT-FaaS RQ1 on the local control plane, Gantry beside vanilla
# Kubernetes (docs/benchmarks.md); QUICK=1 runs --quick (under 4 minutes).
.PHONY: bench-orchestration
bench-orchestration: build controlplane
	./bin/gantry bench orchestration $(if $(QUICK),--quick) --out out/bench-orchestration

# PREEMPT-FaaS RQ2 (docs/benchmarks.md, "End-to-end latency under churn").
.PHONY: bench-e2e
bench-e2e: build controlplane
	./bin/gantry bench e2e $(if $(QUICK),--quick) --out out/bench-e2e

# Cold starts on the local runtime (docs/platform.md, "Cold starts"): a
# minimal Go server, the example functions under gantry-fn and under gantry
# fn, with readiness polling and with the socket passed; builds the floor
# server and gantry-fn into $(GANTRY_CACHE)/coldstart.
.PHONY: bench-coldstart
bench-coldstart: build
	./bin/gantry bench coldstart --runs 200

# The simulator against the live platform with the model-replay function
# (docs/platform.md, "Simulator against live"): about 8 minutes per policy.
.PHONY: bench-simlive
bench-simlive: build
	./bin/gantry bench simlive --app email-categorization --policy gantry --rate 10 --duration 90s --start-delay 1.5s --capacity 64 --runs 5 --out out/simlive/gantry
	./bin/gantry bench simlive --app email-categorization --policy cypress --rate 10 --duration 90s --start-delay 1.5s --capacity 64 --runs 5 --out out/simlive/cypress

# Every named policy but the clairvoyant oracle, on two apps (a chain and a
# single function), each under Poisson load and the bursty twitter trace,
# with the same settings as bench-simlive, one folder a cell in
# $(SIMLIVE_ALL)/APP-TRACE-POLICY/, then one summary table of every cell
# ($(SIMLIVE_ALL)/summary.md and summary.json). About 8 minutes a cell:
# 32 cells, over 4 hours on 2 cores; not run by CI (make test). A failed
# cell is a row of the summary and fails the target after the summary; an
# interrupt stops the current cell cleanly and ends the target.
# Set SIMLIVE_POLICIES, SIMLIVE_APPS, SIMLIVE_TRACES, SIMLIVE_RUNS or
# SIMLIVE_DURATION to run part of it.
SIMLIVE_POLICIES ?= atoll commercial knative kraken fifer isbatch cypress gantry
SIMLIVE_APPS ?= email-categorization sentiment-analysis
SIMLIVE_TRACES ?= poisson twitter
SIMLIVE_RUNS ?= 5
SIMLIVE_DURATION ?= 90s
SIMLIVE_ALL ?= out/simlive/all
.PHONY: bench-simlive-all
bench-simlive-all: build
	@trap 'echo "bench-simlive-all: interrupted"; exit 130' INT TERM; dirs=""; failed=""; \
	for app in $(SIMLIVE_APPS); do for tr in $(SIMLIVE_TRACES); do for p in $(SIMLIVE_POLICIES); do \
		d=$(SIMLIVE_ALL)/$$app-$$tr-$$p; rm -rf $$d; dirs="$$dirs $$d"; \
		echo "== $$p on $$app, $$tr trace: $$d"; \
		./bin/gantry bench simlive --app $$app --trace $$tr --policy $$p --rate 10 --duration $(SIMLIVE_DURATION) --start-delay 1.5s --capacity 64 \
			--runs $(SIMLIVE_RUNS) --out $$d >/dev/null || failed="$$failed $$d"; \
	done; done; done; \
	./bin/gantry bench simlive --summarize --out $(SIMLIVE_ALL) $$dirs; \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

# The controller's container image, built offline: a static gantry binary
# at /gantry in one layer over an empty base (hack/image), written as an OCI
# layout archive to $(IMAGE_OUT) for docker/podman load, ctr images import
# or kind load image-archive. IMAGE names it (config/manager uses
# gantry:latest); IMAGE_DIR=path also writes the layout as a folder.
IMAGE ?= gantry:latest
IMAGE_OUT ?= $(GANTRY_CACHE)/image/gantry.tar
.PHONY: image
image:
	@mkdir -p $(GANTRY_CACHE)/image
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags='-s -w' -o $(GANTRY_CACHE)/image/gantry ./cmd/gantry
	$(GO) run ./hack/image --binary $(GANTRY_CACHE)/image/gantry --arch $$($(GO) env GOARCH) --tag $(IMAGE) --out $(IMAGE_OUT) $(if $(IMAGE_DIR),--oci-dir $(IMAGE_DIR))

# Simulator and policy-core figures quoted in docs/simulator.md.
bench-sim:
	$(GO) test -run '^$$' -bench 'Throughput|Memory' -benchtime 2x ./pkg/sim
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/batch ./pkg/predict
	$(GO) test -run '^$$' -bench GantryAblations -benchtime 1x ./pkg/sim

# Regenerates api/v1alpha1/zz_generated.deepcopy.go and the CRD in
# config/crd/bases (controller-gen is a go tool of the module);
# TestGeneratedFilesAreCurrent fails when they are stale.
generate:
	$(GO) generate ./api/...

manifests: generate

# Renders config/default (namespace, CRD, RBAC, controller, APF) with the
# module's kustomize into out/gantry.yaml.
render: manifests
	@mkdir -p out
	$(GO) tool kustomize build config/default > out/gantry.yaml
	@echo "rendered out/gantry.yaml"

# Applies the rendered manifests to $$KUBECONFIG with the pinned kubectl.
deploy: render controlplane
	$$(ls $(GANTRY_CACHE)/controlplane/*/bin/kubectl | head -n1) apply --server-side -f out/gantry.yaml
