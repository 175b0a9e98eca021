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
# certifying the three Workers one after another installs once. It installs
# @dexhq/dex as a copy of the library's build (.npmrc), so the library is
# built just before, and only then.
installed() { [ node_modules/.package-lock.json -nt package-lock.json ]; }
if ! installed; then
	(cd "$DEX_SRC/api/typescript" && { installed || npm ci --no-audit --no-fund; } && npm run build)
	npm ci --no-audit --no-fund
fi
# tsc only where a source, the config or the installed packages changed
# since its last build (dist/.built), or the Worker is not there.
if [ ! -f dist/.built ] || [ ! -f "${WORKER:-dist/worker.js}" ] ||
	[ -n "$(find src tsconfig.json node_modules/.package-lock.json node_modules/@dexhq/dex -newer dist/.built -print -quit)" ]; then
	npx tsc -p .
	touch dist/.built
fi

mkdir -p certify-report
exec "$BIN/dexchaos" certify --bin "$BIN" --tools tools.json --out certify-report --junit certify-report/junit.xml "$@" \
  -- node "${WORKER:-dist/worker.js}"
