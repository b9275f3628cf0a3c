// The uring device's allocation map: the file's holes and data as lseek
// SEEK_DATA / SEEK_HOLE see them, in whole blocks of the device.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "drivers/extents.h"
#include "drivers/uring/uring_dev.h"

namespace blkmq::uring {
namespace {

// lseek's answer for `whence` from `pos`, clipped to `end`. No data after
// pos (ENXIO) means the rest is a hole. Negative errno on failure.
int64_t seek_clipped(int fd, uint64_t pos, int whence, uint64_t end) {
  const off_t r = lseek(fd, static_cast<off_t>(pos), whence);
  if (r < 0) return errno == ENXIO ? static_cast<int64_t>(end) : -errno;
  return std::min<int64_t>(r, static_cast<int64_t>(end));
}

Status seek_error(const char* what, int64_t neg_err) {
  const int err = static_cast<int>(-neg_err);
  return Status::error(err, std::string("uring: ") + what + ": " + std::strerror(err));
}

}  // namespace

// Holes are reported only in whole blocks: the file system's block may be
// smaller than the device's, and a block that is partly data is data
// (reporting data is always safe; a false hole is not).
Result<std::vector<Extent>> UringDevice::allocation(uint64_t offset, uint64_t length, size_t max_extents) {
  if (!reports_allocation()) return Device::allocation(offset, length, max_extents);
  const uint64_t bs = params_.bs;
  if (offset % bs || length % bs || offset > size_ || length > size_ - offset) {
    return Status::invalid("uring: allocation query out of range or not aligned to bs=" + std::to_string(bs));
  }
  const uint64_t end = offset + length;
  ExtentBuilder map(max_extents);
  uint64_t pos = offset;
  while (pos < end) {
    const int64_t data = seek_clipped(fd_, pos, SEEK_DATA, end);
    if (data < 0) return seek_error("SEEK_DATA", data);
    const uint64_t d = static_cast<uint64_t>(data);
    // The hole's whole blocks: up to the block the data starts in.
    const uint64_t hole_end = d == end ? end : d - d % bs;
    if (hole_end > pos) {
      if (!map.add(hole_end - pos, kExtentHole | kExtentZero)) break;
      pos = hole_end;
      continue;
    }
    const int64_t hole = seek_clipped(fd_, std::max(pos, d), SEEK_HOLE, end);
    if (hole < 0) return seek_error("SEEK_HOLE", hole);
    const uint64_t h = static_cast<uint64_t>(hole);
    // Data runs to the end of the block the hole starts in.
    const uint64_t data_end = std::min(end, h % bs ? h - h % bs + bs : h);
    if (!map.add(std::max(data_end, pos + bs) - pos, 0)) break;
    pos = std::max(data_end, pos + bs);
  }
  return map.take();
}

}  // namespace blkmq::uring
