#!/usr/bin/env bash
# Starts a local 3-node Dex cluster on 127.0.0.1 and the demo Worker in the
# foreground. Data lives under ./.dex/; Ctrl-C stops everything cleanly.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
DATA=${DATA:-.dex}
LOG_LEVEL=${LOG_LEVEL:-info}
PEERS="n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003"
# A node or the Worker that exits is started again after this many seconds.
RESTART_AFTER=${RESTART_AFTER:-3}

# pids[name] is the running process of each node and of the Worker.
declare -A pids=()
stopping=0
stop() {
	trap - INT TERM EXIT
	stopping=1
	echo
	echo "stopping the cluster…"
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$DATA/pids"
	echo "stopped"
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

mkdir -p "$DATA/logs" "$DATA/pids"
start_node() {
	local i=$1
	"$BIN/dexd" --id "n$i" --data-dir "$DATA/n$i" \
		--raft-addr "127.0.0.1:700$i" --grpc-addr "127.0.0.1:710$i" --http-addr "127.0.0.1:720$i" \
		--peers "$PEERS" --log-level "$LOG_LEVEL" 2>>"$DATA/logs/n$i.log" &
	pids[n$i]=$!
	echo "$!" >"$DATA/pids/n$i.pid"
}

ADDRS="127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"
start_worker() {
	# The demo Worker follows readiness: it finds the leader, and the next one.
	"$BIN/dexworker" --addr "dex:///$ADDRS" --ledger "$DATA/ledger.jsonl" --id demo-worker \
		2>>"$DATA/logs/worker.log" &
	pids[worker]=$!
	echo "$!" >"$DATA/pids/worker.pid"
}

for i in 1 2 3; do start_node "$i"; done
start_worker

cat <<MSG
Dex: 3 nodes and the demo Worker running (logs in $DATA/logs/, tool ledger $DATA/ledger.jsonl,
process ids in $DATA/pids/)
  n1  raft 127.0.0.1:7001  grpc 127.0.0.1:7101  http http://127.0.0.1:7201
  n2  raft 127.0.0.1:7002  grpc 127.0.0.1:7102  http http://127.0.0.1:7202
  n3  raft 127.0.0.1:7003  grpc 127.0.0.1:7103  http http://127.0.0.1:7203

Try:
  $BIN/dexctl --addr $ADDRS status
  $BIN/dexctl --addr $ADDRS session start --message "hello"      # prints the session id
  $BIN/dexctl --addr $ADDRS session show SESSION_ID
  $BIN/dexctl --addr $ADDRS session watch SESSION_ID
  curl -s http://127.0.0.1:7201/readyz
  open http://127.0.0.1:7201/ui/ in a browser: the console (sessions, waits, the cluster)

A takeover: kill the leader that status names (say n2), then start a session:
  kill -9 \$(cat $DATA/pids/n2.pid)
  $BIN/dexctl --addr $ADDRS session start --message "after the takeover"
A killed node is restarted on its data dir after ${RESTART_AFTER}s and catches up
(a node stopped with SIGTERM hands leadership over and stays down).

Ctrl-C stops everything.
MSG

# Keep the demo going: a node or the Worker that crashes or is killed is
# reported and started again (a node on its data dir); the other two nodes
# serve meanwhile. One stopped on purpose (exit 0) is reported and left down.
set +e
while [ "$stopping" -eq 0 ] && [ "${#pids[@]}" -gt 0 ]; do
	died=""
	wait -n -p died "${pids[@]}"
	rc=$?
	[ -z "$died" ] && continue
	for name in "${!pids[@]}"; do
		[ "${pids[$name]}" = "$died" ] || continue
		how="exited with status $rc"
		[ "$rc" -gt 128 ] && how="was killed by signal $((rc - 128))"
		if [ "$rc" -eq 0 ]; then
			# Stopped on purpose (SIGTERM: a graceful stop hands leadership over).
			if [ "$name" = worker ]; then
				echo "the demo Worker (pid $died) stopped; start it again with: $0 (or run bin/dexworker by hand)"
			else
				echo "node $name (pid $died) stopped gracefully; the other two go on. It stays down; to bring it back:"
				echo "  $BIN/dexd --id $name --data-dir $DATA/$name --raft-addr 127.0.0.1:700${name#n} --grpc-addr 127.0.0.1:710${name#n} --http-addr 127.0.0.1:720${name#n} --peers $PEERS"
			fi
			unset "pids[$name]"
			continue
		fi
		if [ "$name" = worker ]; then
			echo "the demo Worker (pid $died) $how; restarting it in ${RESTART_AFTER}s (log: $DATA/logs/worker.log)"
			sleep "$RESTART_AFTER"
			start_worker
		else
			echo "node $name (pid $died) $how; the other two go on (a takeover if it led)."
			echo "  restarting $name on $DATA/$name in ${RESTART_AFTER}s (log: $DATA/logs/$name.log)"
			sleep "$RESTART_AFTER"
			start_node "${name#n}"
			echo "  $name is back (pid ${pids[$name]}); it catches up from the leader"
		fi
	done
done
