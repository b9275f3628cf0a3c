#!/usr/bin/env bash
# Fidelity of blkmq's I/O schedulers against the kernel's own, on one loop
# device over a 1 GiB file on the root disk.
#
# Usage: bench/kernel_fidelity.sh [--short] [--blkmq PATH] [--file PATH]
#          [--runtime S] [--reps N] [--only REGEX] [--out FILE.md]
#
#   --short     one rep of 3 s over a subset (first bfq share, deadline
#               writes_starved=2, kyber with a writer): under a minute.
#               Without it: 27 cases x 3 reps x 2 sides x 10 s, about 30 min
#   --blkmq     the blkmq binary (default build/release/tools/blkmq)
#   --file      backing file, created and fully written if missing
#               (default /var/tmp/blkmq-fidelity.img)
#   --runtime   seconds per run (default 10, 3 with --short)
#   --reps      kernel/blkmq pairs per case, interleaved (default 3, 1 with --short)
#   --only      run only the cases whose name matches this extended regex,
#               from all of them (with --short too: then 1 rep of 3 s each)
#   --out       also write the report there
#   --insert-run sync|async
#               blkmq's queue/sched_insert_run (default async). The kernel
#               here (6.18) runs the hardware queue from kblockd after an
#               unplugged scheduler insert (9cbbac29d752); seed 000, whose
#               sync run is blkmq's default, is not in it. The fidelity runs
#               compare schedulers, so the core around them does as the
#               kernel's does. fio's io_uring submits one SQE per enter
#               here (iodepth_batch_submit=1), so every insert is unplugged.
#
# Every case runs one fio job file (bench/fidelity/*.fio) twice over:
#   kernel: fio, O_DIRECT io_uring on /dev/loopN, whose queue/scheduler is
#           the scheduler under test with the case's tunables written to
#           queue/iosched/;
#   blkmq:  blkmq bench --driver=uring on the same /dev/loopN, whose kernel
#           scheduler is none, with blkmq's --scheduler and --attr set to the
#           same values, its tags matched to the loop device's (mq/0/nr_tags),
#           its nr_requests to what the kernel has under that scheduler,
#           and its queue/sched_insert_run to --insert-run.
# So both schedulers see the same device below them (loop, its backing file
# and the root disk); what differs is who schedules. The two sides run
# kernel, blkmq, kernel, blkmq, ... so that drift of the shared machine
# lands on both, and the report gives each side's median and the ratio.
#
# The readers of a job file keep to disjoint halves of the device: a block
# read by two jobs could be merged or cached and blur the share.
#
# Resource control (issue 28): a case's last column sets up I/O groups and
# wbt, in words both sides understand, space-separated:
#   NAME:weight=N        the group's bfq weight (kernel: cgroup v1's
#                        blkio.bfq.weight; blkmq: cgroup/NAME/io.bfq.weight)
#   NAME:                the group alone, with no setting
#   NAME:riops=N,wbps=N  limits (kernel: blkio.throttle.{read,write}_
#                        {iops,bps}_device for the loop device; blkmq:
#                        cgroup/NAME/io.max); also rbps, wiops
#   wbt=USEC             queue/wbt_lat_usec on both (-1 the default, 0 off)
# NAME is a path under the root (p or p/x); the job files put their jobs in
# the groups with fio's cgroup=NAME and cgroup_nodelete=1, which blkmq bench
# takes too. The kernel's groups are made under cgroup v1's blkio mount
# before the run and removed after it.
#
# Needs root, losetup, fio and python3; exits 0 with a message when one is
# missing, and skips a case whose scheduler the kernel lacks. Exits 1 when a
# run fails.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
HELPER="$HERE/kernel_fidelity.py"
JOBDIR="$HERE/fidelity"
FILE_SIZE=$((1 << 30))

