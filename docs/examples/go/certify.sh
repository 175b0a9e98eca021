#!/usr/bin/env bash
# Certifies this Worker against Dex's crash matrix: builds dexd and dexchaos
# from a Dex checkout, builds the Worker, and runs `dexchaos certify` on it.
#
#   DEX_SRC=path/to/dex ./certify.sh [certify flags, e.g. --columns worker-kill]
#
# DEX_SRC defaults to ../../.. (this example inside the Dex repository).
# The report goes to certify-report/ (matrix.md, matrix.json, the failed
# cells' logs, junit.xml); the exit status is certify's.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=${DEX_SRC:-$here/../../..}
if [ ! -d "$src/cmd/dexchaos" ]; then
	echo "certify.sh: $src is not a Dex checkout (no cmd/dexchaos); set DEX_SRC" >&2
	exit 2
fi
src=$(cd "$src" && pwd)
BIN=${BIN:-$here/.certify-bin}
mkdir -p "$BIN"
BIN=$(cd "$BIN" && pwd)

echo "building dexd and dexchaos from $src into $BIN" >&2
(cd "$src" && go build -o "$BIN/" ./cmd/dexd ./cmd/dexchaos)

cd "$here"
echo "building the Worker" >&2
go build -o certify-worker .

mkdir -p certify-report
exec "$BIN/dexchaos" certify --bin "$BIN" --tools tools.json --out certify-report \
	--junit certify-report/junit.xml "$@" -- ./certify-worker
