#!/usr/bin/env bash
# The uring driver's non-vectored and registered-buffer paths against fio
# over bench/uring_matrix.sh's cells (random reads, O_DIRECT, a
# device-bound and a cached file). Each cell alternates fio's io_uring
# engine with its defaults (non-vectored) and with --fixedbufs=1, and
# blkmq bench with nonvectored=0 (READV, what blkmq did before), with its
# defaults (READ) and with --fixedbufs=1 (READ_FIXED), ROUNDS times, and
# prints medians and ratios to fio's defaults.
# Usage: bench/uring_fixedbufs.sh [blkmq] [rounds] [runtime] [depths] [sizes]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/uring_files.sh
cell() {
  bench/alternate.sh "$ROUNDS" \
    "fio io_uring" "fio --ioengine=io_uring --thread $job" \
    "fio io_uring fixedbufs" "fio --ioengine=io_uring --thread --fixedbufs=1 $job" \
    "blkmq uring nonvectored=0" "$BLKMQ bench --driver=uring --nonvectored=0 $job" \
    "blkmq uring" "$BLKMQ bench --driver=uring $job" \
    "blkmq uring fixedbufs" "$BLKMQ bench --driver=uring --fixedbufs=1 $job"
}
each_cell cell