# name | scheduler | tunables (queue/iosched/, '-' for the defaults) | job file | metric | in --short | groups
# Metrics (kernel_fidelity.py extract): share = iops of the first job over
# the second; rwratio = read over write iops; lat = the reader's clat;
# rate = every job's iops and MB/s.
SCENARIOS='
bfq/rand-be0-be4/default        | bfq         | -                | bfq-rand-be0-be4      | share   | short
bfq/rand-be0-be4/slice_idle=0   | bfq         | slice_idle=0     | bfq-rand-be0-be4      | share   |
bfq/rand-be0-be4/low_latency=0  | bfq         | low_latency=0    | bfq-rand-be0-be4      | share   |
bfq/seq-be0-be4/default         | bfq         | -                | bfq-seq-be0-be4       | share   |
bfq/seq-be0-be4/slice_idle=0    | bfq         | slice_idle=0     | bfq-seq-be0-be4       | share   |
bfq/seq-be0-be4/low_latency=0   | bfq         | low_latency=0    | bfq-seq-be0-be4       | share   |
bfq/rand-rt-be/default          | bfq         | -                | bfq-rand-rt-be        | share   |
bfq/rand-rt-be/slice_idle=0     | bfq         | slice_idle=0     | bfq-rand-rt-be        | share   |
bfq/rand-rt-be/low_latency=0    | bfq         | low_latency=0    | bfq-rand-rt-be        | share   |
bfq/rand-be-idle/default        | bfq         | -                | bfq-rand-be-idle      | share   |
bfq/rand-be-idle/slice_idle=0   | bfq         | slice_idle=0     | bfq-rand-be-idle      | share   |
bfq/rand-be-idle/low_latency=0  | bfq         | low_latency=0    | bfq-rand-be-idle      | share   |
bfq/lat-seqwrite/low_latency=1  | bfq         | low_latency=1    | bfq-lat-seqwrite      | lat     |
bfq/lat-seqwrite/low_latency=0  | bfq         | low_latency=0    | bfq-lat-seqwrite      | lat     |
deadline/rt-be/default          | mq-deadline | -                | dl-rt-be              | share   |
deadline/rw/writes_starved=1    | mq-deadline | writes_starved=1 | dl-rw-mix             | rwratio |
deadline/rw/writes_starved=2    | mq-deadline | writes_starved=2 | dl-rw-mix             | rwratio | short
deadline/rw/writes_starved=4    | mq-deadline | writes_starved=4 | dl-rw-mix             | rwratio |
kyber/reader-alone              | kyber       | -                | kyber-reader          | lat     |
kyber/reader-seqwrite           | kyber       | -                | kyber-reader-seqwrite | lat     | short
none/reader-alone               | none        | -                | kyber-reader          | lat     |
none/reader-seqwrite            | none        | -                | kyber-reader-seqwrite | lat     |
cgroup/bfq-weights-300-100      | bfq         | -                | cg-bfq-weights        | share   |       | fid-a:weight=300 fid-b:weight=100
cgroup/bfq-tree                 | bfq         | -                | cg-bfq-tree           | share   |       | fid-p:weight=300 fid-q:weight=100 fid-p/x:weight=100 fid-p/y:weight=100
cgroup/throtl-riops1k-wbps10m   | none        | -                | cg-throtl             | rate    |       | fid-lr:riops=1000 fid-lw:wbps=10485760 fid-free:
wbt/reader-bufwrite/on          | none        | -                | wbt-reader-bufwrite   | lat     |       | wbt=-1
wbt/reader-bufwrite/off         | none        | -                | wbt-reader-bufwrite   | lat     |       | wbt=0
'

SHORT=0
BLKMQ=""
FILE=/var/tmp/blkmq-fidelity.img
RUNTIME=""
REPS=""
ONLY=""
OUT=""
INSERT_RUN=async
CMDLINE="$0 $*"

BLKIO=/sys/fs/cgroup/blkio  # cgroup v1's blkio hierarchy (the kernel's groups)
KGROUPS=()       # the kernel groups the current run made, in the order made
WBT_SET=0        # whether the current run wrote the loop device's wbt_lat_usec
LOOP=""          # /dev/loopN once attached
LOOPQ=""         # /sys/block/loopN/queue
CHILD=""         # the fio or blkmq run in progress
WORK=""
FAILED=0
NOTES=()

log() { echo "kernel_fidelity: $*" >&2; }
die() { log "$*"; exit 2; }
# A missing requirement is not a failure of the script: say which, exit 0.
skip_all() { log "skipped: $*"; exit 0; }

usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; }

parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --short) SHORT=1 ;;
      --blkmq) BLKMQ=$2; shift ;;
      --file) FILE=$2; shift ;;
      --runtime) RUNTIME=$2; shift ;;
      --reps) REPS=$2; shift ;;
      --only) ONLY=$2; shift ;;
      --out) OUT=$2; shift ;;
      --insert-run) INSERT_RUN=$2; shift ;;
      -h|--help) usage; exit 0 ;;
      *) usage >&2; die "unknown argument $1" ;;
    esac
    shift
  done
  if [ "$SHORT" = 1 ]; then
    RUNTIME=${RUNTIME:-3}
    REPS=${REPS:-1}
  else
    RUNTIME=${RUNTIME:-10}
    REPS=${REPS:-3}
  fi
  [[ "$RUNTIME" =~ ^[0-9]+$ && "$RUNTIME" -gt 0 ]] || die "--runtime: whole seconds, got $RUNTIME"
  [[ "$REPS" =~ ^[0-9]+$ && "$REPS" -gt 0 ]] || die "--reps: a positive count, got $REPS"
  if [ -n "$BLKMQ" ]; then
    # Named on the command line: a wrong path is the caller's error.
    [ -x "$BLKMQ" ] || die "--blkmq $BLKMQ: not an executable"
  else
    BLKMQ="$ROOT/build/release/tools/blkmq"
    [ -x "$BLKMQ" ] || skip_all "no blkmq binary at $BLKMQ (build it, or pass --blkmq)"
  fi
}

check_requirements() {
  [ "$(id -u)" = 0 ] || skip_all "needs root (loop devices, queue/scheduler)"
  local tool
  for tool in losetup fio python3; do
    command -v "$tool" >/dev/null || skip_all "$tool not found"
  done
  # fio builds without io_uring exist; libaio is as good for O_DIRECT here.
  if fio --enghelp=io_uring >/dev/null 2>&1; then
    FIO_ENGINE=io_uring
  elif fio --enghelp=libaio >/dev/null 2>&1; then
    FIO_ENGINE=libaio
  else
    skip_all "fio has neither the io_uring nor the libaio engine"
  fi
}

cleanup() {
  local rc=$?
  if [ -n "$CHILD" ]; then
    kill "$CHILD" 2>/dev/null || true
    wait "$CHILD" 2>/dev/null || true
  fi
  kernel_groups_remove
  if [ -n "$LOOP" ]; then
    echo none >"$LOOPQ/scheduler" 2>/dev/null || true
    losetup -d "$LOOP" || log "could not detach $LOOP"
  fi
  [ -n "$WORK" ] && rm -rf "$WORK"
  exit "$rc"
}

# A sparse or short file would let the loop device answer reads of holes
# without touching the disk, so every block is written once.
prepare_file() {
  local size blocks bsize
  if [ -f "$FILE" ]; then
    read -r size blocks bsize < <(stat -c '%s %b %B' "$FILE")
    if [ "$size" -eq "$FILE_SIZE" ] && [ $((blocks * bsize)) -ge "$FILE_SIZE" ]; then
      return
    fi
    log "$FILE is not a fully written 1 GiB file: rewriting it"
  fi
  local avail
  avail=$(df --output=avail -B1 "$(dirname "$FILE")" | tail -1)
  [ "$avail" -gt $((FILE_SIZE * 2)) ] || die "$(dirname "$FILE"): less than 2 GiB free"
  log "writing $FILE (1 GiB)"
  fio --name=fill --filename="$FILE" --size="$FILE_SIZE" --rw=write --bs=1M --direct=1 \
    --ioengine=psync --output=/dev/null >/dev/null
}

attach_loop() {
  LOOP=$(losetup --direct-io=on --show -f "$FILE")
  LOOPQ="/sys/block/$(basename "$LOOP")/queue"
  [ "$(cat "/sys/block/$(basename "$LOOP")/loop/dio")" = 1 ] ||
    NOTES+=("$LOOP did not take direct I/O (loop/dio=0): its backing file goes through the page cache")
}

