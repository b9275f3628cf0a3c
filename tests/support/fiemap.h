// A file's extent map (FS_IOC_FIEMAP), for tests that check what a driver
// or the bench left allocated and whether its extents hold written data.
#pragma once

#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace blkmq::test {

struct FileExtent {
  uint64_t offset = 0;  // logical, bytes
  uint64_t length = 0;
  uint32_t flags = 0;   // FIEMAP_EXTENT_*
};

// Reads the whole extent map of `path` into *out, after writing back its
// dirty pages (FIEMAP_FLAG_SYNC), so delayed allocation shows as real
// extents. Returns 0 or an errno: EOPNOTSUPP where the file system has no
// FIEMAP (tmpfs), so a caller can skip. Any thread; one ioctl per 256
// extents.
inline int file_extents(const std::string& path, std::vector<FileExtent>* out) {
  out->clear();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  constexpr unsigned kBatch = 256;
  const size_t bytes = sizeof(fiemap) + kBatch * sizeof(fiemap_extent);
  auto* fm = static_cast<fiemap*>(std::calloc(1, bytes));
  uint64_t start = 0;
  int err = 0;
  for (bool last = false; !last;) {
    fm->fm_start = start;
    fm->fm_length = FIEMAP_MAX_OFFSET - start;
    fm->fm_flags = FIEMAP_FLAG_SYNC;
    fm->fm_extent_count = kBatch;
    fm->fm_mapped_extents = 0;
    if (ioctl(fd, FS_IOC_FIEMAP, fm) != 0) {
      err = errno;
      break;
    }
    if (fm->fm_mapped_extents == 0) break;
    for (unsigned i = 0; i < fm->fm_mapped_extents; i++) {
      const fiemap_extent& e = fm->fm_extents[i];
      out->push_back({e.fe_logical, e.fe_length, e.fe_flags});
      last = last || (e.fe_flags & FIEMAP_EXTENT_LAST);
    }
    start = out->back().offset + out->back().length;
  }
  std::free(fm);
  close(fd);
  return err;
}

// Bytes of [off, off + len) that some extent covers (allocated, written or
// not).
inline uint64_t allocated_bytes(const std::vector<FileExtent>& ext, uint64_t off, uint64_t len) {
  uint64_t n = 0;
  for (const FileExtent& e : ext) {
    const uint64_t lo = std::max(e.offset, off), hi = std::min(e.offset + e.length, off + len);
    if (hi > lo) n += hi - lo;
  }
  return n;
}

// Bytes of [off, off + len) in extents flagged unwritten (allocated, but
// reads never reach the disk: they return zeros).
inline uint64_t unwritten_bytes(const std::vector<FileExtent>& ext, uint64_t off, uint64_t len) {
  std::vector<FileExtent> u;
  for (const FileExtent& e : ext)
    if (e.flags & FIEMAP_EXTENT_UNWRITTEN) u.push_back(e);
  return allocated_bytes(u, off, len);
}

}  // namespace blkmq::test
