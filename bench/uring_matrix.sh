#!/usr/bin/env bash
# blkmq's uring driver against fio's io_uring engine over the matrix of
# issue 13: random reads, O_DIRECT, iodepth 1/32/128, 4k and 128k, on a
# device-bound file (written data on the root disk) and a cached one
# (fallocated: its reads never touch the disk). Each cell alternates fio,
# blkmq with its defaults, blkmq with waiter_reaps=0 (the reaper completes
# everything, as before issue 13) and blkmq with a poll queue, ROUNDS
# times, and prints medians, ratios to fio and each run's clat p99.
# Usage: bench/uring_matrix.sh [blkmq] [rounds] [runtime] [depths] [sizes]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/uring_files.sh
export SHOW='clat percentiles \([a-z]+\)' SHOW2='99.00th=\[ *[0-9]+\]'
cell() {
  bench/alternate.sh "$ROUNDS" \
    "fio io_uring" "fio --ioengine=io_uring --thread $job" \
    "blkmq uring" "$BLKMQ bench --driver=uring $job" \
    "blkmq uring waiter_reaps=0" "$BLKMQ bench --driver=uring --waiter_reaps=0 $job" \
    "blkmq uring poll queue" "$BLKMQ bench --driver=uring --poll_queues=1 --hipri=1 $job"
}
each_cell cell
