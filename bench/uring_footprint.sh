#!/usr/bin/env bash
# The buffer footprint behind the cached 128k cells of uring_matrix.sh:
# random 128k reads of the fallocated file (its O_DIRECT reads zero the
# buffer), fio against blkmq bench with its defaults, with every buffer in
# flight at once (iodepth_batch_submit = iodepth) and with a poll queue,
# ROUNDS alternating rounds per depth. docs/PERFORMANCE.md §12 says why.
# Usage: bench/uring_footprint.sh [blkmq] [rounds] [runtime] [depths]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/uring_files.sh "${1:-build/release/tools/blkmq}" "${2:-3}" "${3:-3}" "${4:-1 32 128}" 128k
for qd in $DEPTHS; do
  echo "== cached bs=128k iodepth=$qd"
  job="--name=x --filename=$CACHED --direct=1 --rw=randread --bs=128k --iodepth=$qd --runtime=$RT --time_based"
  bench/alternate.sh "$ROUNDS" \
    "fio io_uring" "fio --ioengine=io_uring --thread $job" \
    "blkmq uring" "$BLKMQ bench --driver=uring $job" \
    "blkmq uring, batch submit = iodepth" "$BLKMQ bench --driver=uring --iodepth_batch_submit=$qd $job" \
    "blkmq uring poll queue" "$BLKMQ bench --driver=uring --poll_queues=1 --hipri=1 $job"
done
