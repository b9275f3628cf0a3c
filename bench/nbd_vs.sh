#!/usr/bin/env bash
# blkmq nbd against nbdkit and qemu-nbd with fio's nbd engine, alternating
# the servers run by run (bench/alternate.sh): 4k random reads and writes at
# iodepth 16 and 64 per connection, with 1 and 4 connections (numjobs: one
# connection per job). Memory: blkmq nbd's null driver (memory_backed=1)
# against nbdkit's memory plugin. File (on the disk FILE lives on, through
# the page cache, each server's default): blkmq nbd's uring driver against
# qemu-nbd (cache=writeback, aio=threads, its defaults) on the same file.
# Every server runs with its default options, on a Unix socket.
# Usage: bench/nbd_vs.sh [path/to/blkmq] [file] [rounds] [runtime]
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
FILE=${2:-/var/tmp/blkmq-nbd-bench.dat}
ROUNDS=${3:-3}
RT=${4:-3}
cd "$(dirname "$0")/.."
S=/tmp/blkmq-nbd-vs.sock
[ -f "$FILE" ] || { dd if=/dev/urandom of="$FILE" bs=1M count=1024 status=none; }
for rw in randread randwrite; do
  for qd in 16 64; do
    for jobs in 1 4; do
      fio="fio --name=x --ioengine=nbd --uri=nbd+unix:///?socket=$S --rw=$rw --bs=4k --iodepth=$qd --numjobs=$jobs"
      fio="$fio --group_reporting --time_based --runtime=$RT"
      echo "== $rw 4k iodepth=$qd connections=$jobs"
      bench/alternate.sh "$ROUNDS" \
        "blkmq nbd null memory_backed" "$BLKMQ nbd --socket=$S --driver=null --memory_backed=1 --size=1024 --run '$fio' 2>/dev/null" \
        "nbdkit memory" "nbdkit -U $S memory 1G --run '$fio'" \
        "blkmq nbd uring file" "$BLKMQ nbd --socket=$S --driver=uring --filename=$FILE --run '$fio' 2>/dev/null" \
        "qemu-nbd file" "rm -f $S; qemu-nbd -f raw -k $S -e 8 -t $FILE & p=\$!; while [ ! -S $S ]; do sleep 0.02; done; $fio; kill \$p; wait \$p || true"
    done
  done
done