# What the blkmq side copies from the loop device so that both sides see
# the same device geometry.
record_loop_geometry() {
  local b
  b=$(basename "$LOOP")
  echo none >"$LOOPQ/scheduler"
  LOOP_TAGS=$(cat "/sys/block/$b/mq/0/nr_tags")
  LOOP_HWQ=$(ls -d /sys/block/"$b"/mq/*/ | wc -l)
  LOOP_ROT=$(cat "$LOOPQ/rotational")
  LOOP_LBS=$(cat "$LOOPQ/logical_block_size")
  LOOP_MAXKB=$(cat "$LOOPQ/max_sectors_kb")
  LOOP_NR_NONE=$(cat "$LOOPQ/nr_requests")
  LOOP_SCHEDS=$(cat "$LOOPQ/scheduler")
  LOOP_DEVNO=$(cat "/sys/block/$b/dev")
  # blkmq's --uring.bs takes 512..4096; a loop device may have a larger one.
  case "$LOOP_LBS" in 512|1024|2048|4096) ;; *) die "$LOOP: logical block size $LOOP_LBS, blkmq takes 512..4096" ;; esac
}

kernel_has_sched() {
  [ "$1" = none ] || [[ " $(tr -d '[]' <"$LOOPQ/scheduler") " == *" $1 "* ]]
}

# Switching schedulers resets the tunables and nr_requests to the kernel's
# defaults, so a case never inherits the previous one's.
set_kernel_sched() {
  local sched=$1 tunables=$2 kv
  echo none >"$LOOPQ/scheduler"
  echo "$sched" >"$LOOPQ/scheduler"
  [ "$tunables" = - ] && return
  for kv in $tunables; do
    echo "${kv#*=}" >"$LOOPQ/iosched/${kv%%=*}"
  done
}

# Runs "$@" in the background so that a signal's cleanup can stop it. The
# explicit exec makes $! the tool itself: with an EXIT trap set, bash would
# otherwise keep a subshell around it, and killing that leaves the tool
# running on the loop device.
run_child() {
  local out=$1 err=$2 rc=0
  shift 2
  (exec "$@" </dev/null >"$out" 2>"$err") &
  CHILD=$!
  wait "$CHILD" || rc=$?
  CHILD=""
  return "$rc"
}

# A kernel group's setting (the case's groups column) into its v1 file.
kernel_group_set() {
  local dir=$1 k=$2 v=$3 file
  case "$k" in
    weight) file=blkio.bfq.weight ;;
    riops) file=blkio.throttle.read_iops_device ;;
    wiops) file=blkio.throttle.write_iops_device ;;
    rbps) file=blkio.throttle.read_bps_device ;;
    wbps) file=blkio.throttle.write_bps_device ;;
    *) die "groups: unknown setting $k" ;;
  esac
  [ -e "$dir/$file" ] || die "groups: the kernel has no $dir/$file (is bfq loaded for weight=?)"
  if [ "$k" = weight ]; then echo "$v" >"$dir/$file"; else echo "$LOOP_DEVNO $v" >"$dir/$file"; fi
}

# Makes the case's groups under the blkio mount (parents first, each made
# only if missing, so that fio's cgroup= finds them) and writes their
# settings; wbt=USEC goes to the loop device's queue/wbt_lat_usec.
kernel_groups_setup() {
  local spec=$1 tok name kvs kv part path
  [ "$spec" = - ] && return
  [ -d "$BLKIO" ] || die "groups: no cgroup v1 blkio hierarchy at $BLKIO"
  for tok in $spec; do
    if [[ "$tok" == wbt=* ]]; then
      echo "${tok#wbt=}" >"$LOOPQ/wbt_lat_usec"
      WBT_SET=1
      continue
    fi
    name=${tok%%:*} kvs=${tok#*:} path=$BLKIO
    for part in ${name//\// }; do
      path="$path/$part"
      [ -d "$path" ] || { mkdir "$path" && KGROUPS+=("$path"); }
    done
    for kv in ${kvs//,/ }; do kernel_group_set "$path" "${kv%%=*}" "${kv#*=}"; done
  done
}

# Removes the groups the run made, children first (fio left them, by
# cgroup_nodelete, and its threads are gone), and puts wbt back to the
# loop device's default.
kernel_groups_remove() {
  local i
  for ((i = ${#KGROUPS[@]} - 1; i >= 0; i--)); do rmdir "${KGROUPS[$i]}" 2>/dev/null || log "could not remove ${KGROUPS[$i]}"; done
  KGROUPS=()
  if [ "$WBT_SET" = 1 ] && [ -n "$LOOP" ]; then echo -1 >"$LOOPQ/wbt_lat_usec" || true; fi
  WBT_SET=0
}

run_kernel() {
  local sched=$1 tunables=$2 job=$3 out=$4 groups=$5 rc=0
  set_kernel_sched "$sched" "$tunables"
  KERNEL_NR=$(cat "$LOOPQ/nr_requests")
  kernel_groups_setup "$groups"
  run_child "$out" "$out.err" fio --output-format=json --eta=never \
    --filename="$LOOP" --direct=1 --ioengine="$FIO_ENGINE" \
    --runtime="$RUNTIME" --time_based=1 "$job" || rc=$?
  kernel_groups_remove
  return "$rc"
}

# The case's groups as blkmq bench attributes, into BLKMQ_GATTRS: each
# group's weight as cgroup/NAME/io.bfq.weight, its limits together as one
# cgroup/NAME/io.max, wbt=USEC as queue/wbt_lat_usec.
blkmq_group_attrs() {
  local spec=$1 tok name kvs kv limits
  BLKMQ_GATTRS=()
  [ "$spec" = - ] && return
  for tok in $spec; do
    if [[ "$tok" == wbt=* ]]; then
      BLKMQ_GATTRS+=(--attr "queue/wbt_lat_usec=${tok#wbt=}")
      continue
    fi
    name=${tok%%:*} kvs=${tok#*:} limits=""
    for kv in ${kvs//,/ }; do
      if [ "${kv%%=*}" = weight ]; then BLKMQ_GATTRS+=(--attr "cgroup/$name/io.bfq.weight=${kv#*=}")
      else limits="$limits $kv"; fi
    done
    [ -z "$limits" ] || BLKMQ_GATTRS+=(--attr "cgroup/$name/io.max=${limits# }")
  done
}

run_blkmq() {
  local sched=$1 tunables=$2 job=$3 out=$4 groups=$5 kv
  local -a attrs=(--attr "queue/nr_requests=$KERNEL_NR" --attr "queue/sched_insert_run=$INSERT_RUN")
  if [ "$tunables" != - ]; then
    for kv in $tunables; do attrs+=(--attr "queue/iosched/$kv"); done
  fi
  blkmq_group_attrs "$groups"
  attrs+=("${BLKMQ_GATTRS[@]}")
  echo none >"$LOOPQ/scheduler"
  # queue/rotational is read-only in blkmq: its uring driver takes it from
  # the block device it serves, here the loop device's.
  run_child "$out" "$out.err" "$BLKMQ" bench --output-format=json --eta=never \
    --driver=uring --filename="$LOOP" --direct=1 --uring.bs="$LOOP_LBS" \
    --hw_queue_depth="$LOOP_TAGS" --submit_queues="$LOOP_HWQ" --max_sectors=$((LOOP_MAXKB * 2)) \
    --scheduler="$sched" "${attrs[@]}" \
    --runtime="$RUNTIME" --time_based=1 "$job"
}

# One side's run: its metrics go to RESULTS as case, metric, side, rep, value.
record_run() {
  local case=$1 side=$2 rep=$3 kind=$4 out=$5 m
  m=$(python3 "$HELPER" extract "$kind" "$out") || return 1
  while IFS=$'\t' read -r metric value; do
    printf '%s\t%s\t%s\t%s\t%s\n' "$case" "$metric" "$side" "$rep" "$value" >>"$RESULTS"
  done <<<"$m"
}

run_case() {
  local case=$1 sched=$2 tunables=$3 jobname=$4 kind=$5 groups=$6
  local job="$JOBDIR/$jobname.fio" rep side out
  [ -f "$job" ] || die "$case: no job file $job"
  if ! kernel_has_sched "$sched"; then
    log "skipped $case: the kernel offers no $sched for $LOOP"
    NOTES+=("skipped $case: the kernel offers no $sched for loop devices")
    return
  fi
  local depth
  depth=$(python3 "$HELPER" depth "$job")
  # mq-deadline dispatches whatever it holds as long as there is a tag:
  # without more I/Os in flight than the device has tags nothing waits in
  # it and it has nothing to choose between. (bfq holds requests back by
  # itself, idling for its in-service queue, so its cases need no such depth.)
  if [ "$sched" = mq-deadline ] && [ "$depth" -le "$LOOP_TAGS" ]; then
    NOTES+=("$case: the jobs keep $depth I/Os in flight, not more than the $LOOP_TAGS tags")
  fi
  for rep in $(seq 1 "$REPS"); do
    for side in kernel blkmq; do
      out="$WORK/$(echo "$case" | tr '/=' '__').$side.$rep.json"
      log "$case: $side run $rep/$REPS"
      if ! "run_$side" "$sched" "$tunables" "$job" "$out" "$groups"; then
        log "$case: $side run $rep failed:"
        tail -5 "$out.err" >&2
        NOTES+=("$case: $side run $rep failed: $(tail -1 "$out.err")")
        FAILED=1
        continue
      fi
      if [ -s "$out.err" ]; then
        # Warnings (an option blkmq ignores, say) belong in the report once.
        local w
        w=$(head -3 "$out.err" | tr '\n' ' ')
        [[ " ${NOTES[*]-} " == *"$side: $w"* ]] || NOTES+=("$case: $side: $w")
      fi
      record_run "$case" "$side" "$rep" "$kind" "$out" || {
        NOTES+=("$case: $side run $rep: no metrics in its report")
        FAILED=1
      }
    done
  done
}

selected_cases() {
  local name sched tun job kind short groups
  while IFS='|' read -r name sched tun job kind short groups; do
    name=$(echo $name)
    [ -n "$name" ] || continue
    if [ -n "$ONLY" ]; then
      [[ "$name" =~ $ONLY ]] || continue
    elif [ "$SHORT" = 1 ] && [ -z "$(echo $short)" ]; then
      continue
    fi
    groups=$(echo $groups)
    echo "$name $(echo $sched) $(echo $tun) $(echo $job) $(echo $kind) ${groups:--}"
  done <<<"$SCENARIOS"
}

report_header() {
  echo "# blkmq schedulers against the kernel's on $LOOP"
  echo
  echo "- command: \`$CMDLINE\`"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "- kernel: $(uname -r); fio: $(fio --version) ($FIO_ENGINE); blkmq: $BLKMQ"
  echo "- load average at start: $LOAD_START; at end: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
  echo "- backing file: $FILE on $(df --output=source "$FILE" | tail -1)"
  echo "- $LOOP: rotational=$LOOP_ROT, hw queues=$LOOP_HWQ, nr_tags=$LOOP_TAGS," \
    "nr_requests=$LOOP_NR_NONE under none, logical_block_size=$LOOP_LBS, max_sectors_kb=$LOOP_MAXKB," \
    "schedulers: $LOOP_SCHEDS"
  echo "- blkmq side: --driver=uring --hw_queue_depth=$LOOP_TAGS --submit_queues=$LOOP_HWQ" \
    "--uring.bs=$LOOP_LBS --max_sectors=$((LOOP_MAXKB * 2)), queue/nr_requests as the kernel's under" \
    "each scheduler, queue/sched_insert_run=$INSERT_RUN; rotational comes from the loop device"
  echo "- $REPS rep(s) of ${RUNTIME} s per side, kernel and blkmq interleaved; medians"
  echo
}

report() {
  report_header
  if [ -s "$RESULTS" ]; then
    python3 "$HELPER" table "$RESULTS"
  else
    echo "(no results)"
  fi
  if [ "${#NOTES[@]}" -gt 0 ]; then
    echo
    echo "Notes:"
    local n
    for n in "${NOTES[@]}"; do echo "- $n"; done
  fi
}

main() {
  parse_args "$@"
  check_requirements
  cd "$ROOT"
  LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  WORK=$(mktemp -d /tmp/kernel_fidelity.XXXXXX)
  RESULTS="$WORK/results.tsv"
  : >"$RESULTS"
  local cases
  cases=$(selected_cases)
  [ -n "$cases" ] || die "no case selected (--only '$ONLY', --short=$SHORT)"
  prepare_file
  attach_loop
  record_loop_geometry
  while read -r name sched tun job kind groups; do
    run_case "$name" "$sched" "$tun" "$job" "$kind" "$groups"
  done <<<"$cases"
  if [ -n "$OUT" ]; then
    report | tee "$OUT"
  else
    report
  fi
  return "$FAILED"
}

main "$@"
