#!/usr/bin/env bash
# Builds the chaos binaries into DIR (default bin/chaos): dexd with its
# gofail failpoints compiled in (go build -tags chaos), and dexworker and
# dexctl beside it so DIR is a complete binary dir for the chaos harness.
# Failpoints are set at start with GOFAIL_FAILPOINTS (see deploy/README.md).
set -euo pipefail

cd "$(dirname "$0")/../.."
OUT=${1:-bin/chaos}
mkdir -p "$OUT"
${GO:-go} build -tags chaos -o "$OUT/" ./cmd/dexd ./cmd/dexworker ./cmd/dexctl
echo "chaos build in $OUT"
