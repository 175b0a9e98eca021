#!/usr/bin/env bash
# Starts a local 3-node Dex cluster on 127.0.0.1 and the demo Worker in the
# foreground. Data lives under ./.dex/; Ctrl-C stops everything cleanly.
#
# Environment: BIN (the binaries, default bin), DATA (default .dex),
# PORT_BASE (default 7000: node k serves raft on PORT_BASE+k, gRPC on
# PORT_BASE+100+k and HTTP on PORT_BASE+200+k, Dex's port scheme),
# READY_WITHIN (seconds the cluster has to elect a ready leader, default 60),
# RESTART_AFTER (seconds before a crashed node or Worker is started again,
# default 3), LOG_LEVEL (default info).
#
# A node that cannot start (a port taken, a data dir it refuses) stops the
# whole run with the node's own reason. The Worker starts only once this
# run's three nodes hold their ports and one of them leads, so it never
# drives another cluster that happens to listen on these ports.
set -euo pipefail

cd "$(dirname "$0")/../.."
BIN=${BIN:-bin}
DATA=${DATA:-.dex}
LOG_LEVEL=${LOG_LEVEL:-info}
PORT_BASE=${PORT_BASE:-7000}
READY_WITHIN=${READY_WITHIN:-60}
RESTART_AFTER=${RESTART_AFTER:-3}

raft_addr() { echo "127.0.0.1:$((PORT_BASE + $1))"; }
grpc_addr() { echo "127.0.0.1:$((PORT_BASE + 100 + $1))"; }
http_port() { echo "$((PORT_BASE + 200 + $1))"; }
PEERS="n1=$(raft_addr 1),n2=$(raft_addr 2),n3=$(raft_addr 3)"
ADDRS="$(grpc_addr 1),$(grpc_addr 2),$(grpc_addr 3)"
CONSOLE="http://127.0.0.1:$(http_port 1)/ui/"

# pids[name] is the running process of each node and of the Worker;
# log_from[name] is the size of its log when it was last started.
declare -A pids=() log_from=()
stopping=0
stop() {
	trap - INT TERM EXIT
	stopping=1
	[ "${1:-}" = quiet ] || { echo; echo "stopping the cluster…"; }
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$DATA/pids"
	[ "${1:-}" = quiet ] || echo "stopped"
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

# fail stops what this run started and exits 1 with one line: the reason.
fail() {
	stop quiet
	echo "$*" >&2
	exit 1
}

mkdir -p "$DATA/logs" "$DATA/pids"

log_size() { if [ -f "$1" ]; then wc -c <"$1"; else echo 0; fi; }

start_node() {
	local i=$1 log="$DATA/logs/n$1.log"
	log_from[n$i]=$(log_size "$log")
	"$BIN/dexd" --id "n$i" --data-dir "$DATA/n$i" \
		--raft-addr "$(raft_addr "$i")" --grpc-addr "$(grpc_addr "$i")" --http-addr "127.0.0.1:$(http_port "$i")" \
		--peers "$PEERS" --log-level "$LOG_LEVEL" 2>>"$log" &
	pids[n$i]=$!
	echo "$!" >"$DATA/pids/n$i.pid"
}

start_worker() {
	# The demo Worker follows readiness: it finds the leader, and the next one.
	"$BIN/dexworker" --addr "dex:///$ADDRS" --ledger "$DATA/ledger.jsonl" --id demo-worker \
		2>>"$DATA/logs/worker.log" &
	pids[worker]=$!
	echo "$!" >"$DATA/pids/worker.pid"
}

# refusal prints why node $1 refused to run, from what it wrote since it was
# last started: dexd's own "dexd: REASON" line, if any.
refusal() {
	tail -c "+$((log_from[$1] + 1))" "$DATA/logs/$1.log" 2>/dev/null | sed -n 's/^dexd: //p' | tail -n 1
}

# started reports whether node $1 got past opening its ports and data dir
# since it was last started.
started() {
	tail -c "+$((log_from[$1] + 1))" "$DATA/logs/$1.log" 2>/dev/null | grep -q '"msg":"node started"'
}

# ready reports whether the node with HTTP port $1 answers /readyz with 200
# (it leads and holds the dispatch lease).
ready() {
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
		read -r -t 5 status <&3 || exit 1
		[[ $status == *" 200 "* ]]
	) 2>/dev/null
}

for i in 1 2 3; do start_node "$i"; done

