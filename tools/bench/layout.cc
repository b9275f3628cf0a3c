// fio's "Laying out IO file": fio (filesetup.c) preallocates a new job file
// and, for a job that reads, writes all of it, because reading blocks that
// were never written measures no device at all: an unwritten extent is
// answered with zeros by the file system, without I/O (uring randread,
// 64 MiB, direct=1 on the root disk: 164k IOPS on a fallocated file, 11.7k
// once it is written; fio on a file it laid out: 10.9k).
#include "bench/layout.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace bench {
namespace {

using blkmq::Status;

constexpr size_t kLayoutChunk = 1 << 20;  // fio writes its file one job block at a time; 1 MiB is plenty

// A job that reads what is on the file before (or without) writing it.
// Verify jobs of rw=write read back only what they wrote, as in fio.
bool job_reads(const JobSpec& j) { return rw_has_reads(j.rw) || !j.read_iolog.empty(); }

// Writes [0, extent) with the job buffers' fill and makes it durable.
// 0 or an errno.
int write_whole_file(int fd, uint64_t extent) {
  std::vector<unsigned char> buf(static_cast<size_t>(std::min<uint64_t>(kLayoutChunk, extent)), kBufferFill);
  for (uint64_t off = 0; off < extent;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), extent - off));
    const ssize_t w = pwrite(fd, buf.data(), n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return EIO;
    off += static_cast<uint64_t>(w);
  }
  return fsync(fd) == 0 ? 0 : errno;
}

}  // namespace

Status lay_out_missing_file(const BenchConfig& cfg) {
  auto it = cfg.device_params.find("filename");
  if (it == cfg.device_params.end() || it->second.empty() || access(it->second.c_str(), F_OK) == 0)
    return Status::OK();
  uint64_t extent = 0;
  const JobSpec* named = nullptr;  // the job fio would name in its message
  bool reads = false;
  for (const JobSpec& j : cfg.jobs) {
    reads = reads || job_reads(j);
    if (!j.size) continue;
    extent = std::max(extent, j.offset + j.size + (j.numjobs - 1) * j.offset_increment);
    if (!named) named = &j;
  }
  if (extent == 0) return Status::OK();
  const std::string& path = it->second;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error(errno, "cannot create " + path + ": " + std::strerror(errno));
  std::fprintf(stderr, "%s: Laying out IO file (1 file / %" PRIu64 "MiB)\n", named->name.c_str(), extent >> 20);
  int err = posix_fallocate(fd, 0, static_cast<off_t>(extent));
  std::string what = "allocate";
  if (err == 0 && reads) {
    err = write_whole_file(fd, extent);
    what = "write";
  }
  close(fd);
  if (err != 0) {
    unlink(path.c_str());
    return Status::error(err, "cannot " + what + " " + std::to_string(extent) + " bytes for " + path + ": " +
                                  std::strerror(err));
  }
  return Status::OK();
}

}  // namespace bench
