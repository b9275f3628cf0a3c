// What the drivers that do I/O on a file through io_uring (uring, ublk's
// loop target) share: the fallocate mode of discard and write-zeroes, and
// stepping over the part of an iovec array a short transfer already moved.
#pragma once

#include <linux/falloc.h>
#include <sys/uio.h>

#include <cstddef>

#include "blkmq/bio.h"

namespace blkmq {

// The fallocate(2) mode for a discard or write-zeroes request on a file,
// both keeping the file's size. Discard punches a hole (the blocks are
// freed, the range reads zeros). Write-zeroes zeroes the range in place and
// never deallocates: the blocks stay allocated (as unwritten extents where
// the file system has them), so a later write there cannot fail for lack
// of space. blkmq's write_zeroes promises that, and the NBD server relies
// on it to honour NBD_CMD_FLAG_NO_HOLE without a bio flag of its own. A file system
// without ZERO_RANGE (tmpfs) fails it with -EOPNOTSUPP, i.e. notsupp.
// Only for those two ops. Any context; constant.
constexpr int falloc_mode(ReqOp op) {
  return op == ReqOp::discard ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                              : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
}

// After a short transfer of `done` bytes starting at iov[first], trims those
// bytes off the front of iov[first..nr) (the partly moved vector is shrunk
// in place) and returns the index of the vector the rest starts at (nr when
// nothing is left). For continuing a short read or write where it stopped.
// The caller owns the array; O(vectors skipped), no allocation.
inline unsigned iov_advance(iovec* iov, unsigned nr, unsigned first, size_t done) {
  while (done && first < nr) {
    iovec& v = iov[first];
    if (done < v.iov_len) {
      v.iov_base = static_cast<char*>(v.iov_base) + done;
      v.iov_len -= done;
      return first;
    }
    done -= v.iov_len;
    first++;
  }
  return first;
}

}  // namespace blkmq
