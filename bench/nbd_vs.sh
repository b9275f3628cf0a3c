#!/usr/bin/env bash
# blkmq nbd against nbdkit and qemu-nbd with fio's nbd engine, alternating
# the servers run by run (bench/alternate.sh): 4k random reads and writes at
# iodepth 16 and 64 per connection, with 1 and 4 connections (numjobs: one
# connection per job). Memory: blkmq nbd's null driver (memory_backed=1)
# against nbdkit's memory plugin. File (on the disk FILE lives on, through
# the page cache, each server's default): blkmq nbd's uring driver against
# qemu-nbd (cache=writeback, aio=threads, its defaults) on the same file.
# Every server runs with its default options, on a Unix socket.
# Then large requests (see large() below).
# Usage: [LARGE_ONLY=1] bench/nbd_vs.sh [path/to/blkmq] [file] [rounds] [runtime]
set -euo pipefail
BLKMQ=${1:-build/release/tools/blkmq}
FILE=${2:-/var/tmp/blkmq-nbd-bench.dat}
ROUNDS=${3:-3}
RT=${4:-3}
cd "$(dirname "$0")/.."
S=/tmp/blkmq-nbd-vs.sock
small() {
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
}

# Large requests (issue 26): 512 MiB copied by nbdcopy into each server's
# memory export (blkmq nbd null memory_backed, nbdkit memory, qemu-nbd on a
# raw file in /dev/shm) with 32 MiB and with 256 KiB requests, in plaintext
# and over TLS (PSK), the servers alternated round by round. Prints the
# copy's wall time and the server's CPU seconds (utime + stime from
# /proc/PID/stat, read before it is stopped). Runs after the 4k table, or
# alone with LARGE_ONLY=1.
large() {
  local src=/var/tmp/blkmq-nbd-large.src dir shm=/dev/shm/blkmq-nbd-large.img
  [ -f "$src" ] || dd if=/dev/urandom of="$src" bs=1M count=512 status=none
  dir=$(mktemp -d)
  psktool -u alice -p "$dir/keys.psk" >/dev/null
  local tck; tck=$(getconf CLK_TCK)
  for tls in plain psk; do
    local btls="" ktls="" qtls="" uri="nbd+unix:///?socket=$S"
    if [ "$tls" = psk ]; then
      btls="--tls=require --tls-psk=$dir/keys.psk"
      ktls="--tls=require --tls-psk=$dir/keys.psk"
      qtls="--object tls-creds-psk,id=tls0,endpoint=server,dir=$dir --tls-creds tls0"
      uri="nbds+unix://alice@/?socket=$S&tls-psk-file=$dir/keys.psk"
    fi
    for rs in 33554432 262144; do
      for ((r = 1; r <= ROUNDS; r++)); do
        for srv in blkmq nbdkit qemu-nbd; do
          rm -f "$S"
          case $srv in
            blkmq) $BLKMQ nbd --socket="$S" --driver=null --memory_backed=1 --size=512 $btls 2>/dev/null & ;;
            nbdkit) nbdkit -f -U "$S" $ktls memory 512M & ;;
            qemu-nbd) truncate -s 512M "$shm"; qemu-nbd -f raw -k "$S" -e 8 -t $qtls "$shm" & ;;
          esac
          local pid=$!
          while [ ! -S "$S" ]; do sleep 0.02; done
          local t0 t1 cpu
          t0=$(date +%s.%N)
          nbdcopy --request-size="$rs" "$src" "$uri"
          t1=$(date +%s.%N)
          cpu=$(awk -v t="$tck" '{printf "%.2f", ($14 + $15) / t}' "/proc/$pid/stat")
          kill "$pid"; wait "$pid" 2>/dev/null || true
          printf 'large %-5s request=%-9s round %d %-8s wall %.2f s  server cpu %s s\n' "$tls" "$rs" "$r" "$srv" \
            "$(echo "$t1 - $t0" | bc)" "$cpu"
        done
      done
    done
  done
  rm -rf "$dir" "$shm"
}

[ "${LARGE_ONLY:-0}" = 1 ] || small
large
