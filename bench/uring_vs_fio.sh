#!/usr/bin/env bash
# blkmq's uring driver against fio's io_uring engine on the same file, same
# job, alternating runs (bench/alternate.sh): 4k random reads at queue depth
# 32 with O_DIRECT. blkmq runs twice: with its defaults (the job sleeps in
# the ring and ends its own completions, Queue::wait), and spinning on a
# poll queue (--poll_queues=1 --hipri=1). bench/uring_matrix.sh runs the
# whole matrix of depths, sizes and files.
# Usage: bench/uring_vs_fio.sh [path/to/blkmq] [file] [rounds] [runtime] [extra job options]
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
FILE=${2:-/var/tmp/blkmq-uring-bench.dat}
ROUNDS=${3:-3}
RT=${4:-3}
EXTRA=${5:-}
cd "$(dirname "$0")/.."
[ -f "$FILE" ] || fallocate -l 1G "$FILE"
job="--name=x --filename=$FILE --direct=1 --rw=randread --bs=4k --iodepth=32 --runtime=$RT --time_based $EXTRA"
bench/alternate.sh "$ROUNDS" \
  "fio io_uring" "fio --ioengine=io_uring --thread $job" \
  "blkmq uring, defaults" "$BLKMQ bench --driver=uring $job" \
  "blkmq uring, poll queue" "$BLKMQ bench --driver=uring --poll_queues=1 --hipri=1 $job"
