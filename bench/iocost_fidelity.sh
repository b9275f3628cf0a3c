#!/usr/bin/env bash
# io.cost against the kernel's blk-iocost on one loop device over a 1 GiB
# file on the root disk: two random readers (4 KiB, iodepth 16, disjoint
# halves of the device) in groups of io.weight A and B, io.cost enabled
# with the device's defaults (ctrl=auto) on both sides.
#
# Usage: bench/iocost_fidelity.sh [--blkmq PATH] [--file PATH] [--runtime S]
#          [--reps N] [--weights A:B]
#
#   kernel: two fio processes, each moved into a cgroup v2 group whose
#           io.weight is A or B, on /dev/loopN with the root's io.cost.qos
#           at "MAJ:MIN enable=1" (and back to enable=0 after);
#   blkmq:  blkmq bench --driver=uring on the same /dev/loopN, one job file
#           whose two jobs join groups with fio's cgroup=, with
#           --attr cgroup/io.cost.qos=enable=1 and each group's io.weight.
# The two sides alternate, kernel first; the report gives each run's IOPS
# and the second reader's share, and each side's median share.
#
# The kernel's io.cost lives in cgroup v2's io controller. Where cgroup v1's
# blkio hierarchy holds the block controller (as on these machines) and has
# no child groups, it is unmounted for the run and mounted again at the
# end; otherwise the script says why it cannot run and exits 0.
#
# Needs root, losetup, fio and python3 (exit 0 with a message if missing).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BLKMQ="$ROOT/build/release/tools/blkmq"
FILE=/var/tmp/blkmq-fidelity.img
RUNTIME=10
REPS=3
WEIGHTS=100:300
V1=/sys/fs/cgroup/blkio
V2=""
V1_UNMOUNTED=0
V2_MOUNTED=""
IO_ENABLED=0
LOOP=""
DEVNO=""
WORK=""

log() { echo "iocost_fidelity: $*" >&2; }
skip_all() { log "skipped: $*"; exit 0; }

while [ $# -gt 0 ]; do
  case "$1" in
    --blkmq) BLKMQ=$2; shift ;;
    --file) FILE=$2; shift ;;
    --runtime) RUNTIME=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --weights) WEIGHTS=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) log "unknown argument $1"; exit 2 ;;
  esac
  shift
