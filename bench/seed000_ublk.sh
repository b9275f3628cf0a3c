#!/usr/bin/env bash
# Seed 000 on the ublk null target (ublk devices default to mq-deadline):
# queue/sched_insert_run=sync (the seed's "after": the submitter runs the hw
# queue after an unplugged scheduler insert) against async (the "before":
# kblockd runs it). fio-style job: io_uring engine, 4k randread, qd16, one
# job; batches of at most two are not plugged, as io_uring does.
# Usage: bench/seed000_ublk.sh [path/to/blkmq] [rounds] [runtime]
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
ROUNDS=${2:-3}
RT=${3:-3}
job="--name=x --rw=randread --bs=4k --iodepth=16 --runtime=$RT --time_based"
ublk="$BLKMQ bench --driver=ublk --target=null --nr_hw_queues=1 --scheduler=mq-deadline $job"
null="$BLKMQ bench --driver=null --submit_queues=1 --irqmode=1 --scheduler=mq-deadline $job"
# The seed's last row: four single-queue ublk devices, one job on each.
ublk4="$ublk --ndevices=4 --numjobs=4 --group_reporting"
cd "$(dirname "$0")/.."
for dev in ublk ublk4 null; do
  cmd=${!dev}
  echo "== $dev, one hw queue per device, mq-deadline"
  bench/alternate.sh "$ROUNDS" "$dev sched_insert_run=sync" "$cmd --attr queue/sched_insert_run=sync" \
    "$dev sched_insert_run=async" "$cmd --attr queue/sched_insert_run=async"
done
