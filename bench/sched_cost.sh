#!/usr/bin/env bash
# Per-I/O cost of each scheduler on the null device (one hw queue, inline
# completion): IOPS of alternating runs (bench/alternate.sh), one job,
# 4k random reads at queue depth 32 in batches of 8. The instruction counts
# come from bench/callgrind_per_io.sh BLKMQ SCHED...
# Usage: bench/sched_cost.sh [path/to/blkmq] [rounds] [runtime] [scheduler...]
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
ROUNDS=${2:-3}
RT=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
scheds=("$@")
[ ${#scheds[@]} -gt 0 ] || scheds=(none mq-deadline kyber bfq)
cd "$(dirname "$0")/.."
job="--driver=null --irqmode=0 --name=x --rw=randread --bs=4k --iodepth=32 --iodepth_batch_submit=8 \
  --iodepth_batch_complete=8 --gtod_reduce=1 --size=1g --runtime=$RT --time_based"
args=()
for s in "${scheds[@]}"; do args+=("$s" "$BLKMQ bench $job --scheduler=$s"); done
bench/alternate.sh "$ROUNDS" "${args[@]}"
