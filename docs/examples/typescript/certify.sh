#!/bin/sh
# Certifies this package's Worker with `dexchaos certify`: a fresh 3-node Dex
# cluster, the scripted model behind the OpenAI and Anthropic APIs, and the
# crash matrix run against the Worker (report in certify-report/).
#
#   ./certify.sh [certify flags, e.g. --columns worker-kill --row CallTool]
#
# DEX_SRC: a Dex checkout (default ../../.., this package's place in Dex).
# BIN: where dexd and dexchaos are built (default $DEX_SRC/bin).
# WORKER: the Worker to certify (default dist/worker.js; also
# dist/worker-openai-agents.js, dist/worker-claude-agent-sdk.js).
set -eu
cd "$(dirname "$0")"
DEX_SRC=$(cd "${DEX_SRC:-../../..}" && pwd)
BIN=${BIN:-$DEX_SRC/bin}
mkdir -p "$BIN"
BIN=$(cd "$BIN" && pwd)

(cd "$DEX_SRC" && go build -o "$BIN/" ./cmd/dexd ./cmd/dexchaos)
# npm ci only where node_modules is missing or older than its lock file, so
# certifying the three Workers one after another installs once.
installed() { [ node_modules/.package-lock.json -nt package-lock.json ]; }
(cd "$DEX_SRC/api/typescript" && { installed || npm ci --no-audit --no-fund; } && npm run build)
installed || npm ci --no-audit --no-fund
npx tsc -p .

mkdir -p certify-report
exec "$BIN/dexchaos" certify --bin "$BIN" --tools tools.json --out certify-report --junit certify-report/junit.xml "$@" \
  -- node "${WORKER:-dist/worker.js}"