# all_running stops the run with the reason of a node that exited.
all_running() {
	local name rc reason
	for name in n1 n2 n3; do
		kill -0 "${pids[$name]}" 2>/dev/null && continue
		rc=0
		wait "${pids[$name]}" || rc=$?
		unset "pids[$name]"
		reason=$(refusal "$name")
		fail "$name cannot start: ${reason:-it exited with status $rc (log: $DATA/logs/$name.log)}"
	done
}

# Wait for this run's three nodes to hold their ports and elect a leader;
# a node that exits meanwhile stops the run with its reason.
deadline=$((SECONDS + READY_WITHIN))
while all_running; ! { ready "$(http_port 1)" || ready "$(http_port 2)" || ready "$(http_port 3)"; }; do
	if [ "$SECONDS" -gt "$deadline" ]; then
		fail "no node of this cluster became a ready leader within ${READY_WITHIN}s (logs: $DATA/logs/n1.log, n2.log, n3.log)"
	fi
	sleep 0.2
done
all_running
start_worker

cat <<MSG
Dex: 3 nodes and the demo Worker running (logs in $DATA/logs/, tool ledger $DATA/ledger.jsonl,
process ids in $DATA/pids/)
  n1  raft $(raft_addr 1)  grpc $(grpc_addr 1)  http http://127.0.0.1:$(http_port 1)
  n2  raft $(raft_addr 2)  grpc $(grpc_addr 2)  http http://127.0.0.1:$(http_port 2)
  n3  raft $(raft_addr 3)  grpc $(grpc_addr 3)  http http://127.0.0.1:$(http_port 3)
The console: $CONSOLE (any node's HTTP address)

A session that waits for your approval (the demo's deploy tool needs it):
  $BIN/dexctl --addr $ADDRS session start --message "deploy the demo app"
then open ${CONSOLE}sessions/SESSION_ID (the id it printed) and approve the deploy there,
or run the approve command that \`$BIN/dexctl --addr $ADDRS session show SESSION_ID\` prints.

A session that asks you a question:
  $BIN/dexctl --addr $ADDRS session start --message "ask me something"

More:
  $BIN/dexctl --addr $ADDRS status
  $BIN/dexctl --addr $ADDRS session start --message "hello"      # looks up, saves a note, sends an email
  $BIN/dexctl --addr $ADDRS session watch SESSION_ID

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
# A node that exits before it started (a port taken meanwhile, a data dir it
# refuses) would do so again: the run stops with its reason.
set +e
while [ "$stopping" -eq 0 ] && [ "${#pids[@]}" -gt 0 ]; do
	died=""
	wait -n -p died "${pids[@]}"
	rc=$?
	[ -z "$died" ] && continue
	for name in "${!pids[@]}"; do
		[ "${pids[$name]}" = "$died" ] || continue
		unset "pids[$name]"
		how="exited with status $rc"
		[ "$rc" -gt 128 ] && how="was killed by signal $((rc - 128))"
		if [ "$rc" -eq 0 ]; then
			# Stopped on purpose (SIGTERM: a graceful stop hands leadership over).
			if [ "$name" = worker ]; then
				echo "the demo Worker (pid $died) stopped; start it again with: $0 (or run bin/dexworker by hand)"
			else
				echo "node $name (pid $died) stopped gracefully; the other two go on. It stays down; to bring it back:"
				echo "  $BIN/dexd --id $name --data-dir $DATA/$name --raft-addr $(raft_addr "${name#n}") --grpc-addr $(grpc_addr "${name#n}") --http-addr 127.0.0.1:$(http_port "${name#n}") --peers $PEERS"
			fi
			continue
		fi
		if [ "$name" = worker ]; then
			echo "the demo Worker (pid $died) $how; restarting it in ${RESTART_AFTER}s (log: $DATA/logs/worker.log)"
			sleep "$RESTART_AFTER"
			start_worker
			continue
		fi
		reason=$(refusal "$name")
		if [ "$rc" -le 128 ] && [ -n "$reason" ] && ! started "$name"; then
			# It refused to start (a port taken meanwhile): it would again.
			fail "$name cannot start: $reason"
		fi
		echo "node $name (pid $died) $how; the other two go on (a takeover if it led)."
		echo "  restarting $name on $DATA/$name in ${RESTART_AFTER}s (log: $DATA/logs/$name.log)"
		sleep "$RESTART_AFTER"
		start_node "${name#n}"
		echo "  started $name again (pid ${pids[$name]}); once up it catches up from the leader"
	done
done
