#!/usr/bin/env bash
# Seed 003 on mq-deadline (or bfq): split insertion lists against the locked
# insert, alternating runs (bench/alternate.sh). Two workloads:
#  - random 512 B reads from 32 jobs at iodepth 4, batches of 4 (the seed's
#    fio run: contention on the scheduler lock);
#  - sequential 4 KiB writes from 8 and 32 jobs, each in its own region, on
#    nr_requests=16 with a device slower than the writers (4 driver tags,
#    10 us per command), so requests wait in the scheduler and merge (the
#    0-day report: split lists must not lose insert-time merges). The
#    write merges of the disk stat are printed beside each run's IOPS.
# Usage: bench/deadline_split.sh [path/to/blkmq] [rounds] [runtime] [scheduler]
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
ROUNDS=${2:-3}
RT=${3:-3}
SCHED=${4:-mq-deadline}
cd "$(dirname "$0")/.."
common="$BLKMQ bench --driver=null --scheduler=$SCHED --time_based --runtime=$RT --group_reporting"
rr="$common --irqmode=1 --name=randread --rw=randread --bs=512 --numjobs=32 --iodepth=4 \
  --iodepth_batch_submit=4 --iodepth_batch_complete=4"
echo "== randread bs=512 numjobs=32 iodepth=4 ($SCHED)"
bench/alternate.sh "$ROUNDS" split "$rr --attr queue/iosched/insert_lists=split" \
  locked "$rr --attr queue/iosched/insert_lists=locked"
for jobs in 8 32; do
  w="$common --irqmode=2 --completion_nsec=10000 --hw_queue_depth=4 --name=seqwrite --rw=write --bs=4k \
    --numjobs=$jobs --iodepth=16 --offset_increment=4g --size=4g --attr queue/nr_requests=16"
  echo "== seqwrite bs=4k numjobs=$jobs iodepth=16 nr_requests=16 ($SCHED)"
  SHOW='merge=[0-9]+/[0-9]+' bench/alternate.sh "$ROUNDS" split "$w --attr queue/iosched/insert_lists=split" \
    locked "$w --attr queue/iosched/insert_lists=locked"
done
