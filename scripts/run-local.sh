#!/usr/bin/env bash
# Starts a local 3-node Dex cluster on 127.0.0.1 and the demo Worker in the
# foreground. Data lives under ./.dex/; Ctrl-C stops everything cleanly.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
DATA=${DATA:-.dex}
LOG_LEVEL=${LOG_LEVEL:-info}
PEERS="n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003"

pids=()
stop() {
	trap - INT TERM EXIT
	echo
	echo "stopping the cluster…"
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	echo "stopped"
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

for i in 1 2 3; do
	mkdir -p "$DATA/logs"
	"$BIN/dexd" --id "n$i" --data-dir "$DATA/n$i" \
		--raft-addr "127.0.0.1:700$i" --grpc-addr "127.0.0.1:710$i" --http-addr "127.0.0.1:720$i" \
		--peers "$PEERS" --log-level "$LOG_LEVEL" 2>>"$DATA/logs/n$i.log" &
	pids+=("$!")
done

ADDRS="127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"
# The demo Worker follows readiness: it finds the leader, and the next one.
"$BIN/dexworker" --addr "dex:///$ADDRS" --ledger "$DATA/ledger.jsonl" --id demo-worker \
	2>>"$DATA/logs/worker.log" &
pids+=("$!")

cat <<MSG
Dex: 3 nodes and the demo Worker running (logs in $DATA/logs/, tool ledger $DATA/ledger.jsonl)
  n1  raft 127.0.0.1:7001  grpc 127.0.0.1:7101  http http://127.0.0.1:7201
  n2  raft 127.0.0.1:7002  grpc 127.0.0.1:7102  http http://127.0.0.1:7202
  n3  raft 127.0.0.1:7003  grpc 127.0.0.1:7103  http http://127.0.0.1:7203

Try:
  $BIN/dexctl --addr $ADDRS status
  $BIN/dexctl --addr $ADDRS session start --message "hello"      # prints the session id
  $BIN/dexctl --addr $ADDRS session show SESSION_ID
  $BIN/dexctl --addr $ADDRS session watch SESSION_ID
  curl -s http://127.0.0.1:7201/readyz

Ctrl-C stops everything.
MSG

# Exit (and stop the others) when any node exits.
set +e
wait -n "${pids[@]}"
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ]; then
	echo "a process exited with status $rc; see $DATA/logs/"
fi
exit "$rc"
