#!/usr/bin/env bash
# Instructions per I/O, from callgrind: run the same job for two sizes and
# divide the difference by the difference in I/Os, so set-up and teardown
# cancel out. Compares `blkmq bench` on the null device with fio's null
# engine. With scheduler names after the binary, measures `blkmq bench` on
# the null device once per scheduler instead (the per-scheduler cost).
# EXTRA: more options for blkmq bench (e.g. EXTRA=--blktrace=/tmp/t, the
# cost of tracing).
# Usage: [EXTRA=...] bench/callgrind_per_io.sh [path/to/blkmq [scheduler...]]
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
[ $# -gt 0 ] && shift
JOB="--name=x --rw=randread --bs=4k --iodepth=32 --iodepth_batch_submit=8 --iodepth_batch_complete=8 --gtod_reduce=1"
# Valgrind has no rseq, so each CPU-id read (base::this_cpu) falls back to
# sched_getcpu(), some 50 instructions that natively are one load; the
# second figure is that fallback's share, so the native count is about the
# difference.
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
count() {  # file, command... -> "instructions getcpu-fallback-instructions"
  local f=$OUT/$1; shift
  local total
  total=$(valgrind --tool=callgrind --callgrind-out-file="$f" "$@" 2>&1 | sed -n 's/.*Collected : //p')
  local cpu
  cpu=$(callgrind_annotate --inclusive=yes --threshold=100 "$f" 2>/dev/null |
    awk '/this_cpu_slow\(\)/ && !n++ {gsub(",", "", $1); print $1}')
  echo "$total ${cpu:-0}"
}
per_io() {  # label, command prefix
  local label=$1; shift
  local a b
  read -r a ac < <(count a "$@" --size=200m)
  read -r b bc < <(count b "$@" --size=400m)
  echo "$label: $(( (b - a) / 51200 )) instructions per I/O, $(( (bc - ac) / 51200 )) of them valgrind's getcpu fallback"
}
if [ $# -gt 0 ]; then
  for sched in "$@"; do
    per_io "blkmq bench, null irqmode=0, scheduler=$sched" \
      "$BLKMQ" bench --driver=null --irqmode=0 --scheduler="$sched" $JOB ${EXTRA:-}
  done
  exit 0
fi
per_io "blkmq bench, null irqmode=0" "$BLKMQ" bench --driver=null --irqmode=0 $JOB ${EXTRA:-}
per_io "fio, ioengine=null" fio --thread --ioengine=null $JOB
