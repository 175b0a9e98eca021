#!/usr/bin/env bash
# Cold-start election time of a 3-node Dex cluster: from starting three dexd
# processes on empty data dirs to `dexctl status` showing a leader. Runs N
# times (default 5) and prints each time and the median, in milliseconds.
# Uses dexd's default (production) raft timeouts.
set -euo pipefail

cd "$(dirname "$0")/../.."
BIN=${BIN:-bin}
RUNS=${1:-5}
BASE=${BASE_PORT:-17000}

pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	pids=()
}
trap cleanup EXIT

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

times=()
for run in $(seq 1 "$RUNS"); do
	tmp=$(mktemp -d)
	peers="n1=127.0.0.1:$((BASE+1)),n2=127.0.0.1:$((BASE+2)),n3=127.0.0.1:$((BASE+3))"
	addrs="127.0.0.1:$((BASE+11)),127.0.0.1:$((BASE+12)),127.0.0.1:$((BASE+13))"
	start=$(now_ms)
	for i in 1 2 3; do
		"$BIN/dexd" --id "n$i" --data-dir "$tmp/n$i" \
			--raft-addr "127.0.0.1:$((BASE+i))" --grpc-addr "127.0.0.1:$((BASE+10+i))" \
			--http-addr "127.0.0.1:$((BASE+20+i))" --peers "$peers" 2>"$tmp/n$i.log" &
		pids+=("$!")
	done
	leader=""
	while [ -z "$leader" ]; do
		if [ $(( $(now_ms) - start )) -gt 30000 ]; then
			echo "run $run: no leader within 30s (logs in $tmp)" >&2
			exit 1
		fi
		leader=$("$BIN/dexctl" --addr "$addrs" --timeout 500ms status --json 2>/dev/null |
			sed -n 's/^  "leader": "\(.*\)",$/\1/p') || true
		[ -n "$leader" ] || sleep 0.02
	done
	ms=$(( $(now_ms) - start ))
	echo "run $run: leader $leader after ${ms} ms"
	times+=("$ms")
	cleanup
	rm -rf "$tmp"
done

median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
echo "median cold-start election time over $RUNS runs: ${median} ms"
