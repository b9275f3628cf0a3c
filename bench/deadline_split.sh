#!/bin/sh
# Seed 003 on mq-deadline: split insertion lists against the locked insert.
# Usage: bench/deadline_split.sh [path/to/blkmq] [runtime]
# Two workloads:
#  - random 512 B reads from 32 jobs (the seed's fio run: lock contention);
#  - sequential 4 KiB writes from 8 and 32 jobs on few scheduler tags (the
#    0-day report: split must not lose insert-time merges; compare IOPS and
#    the write merges in the report's disk stat).
BLKMQ=${1:-build/rel/tools/blkmq}
RT=${2:-10s}
common="--driver=null --irqmode=2 --completion_nsec=10000 --scheduler=mq-deadline --time_based --runtime=$RT --group_reporting"
for lists in split locked; do
  echo "== randread bs=512 numjobs=32 iodepth=4 insert_lists=$lists"
  "$BLKMQ" bench $common --name=randread --rw=randread --bs=512 --numjobs=32 --iodepth=4 \
    --iodepth_batch_submit=4 --iodepth_batch_complete=4 \
    --attr queue/iosched/insert_lists=$lists
  for jobs in 8 32; do
    echo "== write bs=4k numjobs=$jobs nr_requests=64 insert_lists=$lists"
    "$BLKMQ" bench $common --name=seqwrite --rw=write --bs=4k --numjobs=$jobs --iodepth=16 \
      --attr queue/nr_requests=64 --attr queue/iosched/insert_lists=$lists
  done
done
