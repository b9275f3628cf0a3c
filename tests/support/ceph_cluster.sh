#!/usr/bin/env bash
# A throw-away single-node Ceph cluster for the rbd driver's tests and
# benchmarks: one monitor, one manager and one OSD on memstore (RAM, no
# disks), auth off, pool size 1, listening on 127.0.0.1 only, everything
# (conf, data, logs, sockets, pids) under DIR.
#
#   ceph_cluster.sh start DIR [IMAGE_SIZE_MIB]  prints DIR/ceph.conf when the
#       cluster is up with pool "rbd" and image "img" (default 1024 MiB);
#       exit 2 (and a reason on stderr) where Ceph is not installed or does
#       not come up, so callers can skip.
#   ceph_cluster.sh stop DIR    stops the daemons by the pids start wrote
#       (DIR/pids), waits for them, and removes DIR.
#   ceph_cluster.sh kill-osd DIR  SIGKILLs the OSD only (a cluster that goes
#       away under I/O).
#
# memstore keeps every object in the OSD's memory: the image costs RAM as
# it is written, up to memstore_device_bytes (4 GiB here).
set -euo pipefail

die_skip() { echo "ceph_cluster: $*" >&2; exit 2; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_for SECONDS CMD...: retries CMD every 0.2 s until it succeeds.
wait_for() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

write_conf() {
  local dir=$1 fsid=$2 port=$3
  cat > "$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$port
public network = 127.0.0.1/32
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
keyring = /dev/null
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
[mon]
mon data = $dir/mon/\$cluster-\$id
[mgr]
mgr data = $dir/mgr/\$cluster-\$id
mgr initial modules =
[osd]
osd data = $dir/osd/\$cluster-\$id
osd objectstore = memstore
memstore device bytes = 4294967296
osd max object size = 134217728
osd op num shards = 2
osd op num threads per shard = 1
EOF
}

start() {
  local dir=$1 size_mib=${2:-1024}
  for b in ceph-mon ceph-mgr ceph-osd ceph monmaptool rbd; do
    command -v $b >/dev/null || die_skip "$b is not installed (apt-get install ceph-mon ceph-mgr ceph-osd ceph-common)"
  done
  mkdir -p "$dir"/{run,log,mon/ceph-a,mgr/ceph-x,osd/ceph-0}
  : > "$dir/pids"
  local fsid port conf
  fsid=$(cat /proc/sys/kernel/random/uuid)
  port=$(free_port)
  write_conf "$dir" "$fsid" "$port"
  conf=$dir/ceph.conf
  local C=(ceph -c "$conf" --connect-timeout 20)

  monmaptool --create --clobber --fsid "$fsid" --addv a "[v2:127.0.0.1:$port]" "$dir/monmap" >/dev/null
  ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" >"$dir/log/mkfs-mon.out" 2>&1 ||
    die_skip "ceph-mon --mkfs failed: $(tail -3 "$dir/log/mkfs-mon.out")"
  ceph-mon -c "$conf" -i a -f >"$dir/log/mon.out" 2>&1 &
  echo $! >> "$dir/pids"
  wait_for 30 "${C[@]}" mon stat || die_skip "the monitor did not answer in 30 s (see $dir/log)"

  ceph-mgr -c "$conf" -i x -f >"$dir/log/mgr.out" 2>&1 &
  echo $! >> "$dir/pids"

  local uuid id
  uuid=$(cat /proc/sys/kernel/random/uuid)
  id=$("${C[@]}" osd new "$uuid") || die_skip "'ceph osd new' failed"
  [ "$id" = 0 ] || die_skip "expected osd id 0, got '$id'"
  ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$uuid" >"$dir/log/mkfs-osd.out" 2>&1 ||
    die_skip "ceph-osd --mkfs failed: $(tail -3 "$dir/log/mkfs-osd.out")"
  ceph-osd -c "$conf" -i 0 -f >"$dir/log/osd.out" 2>&1 &
  echo $! > "$dir/osd.pid"
  cat "$dir/osd.pid" >> "$dir/pids"
  wait_for 60 osd_up "$conf" || die_skip "the OSD did not come up in 60 s (see $dir/log)"

  "${C[@]}" osd pool create rbd 8 8 >/dev/null 2>&1 || die_skip "cannot create pool rbd"
  "${C[@]}" osd pool set rbd size 1 --yes-i-really-mean-it >/dev/null 2>&1 || true
  rbd -c "$conf" pool init rbd || die_skip "rbd pool init failed"
  rbd -c "$conf" create --size "$size_mib" rbd/img || die_skip "rbd create failed"
  echo "$conf"
}

osd_up() {
  ceph -c "$1" --connect-timeout 5 osd dump 2>/dev/null | grep -q '^osd.0 up'
}

stop() {
  local dir=$1
  [ -f "$dir/pids" ] || return 0
  local pids
  pids=$(cat "$dir/pids")
  # shellcheck disable=SC2086
  kill $pids 2>/dev/null || true
  for pid in $pids; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

kill_osd() {
  kill -9 "$(cat "$1/osd.pid")"
}

case "${1:-}" in
  start) start "$2" "${3:-}" ;;
  stop) stop "$2" ;;
  kill-osd) kill_osd "$2" ;;
  *) echo "usage: $0 start DIR [IMAGE_SIZE_MIB] | stop DIR | kill-osd DIR" >&2; exit 1 ;;
esac
