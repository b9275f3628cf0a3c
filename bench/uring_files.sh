# Sourced by the uring benchmarks: the matrix's arguments and its two
# files, made once. DEV is device-bound (written data on the root disk),
# CACHED is fallocated, so its O_DIRECT reads hit unwritten extents and
# never touch the disk.
BLKMQ=${1:-build/release/tools/blkmq}
ROUNDS=${2:-3}
RT=${3:-3}
DEPTHS=${4:-"1 32 128"}
SIZES=${5:-"4k 128k"}
DEV=/var/tmp/blkmq-uring-device.dat
CACHED=/var/tmp/blkmq-uring-cached.dat
[ -f "$DEV" ] || dd if=/dev/urandom of="$DEV" bs=1M count=256 oflag=direct status=none
[ -f "$CACHED" ] || fallocate -l 1G "$CACHED"
# Runs "$@" once per cell of the matrix (file x size x depth), with $job
# set to the cell's fio job options.
each_cell() {
  local f bs qd
  for f in "$DEV" "$CACHED"; do
    for bs in $SIZES; do
      for qd in $DEPTHS; do
        echo "== $(basename "$f") bs=$bs iodepth=$qd"
        job="--name=x --filename=$f --direct=1 --rw=randread --bs=$bs --iodepth=$qd --runtime=$RT --time_based"
        "$@"
      done
    done
  done
}
