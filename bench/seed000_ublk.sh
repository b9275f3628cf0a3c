#!/usr/bin/env bash
# Seed 000 (queue/sched_insert_run async vs sync): now a thin caller of
# `blkmq reproduce 000`, which runs the seed's five rows (null and the ublk
# null target, one and four devices) interleaved and prints medians beside
# the seed's numbers.
# Usage: bench/seed000_ublk.sh [path/to/blkmq] [rounds] [runtime-seconds]
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
exec "$BLKMQ" reproduce 000 --rounds "${2:-3}" --runtime "${3:-3}"
