#!/bin/sh
# Certifies the Worker of this directory (worker.py, tools.json) with
# `dexchaos certify`: a fresh 3-node Dex cluster, a scripted model, and
# Worker kills, server restarts and takeovers at every moment that matters.
#
#   DEX_SRC=path/to/dex ./certify.sh [certify flags, e.g. --columns worker-kill]
#
# DEX_SRC is a checkout of Dex (default: the Dex repository this example
# sits in). BIN is where dexd and dexchaos are built (default: $DEX_SRC/bin).
# PYTHON is the Python with grpc, protobuf and httpx (default: /usr/bin/python3).
# The report goes to certify-report/ (matrix.md, junit.xml, failed cells' logs).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${DEX_SRC:-}" ] && [ -d "$here/../../../cmd/dexchaos" ]; then
	DEX_SRC="$here/../../.."
fi
if [ -z "${DEX_SRC:-}" ] || [ ! -d "$DEX_SRC/cmd/dexchaos" ]; then
	echo "certify.sh: set DEX_SRC to a checkout of Dex (git clone https://github.com/dexhq/dex)" >&2
	exit 2
fi
DEX_SRC=$(cd "$DEX_SRC" && pwd)
BIN=${BIN:-$DEX_SRC/bin}
PYTHON=${PYTHON:-/usr/bin/python3}

mkdir -p "$BIN"
BIN=$(cd "$BIN" && pwd)
(cd "$DEX_SRC" && go build -o "$BIN" ./cmd/dexd ./cmd/dexchaos)

export PYTHONPATH="$DEX_SRC/api/python${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p certify-report
exec "$BIN/dexchaos" certify --bin "$BIN" --tools tools.json --out certify-report \
	--junit certify-report/junit.xml "$@" -- "$PYTHON" worker.py
