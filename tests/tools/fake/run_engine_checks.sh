#!/bin/bash
# Builds `blkmq bench` against the fake core and runs it through its modes.
# Usage: tests/tools/fake/run_engine_checks.sh [extra g++ flags, e.g. -fsanitize=thread]
set -u
cd "$(dirname "$0")/../../.."
BIN=${BIN:-/tmp/blkmq-fake}
g++ -std=c++20 -O2 -g -Wall -Wextra -Wno-unused-parameter -Iinclude -Isrc -Itools "$@" \
  tools/main.cc tools/bench/*.cc tests/tools/fake/fake_core.cc -o "$BIN" -pthread || exit 1
fails=0
check() {  # check WANT_RC ARGS...: runs the bench, compares the exit code
  local want=$1; shift
  "$BIN" bench --driver=fake "$@" >/tmp/fake-out.txt 2>/tmp/fake-err.txt
  local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL (rc=$rc want $want): $*"; cat /tmp/fake-out.txt /tmp/fake-err.txt; fails=$((fails + 1))
  else
    echo "ok   (rc=$rc): $*"
  fi
}
check 0 --rw=randread --iodepth=32 --iodepth_batch_submit=8 --iodepth_batch_complete=8
check 0 --rw=randread --iodepth=32 --iodepth_batch_submit=8 --irqmode=1 --size=16m
check 0 --rw=randrw --iodepth=16 --irqmode=1 --numjobs=4 --group_reporting --size=8m
check 0 --rw=read --ioengine=psync --irqmode=1 --size=4m
check 0 --rw=randread --iodepth=8 --hipri --size=4m
check 0 --rw=randread --iodepth=64 --iodepth_batch_submit=16 --gtod_reduce --time_based --runtime=1 --ramp_time=200ms
check 0 --rw=randwrite --iodepth=16 --verify=crc32c --memory=1 --size=8m --irqmode=1
check 0 --rw=write --iodepth=4 --verify=crc32c --memory=1 --size=1m --bs=64k
check 1 --rw=randwrite --iodepth=16 --verify=crc32c --memory=1 --corrupt=1 --size=1m
check 1 --rw=randread --iodepth=16 --fail_at=100 --size=4m --irqmode=1
check 1 --rw=randread --size=128m
check 1 --rw=randread --iodepth=0
check 0 --rw=randread --iodepth=32 --iodepth_batch_submit=8 --output-format=json --output=/tmp/fake.json --size=4m
python3 -c "import json; j=json.load(open('/tmp/fake.json')); print('json ok:', j['jobs'][0]['read']['total_ios'], 'ios')" \
  || fails=$((fails + 1))
echo "failures: $fails"
[ "$fails" = 0 ]
