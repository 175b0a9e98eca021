#!/usr/bin/env bash
# busy.sh CMD ARGS…: runs the command, then prints how busy the whole machine
# was while it ran (every process counted, from /proc/stat), so a benchmark's
# figures come with the load they were measured under.
set -u
read -r _ u n s i w q sq st _ < /proc/stat
t0=$((u + n + s + i + w + q + sq + st)); idle0=$((i + w)); start=$(date +%s.%N)
"$@"
rc=$?
read -r _ u n s i w q sq st _ < /proc/stat
t1=$((u + n + s + i + w + q + sq + st)); idle1=$((i + w)); end=$(date +%s.%N)
awk -v t="$((t1 - t0))" -v idle="$((idle1 - idle0))" -v s="$start" -v e="$end" -v cpus="$(nproc)" \
	'BEGIN { if (t > 0) printf "machine busy: %.1f %% of %d CPUs over %.1f s\n", 100 * (t - idle) / t, cpus, e - s }'
exit $rc
