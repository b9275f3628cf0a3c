// Bug: the ublk loop target completed a short write as a short transfer,
// so a write that filled the file system ended with ioerr instead of the
// -ENOSPC the file system gave: the rest was never tried. Fixed: a short
// read or write continues where it stopped (as the uring driver's does)
// and the continuation's -ENOSPC ends the request with nospc.
// The file system is a 1 MiB tmpfs this test mounts (root only; skipped
// elsewhere): its size is exact, so "full" is deterministic.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "blkmq/blkmq.h"
#include "support/device_test_util.h"

namespace blkmq::test {
namespace {

constexpr uint64_t kFile = 4 << 20;  // sparse, larger than the file system
constexpr uint32_t kWrite = 1280 << 10;  // > the 1 MiB tmpfs, <= max_sectors: one request

// A 1 MiB tmpfs on a fresh directory for the test's lifetime.
class SmallTmpfs {
 public:
  SmallTmpfs() {
    if (mount("none", dir_.path().c_str(), "tmpfs", 0, "size=1m") == 0) {
      mounted_ = true;
    } else {
      error_ = std::string("mount -t tmpfs -o size=1m: ") + strerror(errno);
    }
  }
  ~SmallTmpfs() {
    if (mounted_) umount2(dir_.path().c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  std::string file(const char* name) const { return dir_.file(name); }

 private:
  devtest::TempDir dir_{"ublk-enospc"};
  bool mounted_ = false;
  std::string error_;
};

BlkStatus write_at(Queue& q, uint64_t off, uint32_t len) {
  devtest::Waiter w;
  devtest::IoSlot s;
  s.prep(ReqOp::write, off, len, &w);
  devtest::fill_pattern(s.buf.data(), len, off);
  q.submit_bio(&s.bio);
  EXPECT_TRUE(w.wait(1));
  EXPECT_EQ(s.ends.load(), 1);
  return s.bio.status;
}

TEST(UblkLoopEnospcShortWrite, WriteThatFillsTheFileSystemEndsNospcNotIoerr) {
  SmallTmpfs fs;
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs (needs root): " << fs.error();
  const std::string path = fs.file("loop.img");
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(kFile)), 0) << strerror(errno);
  close(fd);
  {
    auto r = create_device("ublk", {{"target", "loop"}, {"filename", path}});
    if (!r && r.status().message().find("io_uring") != std::string::npos)
      GTEST_SKIP() << "io_uring is not available here: " << r.status().message();
    ASSERT_TRUE(r.ok()) << r.status().message();
    Queue& q = (*r)->queue();
    // Part of it fits: the first writev comes back short, the rest fails.
    EXPECT_STREQ(blk_status_name(write_at(q, 0, kWrite)), "nospc");
    // Nothing fits any more: -ENOSPC at once.
    EXPECT_STREQ(blk_status_name(write_at(q, 2 << 20, 64 << 10)), "nospc");
    // Reads still work (a hole reads zeros).
    std::vector<unsigned char> out(4096, 1);
    EXPECT_EQ(q.read_sync(out.data(), 3 << 20, 4096), BlkStatus::ok);
    EXPECT_EQ(out[0], 0);
  }
}

}  // namespace
}  // namespace blkmq::test
