#!/usr/bin/env bash
# Lock hold times and contention against the number of submitters (issue
# 13's scaling model): N jobs of 4k random reads at queue depth 32 on one
# null device with one hw queue and inline completion, so every job's I/O
# goes through the same hctx, tags and scheduler. For each N and scheduler
# it prints the IOPS, and per shared lock the acquisitions per I/O, the
# share of acquisitions that waited, the mean wait of those and the mean
# sampled hold time (blkmq's StatSpinLock and StatMutex counters, read
# with --show_attr; tags_wait_lock_stat is the tags' wait queues).
# Usage: bench/lock_scaling.sh [path/to/blkmq] [runtime_s] [jobs...]
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
RT=${2:-2}
shift $(( $# < 2 ? $# : 2 ))
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=(1 2 8 32)
locks="queue/iosched/lock_stat queue/iosched/insert_lock_stat mq/0/dispatch_lock_stat mq/0/ctx_lock_stat mq/0/tags_wait_lock_stat"
printf '%-12s %4s %9s  %-28s %8s %7s %9s %8s\n' scheduler jobs IOPS lock "acq/IO" "waited%" "wait_ns" "hold_ns"
for sched in none mq-deadline; do
  for n in "${jobs[@]}"; do
    show=()
    for l in $locks; do show+=("--show_attr=$l"); done
    out=$("$BLKMQ" bench --driver=null --irqmode=0 --scheduler="$sched" --name=x --rw=randread --bs=4k \
      --iodepth=32 --iodepth_batch_submit=8 --iodepth_batch_complete=8 --gtod_reduce=1 --size=1g \
      --runtime="$RT" --time_based --numjobs="$n" --group_reporting "${show[@]}" 2>&1)
    iops=$(echo "$out" | sed -n 's/.*IOPS=\([0-9.]*\)\([kM]\?\),.*/\1 \2/p' | head -1 |
      awk '{m = $2 == "k" ? 1e3 : ($2 == "M" ? 1e6 : 1); printf "%.0f", $1 * m}')
    ios=$(awk -v i="$iops" -v t="$RT" 'BEGIN {print i * t}')
    echo "$out" | awk -v s="$sched" -v n="$n" -v iops="$iops" -v ios="$ios" '
      /^  [^ ]+: [^ ]+lock_stat: acquired=/ {
        name = $2; sub(/:$/, "", name)
        for (f = 3; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
        if (v["acquired"] == 0) next
        printf "%-12s %4s %9s  %-28s %8.3f %7.2f %9.0f %8.0f\n", s, n, iops, name,
          v["acquired"] / ios, 100 * v["waited"] / v["acquired"],
          v["waited"] ? v["wait_ns"] / v["waited"] : 0,
          v["hold_samples"] ? v["hold_ns"] / v["hold_samples"] : 0
        shown = 1
      }
      END { if (!shown) printf "%-12s %4s %9s  (no lock taken)\n", s, n, iops }'
  done
done
