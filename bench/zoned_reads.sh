#!/usr/bin/env bash
# Reads to other zones while a zone's writes are plugged (issue 30): the
# null device, zoned, with a 100 us completion timer and 32 tags; a reader
# (4k random, depth 16, in zones 800 and up) alone, then beside a
# sequential writer (64k, depth 64, from zone 0) whose bios wait in their
# zone's write plug, then the same pair on the device without zones, where
# the writer's requests hold tags. The reader's IOPS come first in each
# report; alternating rounds (bench/alternate.sh), medians and ratios.
# Usage: bench/zoned_reads.sh [path/to/blkmq] [rounds] [runtime]
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
ROUNDS=${2:-5}
RT=${3:-3}
cd "$(dirname "$0")/.."
dev="--driver=null --irqmode=2 --completion_nsec=100000 --hw_queue_depth=32 --scheduler=none"
reader="--name=r --rw=randread --bs=4k --iodepth=16 --offset=200g --size=40g --runtime=$RT --time_based"
writer="--name=w --rw=write --bs=64k --iodepth=64 --offset=0 --size=100g --runtime=$RT"
bench/alternate.sh "$ROUNDS" \
  "reads alone, zoned" "$BLKMQ bench $dev --zoned=1 $reader" \
  "reads + plugged writes, zoned" "$BLKMQ bench $dev --zoned=1 $reader $writer" \
  "reads + writes, not zoned" "$BLKMQ bench $dev --zoned=0 $reader $writer"
