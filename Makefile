GO ?= go
BIN := bin
PROTO_DIR := api/proto
PROTOS := $(wildcard $(PROTO_DIR)/dex/v1/*.proto)
# The Raft log's commands (Go only: no Worker library reads the log).
FSM_PROTOS := $(wildcard $(PROTO_DIR)/dex/fsm/v1/*.proto)
FUZZTIME ?= 60s
TESTFLAGS ?= -race -timeout 10m

.PHONY: certify-examples chaos-adapters build build-go worker-typescript-if-npm test test-python proto-python chaos-python run proto fuzz bench bench-scale vet clean election-time chaos takeover soak worker-typescript test-typescript chaos-typescript

# The Go binaries, then the Python and TypeScript demo Workers (the
# TypeScript one only where npm is installed: build-go needs Go alone).
build: build-go $(BIN)/dexworker-python worker-typescript-if-npm

build-go:
	$(GO) build -o $(BIN)/ ./cmd/...

worker-typescript-if-npm:
	@if command -v npm >/dev/null; then $(MAKE) worker-typescript; \
	else echo "npm not found: skipping the TypeScript Worker (bin/dexworker-typescript); the Go binaries are built"; fi

vet:
	$(GO) vet ./...

test: vet
	$(GO) test $(TESTFLAGS) ./...
	$(MAKE) test-python
	$(MAKE) test-typescript

# A local 3-node cluster in the foreground; Ctrl-C stops it. PORT_BASE=8000
# moves its ports, DATA=DIR its data (scripts/run-local.sh).
run: build
	BIN=$(BIN) scripts/run-local.sh

fuzz:
	$(GO) test ./fsm -run '^$$' -fuzz FuzzApply -fuzztime $(FUZZTIME)

bench:
	scripts/busy.sh $(GO) test ./fsm -run '^$$' -bench 'Apply$$' -benchtime 2000x -benchmem
	scripts/busy.sh $(GO) test ./fsm -run '^$$' -bench MemdbFloor -benchmem
	scripts/busy.sh $(GO) test ./fsm -run '^$$' -bench ApplyBatch -benchtime 100x
	scripts/busy.sh $(GO) test ./fsm -run '^$$' -bench State100k -benchtime 1x
	scripts/busy.sh $(GO) test ./dispatch -run '^$$' -bench . -benchmem
	scripts/busy.sh $(GO) test ./cluster -run '^$$' -bench Propose -benchtime 3000x
	$(GO) build -o $(BIN)/ ./cmd/dexd ./cmd/dexbench
	$(BIN)/dexbench --bin $(BIN) --runs 3 $(BENCHFLAGS)

# dexbench at scale, each three times (medians last): a 1,000-session burst;
# the default run beside 10,000 idle sessions; 100 sessions one at a time
# (unloaded dispatch latency).
bench-scale:
	$(GO) build -o $(BIN)/ ./cmd/dexd ./cmd/dexbench
	$(BIN)/dexbench --bin $(BIN) --runs 3 --sessions 1000 $(BENCHFLAGS)
	$(BIN)/dexbench --bin $(BIN) --runs 3 --idle-sessions 10000 $(BENCHFLAGS)
	$(BIN)/dexbench --bin $(BIN) --runs 3 --sequential 100 $(BENCHFLAGS)

# The crash matrix (docs/crash-matrix.md): every row against every fault on real dexd and
# dexworker processes; dexd is also built with its failpoints (-tags chaos).
# Report: chaos-report/matrix.md. CHAOSFLAGS="--column takeover" runs a part.
chaos: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	$(BIN)/dexchaos matrix --bin $(BIN) --out chaos-report $(CHAOSFLAGS)

# The soak (docs/chaos.md "Soak"): 5 minutes of mixed load under faults drawn
# from a fixed seed, with --big (10 sessions at the payload limits), then
# the checker, a restart of every node on its data dir and the restore of
# every backup taken. SOAKFLAGS="--duration 1h --seed 7" (--big=false: none
# at the limits). Report: soak-report/soak.md.
soak: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	$(BIN)/dexchaos soak --bin $(BIN) --out soak-report --duration 5m --seed 1 --big $(SOAKFLAGS)

# Takeover time as users get it (default flags): KILLS leader SIGKILLs
# through dex:/// and through HAProxy (TARGET=dex|haproxy|both).
takeover: build
	BIN=$(BIN) scripts/takeover.sh $(or $(KILLS),20) $(or $(TARGET),both)

# Cold-start election time of 3 real nodes, median of RUNS runs.
election-time: build
	BIN=$(BIN) scripts/election-time.sh $(or $(RUNS),5)

proto:
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc -I $(PROTO_DIR) \
		--go_out=. --go_opt=module=github.com/dexhq/dex \
		--go-grpc_out=. --go-grpc_opt=module=github.com/dexhq/dex \
		$(PROTOS) $(FSM_PROTOS)
	$(MAKE) proto-python
	cd api/typescript && { test -d node_modules || npm ci --no-audit --no-fund; } && npm run generate

clean:
	rm -rf $(BIN) .dex
	$(GO) clean -testcache

# The Python Worker library (api/python, docs in its README.md) runs on
# Debian's /usr/bin/python3 with python3-grpcio and python3-protobuf; the
# first python3 in PATH may be another one without them.
PYTHON ?= /usr/bin/python3

# Its demo Worker, as the chaos suite runs it (dexchaos matrix --worker python).
.PHONY: $(BIN)/dexworker-python
$(BIN)/dexworker-python:
	@mkdir -p $(BIN)
	printf '#!/bin/sh\nPYTHONPATH="$(CURDIR)/api/python$${PYTHONPATH:+:$$PYTHONPATH}" exec $(PYTHON) -m dex.demo "$$@"\n' >$@
	chmod +x $@

proto-python:
	protoc -I $(PROTO_DIR) --python_out=api/python --pyi_out=api/python \
		--grpc_python_out=api/python --plugin=protoc-gen-grpc_python=$$(command -v grpc_python_plugin) \
		$(PROTOS)

# The Python library's tests (pytest on Debian's python3-pytest); those
# that need a cluster start bin/dexd (and bin/dexworker beside the first Worker,
# bin/dexchaos's scripted provider for docs/examples/python).
test-python: $(BIN)/dexworker-python
	$(GO) build -o $(BIN)/ ./cmd/dexd ./cmd/dexworker ./cmd/dexctl ./cmd/dexchaos
	cd api/python && DEX_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q -p no:cacheprovider tests

# The worker-kill and takeover columns with the Python demo Worker (CI runs
# them; report: chaos-report-python/matrix.md).
chaos-python: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	$(BIN)/dexchaos matrix --bin $(BIN) --out chaos-report-python --worker python --column worker-kill,takeover

# The Worker-kill rows of RunModel and the tool Steps with the TypeScript
# demo Worker's model driven through each framework adapter (CI runs them;
# reports: chaos-report-adapters/NAME/matrix.md).
ADAPTER_ROWS := RunModel|CallTool|CallSingleAttemptTool|any tool Step|inline tool|after the Worker sent|Claude Agent SDK
chaos-adapters: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	for a in ai-sdk openai-agents claude-agent-sdk; do \
		$(BIN)/dexchaos matrix --bin $(BIN) --out chaos-report-adapters/$$a --worker typescript --adapter $$a --column worker-kill --row '$(ADAPTER_ROWS)' --parallel 2 || exit 1; \
	done

# dexchaos certify on the example Workers of docs/examples, run by their own
# certify.sh as a user's CI runs it: the Python one in all three columns,
# the others in the Worker-kill column (reports: docs/examples/*/certify-report).
certify-examples: build-go
	cd docs/examples/python && ./certify.sh
	cd docs/examples/go && ./certify.sh --columns worker-kill
	cd docs/examples/typescript && ./certify.sh --columns worker-kill
	cd docs/examples/typescript && WORKER=dist/worker-openai-agents.js ./certify.sh --columns worker-kill

