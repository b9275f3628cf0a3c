#!/usr/bin/env bash
# Two builds of blkmq nbd against each other, with nbdkit's memory plugin
# in the same rounds: the in-memory cells of bench/nbd_vs.sh (blkmq nbd's
# null driver with memory_backed=1, fio's nbd engine, 4k,
# 1 and 4 connections), alternated run by run (bench/alternate.sh).
# RWS: the fio rw modes to run (default "randwrite randread"); QD: the
# iodepth per connection (default 16).
# Usage: bench/nbd_ab.sh path/to/blkmq-A path/to/blkmq-B [rounds] [runtime]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BLKMQ_A BLKMQ_B [rounds] [runtime]" >&2; exit 2; }
A=$1
B=$2
ROUNDS=${3:-5}
RT=${4:-3}
cd "$(dirname "$0")/.."
S=/tmp/blkmq-nbd-ab.sock
QD=${QD:-16}
for rw in ${RWS:-randwrite randread}; do
  for jobs in 1 4; do
    fio="fio --name=x --ioengine=nbd --uri=nbd+unix:///?socket=$S --rw=$rw --bs=4k --iodepth=$QD"
    fio="$fio --numjobs=$jobs --group_reporting --time_based --runtime=$RT"
    echo "== $rw 4k iodepth=$QD connections=$jobs"
    bench/alternate.sh "$ROUNDS" \
      "A blkmq nbd" "$A nbd --socket=$S --driver=null --memory_backed=1 --size=1024 --run '$fio' 2>/dev/null" \
      "B blkmq nbd" "$B nbd --socket=$S --driver=null --memory_backed=1 --size=1024 --run '$fio' 2>/dev/null" \
      "nbdkit memory" "nbdkit -U $S memory 1G --run '$fio'"
  done
done
