#!/usr/bin/env bash
# Seed 003 (queue/iosched/insert_lists locked vs split): now a thin caller of
# `blkmq reproduce 003`: the seed's fio line on bfq and on mq-deadline, and
# 8 sequential writers on each (the merge regression case), interleaved,
# with lock contention from queue/iosched/lock_stat.
# Usage: bench/deadline_split.sh [path/to/blkmq] [rounds] [runtime-seconds]
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
exec "$BLKMQ" reproduce 003 --rounds "${2:-3}" --runtime "${3:-3}"
