// Regression: the NBD connection gave the device payload buffers from
// new char[] (16-byte aligned). The uring driver with direct=1 hands them to
// O_DIRECT, which wants the file's DIO memory alignment (512 bytes or more),
// so nearly every READ and WRITE of such an export failed with EINVAL. The
// buffers are page-aligned now, as a kernel bio's pages are.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

TEST(NbdRegress, PayloadBuffersAreAlignedForODirect) {
  std::string dir = testing::TempDir() + "blkmq_odirect_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string file = dir + "/disk.img";
  const int probe = ::open(file.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
  if (probe < 0) {
    ::rmdir(dir.c_str());
    GTEST_SKIP() << "the temp dir's file system refuses O_DIRECT";
  }
  ::close(probe);
  {
    auto dev = create_device("uring", {{"filename", file}, {"size", "8m"}, {"direct", "1"}});
    ASSERT_TRUE(dev.ok()) << dev.status().message();
    Served s(std::move(*dev), ServerConfig{}, 512);
    const int fd = connect_unix(s.path());
    ASSERT_TRUE(go(fd));
    // Small (heap) and large (mmap'ed) buffers: malloc aligns neither to 512.
    for (uint32_t len : {4096u, 65536u, 1u << 20}) {
      const std::string pattern(len, static_cast<char>('a' + len % 23));
      EXPECT_EQ(request(fd, kCmdWrite, 1 << 20, len, pattern), 0u) << "WRITE of " << len;
      std::string back;
      EXPECT_EQ(request(fd, kCmdRead, 1 << 20, len, {}, &back), 0u) << "READ of " << len;
      EXPECT_TRUE(back == pattern) << "READ of " << len << " brought other data";
    }
    ::close(fd);
  }
  ::unlink(file.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace blkmq::nbd::regress
