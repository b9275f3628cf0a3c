#!/usr/bin/env bash
# blkmq's rbd driver against fio's own rbd engine on the same image of a
# throw-away single-node cluster (tests/support/ceph_cluster.sh: memstore,
# loopback): 4k random reads and writes at iodepth 16 and 64, alternating
# fio, blkmq (scheduler none and completion=callback, the driver's
# defaults) and blkmq with completion=eventfd ROUNDS times, with medians
# and the ratio to fio (bench/alternate.sh). The image is written in full
# first, so reads reach real objects instead of librbd's shortcut for
# objects that do not exist.
# Writes run twice. With librbd's defaults its cache is write-through until
# the client's first flush. fio's rbd engine flushes right after opening
# the image unless --direct=1 (engines/rbd.c), so by default it writes
# back from its first I/O; blkmq sends no flush of its own, so a job
# without flushes writes through. The first write run therefore also has
# fio --direct=1 (no initial flush, like blkmq); the second sets
# rbd_cache_writethrough_until_flush=false for everyone, the same cache
# mode from the start.
# Usage: bench/rbd_vs_fio.sh [blkmq] [rounds] [runtime_s] [image_mib] [depths]
# With CEPH_CONF set, that cluster's rbd/blkmq-bench image is used (created
# if missing) and no cluster is started.
set -euo pipefail
BLKMQ=$(realpath "${1:-build/release/tools/blkmq}")
ROUNDS=${2:-3}
RT=${3:-10}
MIB=${4:-512}
DEPTHS=${5:-"16 64"}
cd "$(dirname "$0")/.."
IMG=blkmq-bench
if [ -z "${CEPH_CONF:-}" ]; then
  dir=$(mktemp -d /tmp/blkmq-rbd-bench-XXXXXX)
  trap 'tests/support/ceph_cluster.sh stop "$dir"' EXIT
  CEPH_CONF=$(tests/support/ceph_cluster.sh start "$dir" 64)
  export CEPH_CONF
fi
rbd info "rbd/$IMG" >/dev/null 2>&1 || rbd create --size "$MIB" "rbd/$IMG"
fio --name=fill --ioengine=rbd --clientname=admin --pool=rbd --rbdname="$IMG" --rw=write --bs=4m \
    --iodepth=4 >/dev/null
common="--name=x --pool=rbd --rbdname=$IMG --clientname=admin --bs=4k --runtime=$RT --time_based"
export SHOW='clat percentiles \([a-z]+\)' SHOW2='99.00th=\[ *[0-9]+\]'
for cell in randread: randwrite: randwrite:--rbd_cache_writethrough_until_flush=false; do
  rw=${cell%%:*}
  export CEPH_ARGS=${cell#*:}
  for qd in $DEPTHS; do
    echo "== rbd $rw bs=4k iodepth=$qd image=${MIB}MiB CEPH_ARGS=${CEPH_ARGS:-(none)}"
    job="$common --rw=$rw --iodepth=$qd"
    direct=()
    [ "$cell" = randwrite: ] && direct=("fio rbd --direct=1" "fio --ioengine=rbd --direct=1 $job")
    bench/alternate.sh "$ROUNDS" \
      "fio rbd" "fio --ioengine=rbd $job" \
      "${direct[@]}" \
      "blkmq rbd (none, callback)" "$BLKMQ bench --driver=rbd --conf=$CEPH_CONF $job" \
      "blkmq rbd (none, eventfd)" "$BLKMQ bench --driver=rbd --conf=$CEPH_CONF --completion=eventfd $job"
  done
done
