GO ?= go
BIN := bin
PROTO_DIR := api/proto
PROTOS := $(wildcard $(PROTO_DIR)/dex/v1/*.proto)
# The state machine's stored rows and the Raft log's commands (Go only: no
# Worker library reads the log). They live beside the state machine, not in
# the public API's tree; their paths under FSM_PROTO_DIR (dex/fsm/v1/...) are
# the file names recorded in their descriptors.
FSM_PROTO_DIR := fsm/proto
FSM_PROTOS := $(wildcard $(FSM_PROTO_DIR)/dex/fsm/v1/*.proto)
FUZZTIME ?= 60s
TESTFLAGS ?= -race -timeout 10m

.PHONY: certify-examples chaos-adapters chaos-partitions build build-go worker-typescript-if-npm test e2e test-python e2e-python proto-python chaos-python run proto fuzz bench bench-scale bench-etcd bench-longsession vet clean election-time chaos takeover soak soak-retention soak-partitions worker-typescript test-typescript e2e-typescript chaos-typescript

# The Go binaries, then the Python and TypeScript demo Workers (the
# TypeScript one only where npm is installed: build-go needs Go alone).
build: build-go $(BIN)/dexworker-python worker-typescript-if-npm

build-go:
	$(GO) build -o $(BIN)/ ./cmd/...

worker-typescript-if-npm:
	@if command -v npm >/dev/null; then $(MAKE) worker-typescript; \
	else echo "npm not found: skipping the TypeScript Worker (bin/dexworker-typescript); the Go binaries are built"; fi

# Two test lanes. `make test`, run before every commit, runs the tests that
# start no process: go vet (e2e files included), the Go tests with
# $(TESTFLAGS), the Python and TypeScript libraries' unit tests. `make e2e`
# runs every test that starts processes (dexd, dexworker, dexctl, Workers,
# haproxy, Chromium, go build, mount...; promtool checks the alert rules in
# both). Where a test is written
# puts it in one lane and one only, and `make test` fails a test of its own
# that starts a process:
#   Go: a _test.go file whose build constraint is the line //go:build e2e is
#     `make e2e`'s: chaos/scripts/e2e-go.sh runs with -tags e2e the tests of those
#     files and no others. Every other test file is `make test`'s, and fails
#     it if it imports os/exec (chaos/scripts/lanes_test.go). The helpers that start
#     processes (each TestMain that builds binaries, chaos's newEnv...) are in
#     tagged files, out of an untagged test's reach. A tag rather than
#     testing.Short(): no test can be left out of both lanes, or be in both.
#   Python (api/python/tests): a test marked e2e (@pytest.mark.e2e, or the
#     module's pytestmark) is `make e2e`'s (-m e2e), every other one `make
#     test`'s (-m "not e2e"), where starting a process fails it (conftest.py).
#   TypeScript (api/typescript): test/e2e/*.test.ts is `make e2e`'s (npm run
#     test:e2e), test/*.test.ts `make test`'s (npm test); test/lanes.test.ts
#     fails a test file elsewhere, and one of `make test` that imports
#     child_process or a helper of test/e2e/.
vet:
	$(GO) vet -tags e2e ./...
	$(GO) vet -tags chaos ./...

# The unit tests of the failpoint build (files that begin //go:build chaos):
# make test runs them by name, and chaos/scripts/lanes_test.go fails when
# one is missing here.
CHAOS_TAGGED_TESTS = ^(TestRaftRoutes_ParsedAndAppliedToDials|TestRaftRoutes_MalformedRouteIsRefused|TestFailpoints_RegisteredAndEvaluated)$$

test: vet
	$(GO) test $(TESTFLAGS) ./...
	$(GO) test $(TESTFLAGS) -tags chaos -run '$(CHAOS_TAGGED_TESTS)' ./api/server ./cluster/internal/peer
	deploy/prometheus/check-rules.sh
	$(MAKE) test-python
	$(MAKE) test-typescript

# -count=1: these tests run programs the test cache does not track, so a
# cached pass could hide a change to dexd, dexworker or dexctl.
e2e:
	GO=$(GO) BIN=$(BIN) chaos/scripts/e2e-go.sh $(TESTFLAGS) -count=1
	$(MAKE) e2e-python
	$(MAKE) e2e-typescript

# A local 3-node cluster in the foreground; Ctrl-C stops it. PORT_BASE=8000
# moves its ports, DATA=DIR its data (deploy/local/run-local.sh).
run: build
	BIN=$(BIN) deploy/local/run-local.sh

fuzz:
	$(GO) test ./fsm -run '^$$' -fuzz FuzzApply -fuzztime $(FUZZTIME)

bench:
	chaos/scripts/busy.sh $(GO) test ./fsm -run '^$$' -bench 'Apply$$' -benchtime 2000x -benchmem
	chaos/scripts/busy.sh $(GO) test ./fsm/store/internal/cowdb -run '^$$' -bench Floor -benchmem
	chaos/scripts/busy.sh $(GO) test ./fsm -run '^$$' -bench ApplyBatch -benchtime 100x
	chaos/scripts/busy.sh $(GO) test ./fsm -run '^$$' -bench State100k -benchtime 1x
	chaos/scripts/busy.sh $(GO) test ./dispatch -run '^$$' -bench . -benchmem
	chaos/scripts/busy.sh $(GO) test ./cluster -run '^$$' -bench Propose -benchtime 3000x
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

# dexbench beside a 3-member etcd on the same machine (etcd from Debian's
# etcd-server package), three runs of each, alternating; medians side by
# side. BENCHFLAGS="--payload 4KiB" gives a put the bytes of a Step.
bench-etcd:
	$(GO) build -o $(BIN)/ ./cmd/dexd ./cmd/dexbench
	$(BIN)/dexbench etcd --bin $(BIN) --runs 3 $(BENCHFLAGS)

# A follower holding one 3,000-turn session restarts against one of 100
# turns (BENCHMARKS.md, issue 30): five SIGKILLs and restarts of each, on
# real processes. The chaos package's TestMain builds the dexd, dexworker
# and dexctl it starts, so nothing is built here first. Not part of test/CI.
# DEX_BENCH_DEXD_B=PATH alternates the restarts with another dexd (A B B A,
# same data) for a before/after pair in one run.
bench-longsession:
	chaos/scripts/busy.sh $(GO) test -tags e2e ./chaos/ -run '^$$' -bench LongSessionRestart -benchtime 5x -count 1

# The crash matrix (docs/crash-matrix.md): every row against every fault on real dexd and
# dexworker processes; dexd is also built with its failpoints (-tags chaos).
# Report: chaos-report/matrix.md. CHAOSFLAGS="--column takeover" runs a part.
chaos: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	$(BIN)/dexchaos matrix --bin $(BIN) --out chaos-report $(CHAOSFLAGS)

# The crash matrix's takeover column on clusters of 3 partitions
# (docs/chaos.md "Partitions"): each cell SIGKILLs the leader of its
# session's partition while sessions of the other partitions keep running
# turns, which must not fail. About 3 minutes on 2 cores. Report:
# chaos-report-partitions/matrix.md. CHAOSFLAGS="--column takeover-dex"
# adds the dex:/// column (as long again).
chaos-partitions: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	$(BIN)/dexchaos matrix --bin $(BIN) --out chaos-report-partitions --partitions 3 --column takeover $(CHAOSFLAGS)

# The soak (docs/chaos.md "Soak"): 5 minutes of mixed load under faults drawn
# from a fixed seed, with --big (10 sessions at the payload limits), then
# the checker, a restart of every node on its data dir and the restore of
# every backup taken. SOAKFLAGS="--duration 1h --seed 7" (--big=false: none
# at the limits). Report: soak-report/soak.md.
soak: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	$(BIN)/dexchaos soak --bin $(BIN) --out soak-report --duration 5m --seed 1 --big $(SOAKFLAGS)

# The lifecycle soak (docs/chaos.md "Soak", lifecycle mode): an hour at
# constant load, sessions created and closed throughout, retention 5 minutes,
# every deleted session archived first; judged on 0 violations, the archive
# and the flatness of snapshot size, leader RSS and restore time. Not run by
# CI (an hour). Report: soak-retention-report/soak.md.
soak-retention: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	$(BIN)/dexchaos soak --bin $(BIN) --out soak-retention-report --duration 60m --retention 5m --archive --seed 1 $(SOAKFLAGS)

# The soak on a cluster of 3 partitions (docs/chaos.md "Soak", partitions):
# 3 minutes of load, seed 1; each leader fault strikes the leader of a
# partition drawn from the seed, and the report gives each partition's
# figures. Report: soak-report/partitions/soak.md.
soak-partitions: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	$(BIN)/dexchaos soak --bin $(BIN) --out soak-report/partitions --duration 3m --seed 1 --partitions 3 $(SOAKFLAGS)

# Takeover time as users get it (default flags): KILLS leader SIGKILLs
# through dex:/// and through HAProxy (TARGET=dex|haproxy|both).
takeover: build
	BIN=$(BIN) chaos/scripts/takeover.sh $(or $(KILLS),20) $(or $(TARGET),both)

# Cold-start election time of 3 real nodes, median of RUNS runs.
election-time: build
	BIN=$(BIN) chaos/scripts/election-time.sh $(or $(RUNS),5)

# Needs protoc with protoc-gen-go (v1.36.12), protoc-gen-go-grpc (v1.6.2)
# and protoc-gen-go-vtproto (github.com/planetscale/vtprotobuf at the
# version go.mod names), which writes the reflection-free marshal, unmarshal
# and clone code of every message (*_vtproto.pb.go); the Python stubs need
# grpc_python_plugin (Debian's protobuf-compiler-grpc). The generated code is
# committed: building and testing need none of these.
proto:
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc -I $(PROTO_DIR) -I $(FSM_PROTO_DIR) \
		--go_out=. --go_opt=module=github.com/dexhq/dex \
		--go-grpc_out=. --go-grpc_opt=module=github.com/dexhq/dex \
		--go-vtproto_out=. --go-vtproto_opt=module=github.com/dexhq/dex,features=marshal+unmarshal+size+clone \
		$(PROTOS) $(FSM_PROTOS)
	$(GO) generate ./fsm/fsmpb
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

# The Python library's tests (pytest on Debian's python3-pytest): its unit
# tests in `make test`; in `make e2e` those marked e2e, which start bin/dexd
# (and bin/dexworker beside the first Worker, bin/dexchaos's scripted provider
# for docs/examples/python, the examples and Workers as processes).
test-python:
	cd api/python && $(PYTHON) -m pytest -q -p no:cacheprovider -m "not e2e" tests

e2e-python: $(BIN)/dexworker-python
	$(GO) build -o $(BIN)/ ./cmd/dexd ./cmd/dexworker ./cmd/dexctl ./cmd/dexchaos
	cd api/python && DEX_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q -p no:cacheprovider -m e2e tests

# The worker-kill and takeover columns with the Python demo Worker (CI runs
# them; report: chaos-report-python/matrix.md). Two cells at once, each on
# its own cluster, as the adapters' lane: the takeover figures that need a
# quiet machine are `make chaos`'s.
chaos-python: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	$(BIN)/dexchaos matrix --bin $(BIN) --out chaos-report-python --worker python --column worker-kill,takeover --parallel 2

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
# Two cells at once (--parallel 2), each on its own cluster.
# Each certify.sh builds dexd and dexchaos into BIN, which the Go one keeps
# apart by default (.certify-bin): here it is $(BIN), which build-go has made.
certify-examples: build-go
	cd docs/examples/python && ./certify.sh --parallel 2
	cd docs/examples/go && BIN=$(CURDIR)/$(BIN) ./certify.sh --columns worker-kill --parallel 2
	cd docs/examples/typescript && ./certify.sh --columns worker-kill --parallel 2
	cd docs/examples/typescript && WORKER=dist/worker-openai-agents.js ./certify.sh --columns worker-kill --parallel 2
	cd docs/examples/typescript && WORKER=dist/worker-claude-agent-sdk.js ./certify.sh --columns worker-kill --parallel 2

# The TypeScript Worker library (api/typescript): its npm packages (npm ci,
# once), tsc into its dist/, and $(BIN)/dexworker-typescript running its demo
# Worker, which `dexchaos matrix --worker typescript` uses. tsc runs only
# when a file it compiles, its config or the packages changed since its last
# build (dist/.tsc-built, gone with dist/), after removing dist/test as npm
# test does, so no test deleted since runs: make test, make e2e, every chaos
# lane and the soak use that build, and one compile serves them all.
TS_DIR := api/typescript
TS_INPUTS := $(shell find $(addprefix $(TS_DIR)/,src gen demo test examples) 2>/dev/null) \
	$(addprefix $(TS_DIR)/,tsconfig.json package.json package-lock.json)
worker-typescript: $(TS_DIR)/dist/.tsc-built
	cd $(TS_DIR) && { test -d node_modules || npm ci --no-audit --no-fund; }
	@mkdir -p $(BIN)
	printf '#!/bin/sh\nexec node "%s/$(TS_DIR)/dist/demo/main.js" "$$@"\n' "$(CURDIR)" >$(BIN)/dexworker-typescript
	chmod +x $(BIN)/dexworker-typescript

$(TS_DIR)/dist/.tsc-built: $(TS_INPUTS)
	cd $(TS_DIR) && { test -d node_modules || npm ci --no-audit --no-fund; } && rm -rf dist/test && node_modules/.bin/tsc -p .
	touch $@

# The TypeScript library's tests (node's test runner), those npm test and
# npm run test:e2e run, on the build above: test/*.test.ts in `make test`;
# in `make e2e` test/e2e/*.test.ts, which start bin/dexd (and bin/dexworker
# beside the first Worker), built fresh so none is stale, with dexchaos (its
# scripted model, for the providers' SDKs).
test-typescript: $(TS_DIR)/dist/.tsc-built
	cd $(TS_DIR) && { test -d node_modules || npm ci --no-audit --no-fund; } && node --test dist/test/*.test.js

# The certify example's packages (npm ci, once): an e2e test runs its Workers.
e2e-typescript: $(TS_DIR)/dist/.tsc-built
	$(GO) build -o $(BIN)/ ./cmd/dexd ./cmd/dexworker ./cmd/dexctl ./cmd/dexchaos
	cd docs/examples/typescript && { test -d node_modules || npm ci --no-audit --no-fund; }
	cd $(TS_DIR) && { test -d node_modules || npm ci --no-audit --no-fund; } && DEX_BIN="$(CURDIR)/$(BIN)" node --test dist/test/e2e/*.test.js

# The worker-kill and takeover columns with the TypeScript demo Worker (CI
# runs them; report: chaos-report-typescript/matrix.md), two cells at once
# as chaos-python.
chaos-typescript: build
	$(GO) build -tags chaos -o $(BIN)/chaos/ ./cmd/dexd
	$(BIN)/dexchaos matrix --bin $(BIN) --out chaos-report-typescript --worker typescript --column worker-kill,takeover --parallel 2
