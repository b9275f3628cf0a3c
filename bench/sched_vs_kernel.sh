#!/usr/bin/env bash
# A scheduler's per-I/O CPU time, function by function, in blkmq and in the
# kernel on the same machine (issue 29). perf samples every CPU (cpu-clock:
# these VMs have no hardware counters, so it is time, not instructions)
# while one job runs the same 4k random-read load (iodepth 32, batches of
# 8) twice: with scheduler none and with SCHED. A function's ns per I/O is
# its sampled time divided by the I/Os the job did; what the scheduler
# costs is what only the SCHED run spends (functions absent under none),
# listed largest first, and the busy (non-idle) total of each run.
#   kernel: fio (io_uring, O_DIRECT) on a loop device over a tmpfs file, the
#           kernel's own SCHED (this kernel has no null_blk). The loop
#           driver's copy and worker are in both runs and cancel out of the
#           "only under SCHED" list; they also evict the scheduler's cache
#           lines between I/Os, which the null device does not do in blkmq.
#   blkmq:  blkmq bench on the null device (irqmode=0), as bench/sched_cost.sh.
# Root; needs perf, fio, losetup and 1 GiB of /dev/shm.
# Usage: bench/sched_vs_kernel.sh [path/to/blkmq] [SCHED] [seconds] [rows]
set -euo pipefail
BLKMQ=$(realpath "${1:-build/release/tools/blkmq}")
SCHED=${2:-mq-deadline}
RT=${3:-4}
ROWS=${4:-20}
OUT=$(mktemp -d)
IMG=/dev/shm/blkmq-sched-vs-kernel.img
LOOP=""
cleanup() {
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  rm -rf "$OUT" "$IMG"
}
trap cleanup EXIT
JOB="--name=x --rw=randread --bs=4k --iodepth=32 --iodepth_batch_submit=8 --iodepth_batch_complete=8
     --gtod_reduce=1 --runtime=$RT --time_based --output-format=json"

dd if=/dev/zero of="$IMG" bs=1M count=1024 status=none
LOOP=$(losetup -f --show "$IMG")
grep -qw "$SCHED" "/sys/block/${LOOP#/dev/}/queue/scheduler" || { echo "the kernel has no $SCHED" >&2; exit 1; }

record() {  # label, command...
  local label=$1; shift
  perf record -q -a -e cpu-clock -F 10000 -o "$OUT/$label.data" -- "$@" $JOB --output="$OUT/$label.json" \
    >/dev/null 2>&1
}
for s in none "$SCHED"; do
  echo "$s" > "/sys/block/${LOOP#/dev/}/queue/scheduler"
  record "kernel-$s" fio --filename="$LOOP" --ioengine=io_uring --direct=1
  record "blkmq-$s" "$BLKMQ" bench --driver=null --irqmode=0 --size=1g --scheduler="$s"
done

python3 - "$OUT" "$SCHED" "$ROWS" <<'EOF'
import json, re, subprocess, sys
out, sched, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
IDLE = {'pv_native_safe_halt', 'default_idle', 'native_safe_halt', 'acpi_idle_do_entry'}

def per_io(label):
    """ns per I/O of each sampled function (idle left out), and the I/Os."""
    ios = json.load(open(f"{out}/{label}.json"))['jobs'][0]['read']['total_ios']
    rep = subprocess.run(['perf', 'report', '-i', f"{out}/{label}.data", '--no-children', '--sort', 'sym',
                          '-F', 'period,sym', '--stdio', '-q'], capture_output=True, text=True).stdout
    d = {}
    for line in rep.splitlines():
        m = re.match(r'\s*(\d+)\s+\[.\]\s+(.+?)\s*$', line)
        if m and m.group(2) not in IDLE:
            d[m.group(2)] = d.get(m.group(2), 0) + int(m.group(1)) / ios
    return d, ios

for who in ('kernel', 'blkmq'):
    base, ia = per_io(f"{who}-none")
    sch, ib = per_io(f"{who}-{sched}")
    only = sorted(((v, k) for k, v in sch.items() if k not in base), reverse=True)
    print(f"{who}: busy ns per I/O none {sum(base.values()):.0f}, {sched} {sum(sch.values()):.0f}; "
          f"I/Os {ia} and {ib}; only under {sched}: {sum(v for v, _ in only):.0f} ns per I/O")
    for v, k in only[:rows]:
        print(f"  {v:7.1f}  {k[:100]}")
EOF
