#!/usr/bin/env bash
# Per-tenant limits over NBD (issue 28): one blkmq nbd export with two
# names, each in its own I/O group (--group, --alias NAME=W@PATH); the
# first group's io.max holds it to LIMIT read IOPS, the second has none.
# Two fio nbd clients (4k random reads, iodepth 16, one connection each)
# run at once for RUNTIME seconds, ROUNDS times; each round prints both
# clients' IOPS and the limited one's as a share of LIMIT. Then the same
# with no limit set, so the unlimited rate of the pair is known.
# Usage: bench/nbd_tenants.sh [path/to/blkmq] [limit] [rounds] [runtime] [driver args...]
#   default driver: null with a 20 us completion (timer mode), 1 GiB
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
LIMIT=${2:-5000}
ROUNDS=${3:-3}
RT=${4:-10}
shift $(($# < 4 ? $# : 4))
DRIVER=("$@")
[ ${#DRIVER[@]} -gt 0 ] || DRIVER=(--driver=null --size=1024 --irqmode=2 --completion_nsec=20000)
cd "$(dirname "$0")/.."
S=/tmp/blkmq-nbd-tenants.$$.sock
JOB=$(mktemp /tmp/blkmq-nbd-tenants.XXXXXX.fio)
trap 'rm -f "$JOB" "$S"' EXIT
cat >"$JOB" <<EOF
[global]
ioengine=nbd
rw=randread
bs=4k
iodepth=16
time_based=1
runtime=$RT
[limited]
uri=nbd+unix:///?socket=$S
[free]
uri=nbd+unix:///free?socket=$S
EOF

# One run: blkmq nbd with the attributes given, fio as its --run command;
# prints "limited_iops free_iops".
run() {
  local out
  out=$("$BLKMQ" nbd --socket="$S" "${DRIVER[@]}" --group=/limited --alias=free=100@/free "$@" \
    --run "fio --output-format=json $JOB" 2>/dev/null)
  python3 -c '
import json, sys
t = sys.stdin.read()
j = json.loads(t[t.find("{"):])
print(" ".join("%.0f" % x["read"]["iops"] for x in j["jobs"]))' <<<"$out"
}

for ((r = 1; r <= ROUNDS; r++)); do
  read -r lim free < <(run --attr "cgroup/limited/io.max=riops=$LIMIT")
  printf 'round %d  riops=%s: limited %s IOPS (%.3f of the limit), free %s IOPS\n' "$r" "$LIMIT" "$lim" \
    "$(echo "$lim / $LIMIT" | bc -l)" "$free"
  read -r lim free < <(run)
  printf 'round %d  no limit:   limited %s IOPS, free %s IOPS\n' "$r" "$lim" "$free"
done
