#!/usr/bin/env bash
# takeover.sh [KILLS] [TARGET]: measures leader SIGKILLs on 3 real dexd with
# their default flags and a dexworker, through the Go library's dex:///
# target and through HAProxy (TARGET dex, haproxy or both; default both,
# 20 kills each). Prints each kill, then per target the median / p99 / max
# of kill → /readyz 200 and kill → a new session idle, the repeated model
# calls and how busy the machine was. Needs bin/ built (make build).
set -euo pipefail
BIN=${BIN:-bin}
exec "$BIN/dexchaos" takeover --bin "$BIN" --kills "${1:-20}" --target "${2:-both}"