# The TypeScript Worker library (api/typescript): its npm packages (npm ci,
# once), tsc into its dist/, and $(BIN)/dexworker-typescript running its demo
# Worker, which `dexchaos matrix --worker typescript` uses.
TS_DIR := api/typescript
worker-typescript:
	cd $(TS_DIR) && { test -d node_modules || npm ci --no-audit --no-fund; } && node_modules/.bin/tsc -p .
	@mkdir -p $(BIN)
	printf '#!/bin/sh\nexec node "%s/$(TS_DIR)/dist/demo/main.js" "$$@"\n' "$(CURDIR)" >$(BIN)/dexworker-typescript
	chmod +x $(BIN)/dexworker-typescript

# The TypeScript library's tests (node's test runner); some start bin/dexd (and
# bin/dexworker beside the first Worker).
# The binaries its tests start, built fresh so none is stale: dexd,
# dexworker, and dexchaos (its scripted model, for the providers' SDKs).
# The certify example's packages (npm ci, once): a test runs its Workers.
test-typescript: worker-typescript
	$(GO) build -o $(BIN)/ ./cmd/dexd ./cmd/dexworker ./cmd/dexchaos
	cd docs/examples/typescript && { test -d node_modules || npm ci --no-audit --no-fund; }
	cd $(TS_DIR) && DEX_BIN="$(CURDIR)/$(BIN)" npm test

# The worker-kill and takeover columns with the TypeScript demo Worker (CI
# runs them; report: chaos-report-typescript/matrix.md).
chaos-typescript: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	$(BIN)/dexchaos matrix --bin $(BIN) --out chaos-report-typescript --worker typescript --column worker-kill,takeover
