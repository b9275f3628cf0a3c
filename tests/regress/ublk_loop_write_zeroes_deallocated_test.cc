// Bug: the ublk loop target turned write-zeroes into a hole punch, so the
// zeroed range lost its blocks (blkmq's write_zeroes promises it never
// deallocates: the NBD server honours NO_HOLE with it). Fixed: ZERO_RANGE
// with KEEP_SIZE, as the uring driver does; discard still punches.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/device_test_util.h"
#include "support/fiemap.h"

namespace blkmq::test {
namespace {

constexpr uint64_t kFile = 4 << 20;
constexpr uint32_t kData = 1 << 20;           // written at 0
constexpr uint64_t kZeroOff = 256 << 10;      // zeroed inside it
constexpr uint32_t kZeroLen = 512 << 10;

// Creates `path` as a sparse file of `size` bytes: 0 or -1 (errno set).
int truncate_new(const std::string& path, uint64_t size) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  const int r = ftruncate(fd, static_cast<off_t>(size));
  close(fd);
  return r;
}

BlkStatus submit_and_wait(Queue& q, ReqOp op, uint64_t off, uint32_t len) {
  devtest::Waiter w;
  devtest::IoSlot s;
  s.prep(op, off, len, &w);
  q.submit_bio(&s.bio);
  EXPECT_TRUE(w.wait(1));
  return s.bio.status;
}

TEST(UblkLoopWriteZeroesDeallocated, ZeroedRangeStaysAllocatedAndReadsZeros) {
  devtest::TempDir dir("ublk-wz");
  const std::string path = dir.file("loop.img");
  {
    ASSERT_EQ(truncate_new(path, kFile), 0) << path << ": " << strerror(errno);
    auto r = create_device("ublk", {{"target", "loop"}, {"filename", path}});
    if (!r && r.status().message().find("io_uring") != std::string::npos)
      GTEST_SKIP() << "io_uring is not available here: " << r.status().message();
    ASSERT_TRUE(r.ok()) << r.status().message();
    Queue& q = (*r)->queue();
    const std::vector<unsigned char> data = devtest::pattern(kData, 7);
    ASSERT_EQ(q.write_sync(data.data(), 0, kData), BlkStatus::ok);
    ASSERT_EQ(q.flush_sync(), BlkStatus::ok);
    std::vector<FileExtent> ext;
    const int err = file_extents(path, &ext);
    if (err == EOPNOTSUPP) GTEST_SKIP() << "no FIEMAP on the file system of " << path;
    ASSERT_EQ(err, 0) << strerror(err);
    ASSERT_EQ(allocated_bytes(ext, 0, kData), kData) << "the written data is not allocated";

    const BlkStatus st = submit_and_wait(q, ReqOp::write_zeroes, kZeroOff, kZeroLen);
    if (st == BlkStatus::notsupp) GTEST_SKIP() << "the file system of " << path << " has no ZERO_RANGE";
    ASSERT_EQ(st, BlkStatus::ok);
    std::vector<unsigned char> out(kData, 0xff);
    ASSERT_EQ(q.read_sync(out.data(), 0, kData), BlkStatus::ok);
    EXPECT_TRUE(std::all_of(out.begin() + kZeroOff, out.begin() + kZeroOff + kZeroLen,
                            [](unsigned char c) { return c == 0; }));
    EXPECT_TRUE(std::equal(out.begin(), out.begin() + kZeroOff, data.begin()));
    EXPECT_TRUE(std::equal(out.begin() + kZeroOff + kZeroLen, out.end(), data.begin() + kZeroOff + kZeroLen));
    ASSERT_EQ(file_extents(path, &ext), 0);
    EXPECT_EQ(allocated_bytes(ext, kZeroOff, kZeroLen), kZeroLen) << "write-zeroes deallocated the range";
    EXPECT_EQ(allocated_bytes(ext, 0, kData), kData);

    // Discard may still free the blocks (and reads zeros all the same).
    ASSERT_EQ(submit_and_wait(q, ReqOp::discard, kZeroOff, kZeroLen), BlkStatus::ok);
    ASSERT_EQ(file_extents(path, &ext), 0);
    EXPECT_EQ(allocated_bytes(ext, kZeroOff, kZeroLen), 0u) << "discard left the range allocated";
  }
}

}  // namespace
}  // namespace blkmq::test
