// Regression: FUA on TRIM and WRITE_ZEROES was not honoured. The server put
// the bio's FUA flag on every command but READ. Where FUA is emulated (null
// with a write-back cache and fua=0) the flush machinery turned the TRIM
// into a data-less WRITE: it was acknowledged and not performed. Where FUA
// is native (uring) fallocate ignored it and the reply went out before the
// zeroing was durable. The server now sends such a command without FUA and
// a FLUSH after it, and answers once both have completed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/nbd_regress_util.h"
#include "support/wait.h"

namespace blkmq::nbd::regress {
namespace {

// The queue's `stat` fields (the kernel's 17-field layout; the 16th counts flushes).
std::vector<uint64_t> stat_fields(Device& d) {
  std::istringstream in(*d.queue().attr("stat"));
  std::vector<uint64_t> v;
  for (uint64_t x; in >> x;) v.push_back(x);
  return v;
}
uint64_t flushes(Device& d) { return stat_fields(d).at(15); }
// The flush request is accounted as it ends, which may be just after the
// reply went out: wait (bounded) for the count to pass `n`.
bool flushed_past(Device& d, uint64_t n) {
  return blkmq::test::eventually([&] { return flushes(d) > n; }, 1000);
}

TEST(NbdRegress, FuaTrimOnAnEmulatedFuaCacheIsPerformedAndFlushed) {
  auto dev = create_device("null", {{"size", "16"}, {"memory_backed", "1"}, {"cache_size", "16"},
                                    {"fua", "0"}, {"discard", "1"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  Served s(std::move(*dev), ServerConfig{}, 512, kTxSendTrim);
  const int fd = connect_unix(s.path());
  ASSERT_TRUE(go(fd));
  const std::string pattern(64 << 10, '\x5a');
  ASSERT_EQ(request(fd, kCmdWrite, 1 << 20, 64 << 10, pattern), 0u);
  const uint64_t before = flushes(s.device());
  EXPECT_EQ(request(fd, kCmdTrim, 1 << 20, 64 << 10, {}, nullptr, kCmdFlagFua), 0u);
  EXPECT_TRUE(flushed_past(s.device(), before)) << "TRIM with FUA was answered without a flush";
  std::string back;
  ASSERT_EQ(request(fd, kCmdRead, 1 << 20, 64 << 10, {}, &back), 0u);
  EXPECT_EQ(back, std::string(64 << 10, '\0')) << "TRIM with FUA was acknowledged and not performed";
  ::close(fd);
}

TEST(NbdRegress, FuaWriteZeroesOnANativeFuaFileIsFlushedBeforeTheReply) {
  std::string dir = testing::TempDir() + "blkmq_fua_zero_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string file = dir + "/disk.img";
  {
    auto dev = create_device("uring", {{"filename", file}, {"size", "8m"}});
    ASSERT_TRUE(dev.ok()) << dev.status().message();
    Served s(std::move(*dev), ServerConfig{}, 512, kTxSendWriteZeroes);
    const int fd = connect_unix(s.path());
    ASSERT_TRUE(go(fd));
    const std::string pattern(64 << 10, '\x33');
    ASSERT_EQ(request(fd, kCmdWrite, 0, 64 << 10, pattern), 0u);
    const uint64_t before = flushes(s.device());
    EXPECT_EQ(request(fd, kCmdWriteZeroes, 0, 64 << 10, {}, nullptr, kCmdFlagFua), 0u);
    EXPECT_TRUE(flushed_past(s.device(), before)) << "WRITE_ZEROES with FUA was answered before anything made it durable";
    std::string back;
    ASSERT_EQ(request(fd, kCmdRead, 0, 64 << 10, {}, &back), 0u);
    EXPECT_EQ(back, std::string(64 << 10, '\0'));
    // Without FUA no flush is added.
    const uint64_t mid = flushes(s.device());
    EXPECT_EQ(request(fd, kCmdWriteZeroes, 0, 4096), 0u);
    EXPECT_EQ(flushes(s.device()), mid);
    ::close(fd);
  }
  ::unlink(file.c_str());
  ::rmdir(dir.c_str());
}

// The same on a block device (a loop device over a temp file, uring with
// direct=1): the kernel's write cache, so FUA is native and fallocate
// ignored it just the same.
TEST(NbdRegress, FuaWriteZeroesOnABlockDeviceIsFlushedBeforeTheReply) {
  std::string dir = testing::TempDir() + "blkmq_fua_loop_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string file = dir + "/backing.img";
  std::string loop;
  if (std::system(("truncate -s 8M " + file).c_str()) == 0) {
    if (FILE* p = ::popen(("losetup -f --show " + file + " 2>/dev/null").c_str(), "r")) {
      char buf[64] = {};
      if (std::fgets(buf, sizeof buf, p)) loop = buf;
      ::pclose(p);
    }
  }
  while (!loop.empty() && (loop.back() == '\n' || loop.back() == ' ')) loop.pop_back();
  if (loop.empty()) {
    ::unlink(file.c_str());
    ::rmdir(dir.c_str());
    GTEST_SKIP() << "no loop device (needs root and the loop module)";
  }
  struct Detach {  // whatever the test's outcome
    std::string loop, file, dir;
    ~Detach() {
      std::system(("losetup -d " + loop).c_str());
      ::unlink(file.c_str());
      ::rmdir(dir.c_str());
    }
  } detach{loop, file, dir};
  {
    auto dev = create_device("uring", {{"filename", loop}, {"direct", "1"}});
    ASSERT_TRUE(dev.ok()) << dev.status().message();
    if (!dev.value()->queue().limits().max_write_zeroes_sectors) GTEST_SKIP() << loop << " cannot zero";
    Served s(std::move(*dev), ServerConfig{}, 512, kTxSendWriteZeroes);
    const int fd = connect_unix(s.path());
    ASSERT_TRUE(go(fd));
    ASSERT_EQ(request(fd, kCmdWrite, 0, 65536, std::string(65536, '\x66')), 0u);
    const uint64_t before = flushes(s.device());
    EXPECT_EQ(request(fd, kCmdWriteZeroes, 0, 65536, {}, nullptr, kCmdFlagFua), 0u);
    if (s.device().queue().limits().write_cache) {
      EXPECT_TRUE(flushed_past(s.device(), before)) << "WRITE_ZEROES with FUA on " << loop << " was not flushed";
    }
    std::string back;
    ASSERT_EQ(request(fd, kCmdRead, 0, 65536, {}, &back), 0u);
    EXPECT_EQ(back, std::string(65536, '\0'));
    ::close(fd);
  }
}

}  // namespace
}  // namespace blkmq::nbd::regress