done
WA=${WEIGHTS%%:*}
WB=${WEIGHTS##*:}

[ "$(id -u)" = 0 ] || skip_all "needs root (loop devices, cgroups)"
for t in losetup fio python3; do command -v "$t" >/dev/null || skip_all "$t not found"; done
[ -x "$BLKMQ" ] || skip_all "no blkmq binary at $BLKMQ"

cleanup() {
  local rc=$?
  if [ -n "$V2" ]; then
    [ -n "$DEVNO" ] && [ -e "$V2/io.cost.qos" ] && echo "$DEVNO enable=0" >"$V2/io.cost.qos" 2>/dev/null
    rmdir "$V2/fid-ca" "$V2/fid-cb" 2>/dev/null || true
    [ "$IO_ENABLED" = 1 ] && echo -io >"$V2/cgroup.subtree_control" 2>/dev/null
  fi
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  [ -n "$V2_MOUNTED" ] && umount "$V2_MOUNTED" && rmdir "$V2_MOUNTED"
  if [ "$V1_UNMOUNTED" = 1 ]; then
    # The hierarchy can be mounted again only once v2 has let go of io.
    for _ in $(seq 50); do mount -t cgroup -o blkio cgroup "$V1" 2>/dev/null && break; sleep 0.1; done
    mountpoint -q "$V1" || log "could not mount $V1 again: mount -t cgroup -o blkio cgroup $V1"
  fi
  [ -n "$WORK" ] && rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT INT TERM

# cgroup v2 with the io controller available at its root.
setup_cgroup2() {
  V2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
  if [ -z "$V2" ]; then
    V2_MOUNTED=$(mktemp -d /tmp/iocost-cg2.XXXXXX)
    mount -t cgroup2 none "$V2_MOUNTED"
    V2=$V2_MOUNTED
  fi
  if ! grep -qw io "$V2/cgroup.controllers"; then
    mountpoint -q "$V1" || skip_all "the io controller is not available in $V2 and $V1 is not mounted"
    [ -z "$(find "$V1" -mindepth 1 -type d -print -quit)" ] ||
      skip_all "$V1 has child groups: the block controller cannot leave cgroup v1"
    # Another mount namespace may hold the hierarchy (then it is "busy", or
    # it outlives a lazy unmount and io never comes to v2).
    umount "$V1" 2>/dev/null || skip_all "$V1 is busy (held elsewhere): the block controller cannot leave cgroup v1"
    V1_UNMOUNTED=1
    # The v1 hierarchy goes away asynchronously.
    for _ in $(seq 50); do grep -qw io "$V2/cgroup.controllers" && break; sleep 0.1; done
    grep -qw io "$V2/cgroup.controllers" || skip_all "io did not become available in $V2"
  fi
  if ! grep -qw io "$V2/cgroup.subtree_control"; then
    echo +io >"$V2/cgroup.subtree_control"
    IO_ENABLED=1
  fi
  [ -e "$V2/io.cost.qos" ] || skip_all "this kernel has no io.cost (CONFIG_BLK_CGROUP_IOCOST)"
}

prepare() {
  if [ ! -f "$FILE" ] || [ "$(stat -c %s "$FILE")" -ne $((1 << 30)) ]; then
    log "writing $FILE (1 GiB)"
    fio --name=fill --filename="$FILE" --size=1g --rw=write --bs=1M --direct=1 --ioengine=psync \
      --output=/dev/null >/dev/null
  fi
  LOOP=$(losetup --direct-io=on --show -f "$FILE")
  DEVNO=$(cat "/sys/block/$(basename "$LOOP")/dev")
  echo none >"/sys/block/$(basename "$LOOP")/queue/scheduler"
  WORK=$(mktemp -d)
  cat >"$WORK/job.fio" <<EOF
[global]
rw=randread
bs=4k
iodepth=16
size=512m
runtime=${RUNTIME}s
time_based=1
cgroup_nodelete=1

[a]
cgroup=fid-ca
offset=0

[b]
cgroup=fid-cb
offset=512m
EOF
}

# The IOPS of one fio/blkmq JSON output's jobs, space-separated.
iops_of() {
  python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
print(" ".join(str(round(j["read"]["iops"])) for j in d["jobs"]))' "$1"
}

run_kernel() {
  mkdir -p "$V2/fid-ca" "$V2/fid-cb"
  echo "default $WA" >"$V2/fid-ca/io.weight"
  echo "default $WB" >"$V2/fid-cb/io.weight"
  echo "$DEVNO enable=1" >"$V2/io.cost.qos"
  local g off pids=()
  for g in a b; do
    off=0
    [ "$g" = b ] && off=512m
    sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$V2/fid-c$g" \
      fio --name="$g" --filename="$LOOP" --rw=randread --bs=4k --iodepth=16 --direct=1 --ioengine=io_uring \
      --offset="$off" --size=512m --runtime="$RUNTIME" --time_based --output-format=json \
      --output="$WORK/k-$g.json" &
    pids+=($!)
  done
  wait "${pids[@]}"
  echo "$DEVNO enable=0" >"$V2/io.cost.qos"
  rmdir "$V2/fid-ca" "$V2/fid-cb"
  echo "$(iops_of "$WORK/k-a.json") $(iops_of "$WORK/k-b.json")"
}

run_blkmq() {
  "$BLKMQ" bench --driver=uring --filename="$LOOP" --attr 'cgroup/io.cost.qos=enable=1' \
    --attr "cgroup/fid-ca/io.weight=$WA" --attr "cgroup/fid-cb/io.weight=$WB" \
    --output-format=json "$WORK/job.fio" >"$WORK/b.json" 2>"$WORK/b.err" || {
    cat "$WORK/b.err" >&2
    return 1
  }
  iops_of "$WORK/b.json"
}

setup_cgroup2
prepare
log "loop $LOOP ($DEVNO), weights $WA:$WB, $REPS reps of ${RUNTIME}s, kernel $(uname -r)"
echo "| rep | kernel a / b IOPS | kernel b share | blkmq a / b IOPS | blkmq b share |"
echo "|---|---|---|---|---|"
KS=() BS=()
for rep in $(seq "$REPS"); do
  read -r ka kb < <(run_kernel)
  read -r ba bb < <(run_blkmq)
  ks=$(python3 -c "print(f'{$kb / ($ka + $kb):.3f}')")
  bs=$(python3 -c "print(f'{$bb / ($ba + $bb):.3f}')")
  KS+=("$ks") BS+=("$bs")
  echo "| $rep | $ka / $kb | $ks | $ba / $bb | $bs |"
done
med() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo
echo "median b share: kernel $(med "${KS[@]}"), blkmq $(med "${BS[@]}") (weights $WA:$WB: $(python3 -c "print(f'{$WB / ($WA + $WB):.3f}')") by weight)"
