# Paddock — run `make` (or `make help`) for the list of targets.
SHELL := /bin/bash
GO    ?= go
BIN   := bin
PLUGINS := $(BIN)/plugins
export CGO_ENABLED ?= 0

.DEFAULT_GOAL := help

.PHONY: help build run test test-short fuzz-smoke bench bench-quick lint proto image clean ui

help: ## Show this help
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build paddock, agentctl, the demo agent and the runtime plugins into bin/
	@mkdir -p $(BIN) $(PLUGINS)
	$(GO) build -o $(BIN)/ ./cmd/...
	@for p in $(wildcard plugins/*/main.go); do \
		d=$$(dirname $$p); n=$$(basename $$d); \
		echo "$(GO) build -o $(PLUGINS)/paddock-runtime-$$n ./$$d"; \
		$(GO) build -o $(PLUGINS)/paddock-runtime-$$n ./$$d || exit 1; \
	done

run: build ## Start one node on ./config.hcl (data under ./data)
	$(BIN)/paddock server -config config.hcl

# gotest runs go test $(1) with TMPDIR, and so every test's temporary
# directories and the processes it starts in them, under a fresh directory.
# Each test ends what it started; after the run whatever still runs there
# (a test that timed out runs no cleanup) is killed and listed, the
# directory is removed and go test's exit status is kept. It is 0711, as
# /tmp is traversable: tests run agents as another user (run_as_user) in
# workspaces under it.
define gotest
tmp=$$(mktemp -d /tmp/pdt.XXXXXX) && chmod 711 $$tmp && rc=0 && echo "go test $(1) (TMPDIR=$$tmp)" && \
	{ TMPDIR=$$tmp PADDOCK_BIN=$(CURDIR)/$(BIN) $(GO) test $(1) || rc=$$?; } && \
	{ $(GO) run ./bench/cmd/leftovers $$tmp || true; } && rm -rf $$tmp && [ $$rc = 0 ]
endef

test: build ## Run the whole test suite (what CI runs)
	$(GO) vet ./...
	@$(call gotest,-count=1 -timeout 25m ./...)
	@# Stopping dockerd disturbs every other engine user, so this one runs alone.
	@if [ -n "$$PADDOCK_REQUIRE_DOCKER" ]; then \
		echo "docker engine restart test (runs alone)"; \
		export PADDOCK_DOCKER_ENGINE_RESTART=1; \
		( $(call gotest,-count=1 -run '^TestEngineRestart$$' ./plugins/docker/dockerexec/) ) || exit 1; \
		( $(call gotest,-count=1 -run '^TestDockerEngineStoppedDuringSupervisorRestart$$' ./e2e/) ) || exit 1; \
	fi
	$(MAKE) fuzz-smoke

FUZZTIME ?= 3s
fuzz-smoke: ## Run every fuzz target briefly (FUZZTIME each)
	@grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read f; do \
		for fn in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | cut -d' ' -f2); do \
			echo "fuzz $$(dirname $$f) $$fn"; \
			PADDOCK_BIN=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$(dirname $$f) >/tmp/paddock-fuzz.log 2>&1 || \
			{ grep -q 'context deadline exceeded' /tmp/paddock-fuzz.log && ! grep -q 'Failing input' /tmp/paddock-fuzz.log && \
			  echo "  (the fuzzer's workers did not stop at -fuzztime's end, no failing input: once more)" && \
			  PADDOCK_BIN=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$(dirname $$f) >/tmp/paddock-fuzz.log 2>&1; } || \
			{ cat /tmp/paddock-fuzz.log; exit 1; }; \
		done; \
	done

test-short: ## Unit tests only (no process clusters)
	$(GO) test -short -count=1 ./...

bench: build ## Run every benchmark and write docs/BENCHMARKS.md
	PADDOCK_BIN=$(CURDIR)/$(BIN) $(GO) run ./bench/cmd/bench -out docs/BENCHMARKS.md -json bench/results.json

bench-quick: build ## A reduced benchmark run (< 5 minutes)
	PADDOCK_BIN=$(CURDIR)/$(BIN) $(GO) run ./bench/cmd/bench -quick -out bench/tmp/BENCHMARKS-quick.md -json bench/tmp/results-quick.json

lint: ## go vet and staticcheck
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.7.0 ./...

image: build ## Build the executor image paddock-executor:dev and the supervisor image paddock:dev (FROM scratch; needs docker and busybox-static)
	deploy/image/build.sh -b $(BIN)
	deploy/image/build-supervisor.sh -b $(BIN)

ui: ## Rebuild the web UI bundle ui/dist (needs Node and npm; the bundle is committed and embedded)
	cd ui && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm run --silent build

proto: ## Regenerate gRPC code from shared/runtime/proto
	$(MAKE) -C shared/runtime/proto

clean: ## Remove build output
	rm -rf $(BIN)
