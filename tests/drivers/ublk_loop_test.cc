// The ublk loop target: a file through io_uring. Random writes and reads of
// 512 B..1 MiB from several threads, checked byte for byte through the
// device and against the backing file itself; flush; discard; a file that
// cannot back the requested size. Skips cleanly where io_uring is missing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/event.h"
#include "blkmq/blkmq.h"
#include "blkmq/driver/context.h"
#include "blkmq/driver/ublk.h"

namespace blkmq {
namespace {

constexpr uint64_t kFileSize = 16ull << 20;

class TempFile {
 public:
  explicit TempFile(uint64_t size) {
    path_ = testing::TempDir() + "ublk_loop_XXXXXX";
    fd_ = mkstemp(path_.data());
    if (fd_ >= 0 && ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~TempFile() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  std::vector<unsigned char> read_all(uint64_t size) const {
    std::vector<unsigned char> v(size);
    EXPECT_EQ(pread(fd_, v.data(), size, 0), static_cast<ssize_t>(size));
    return v;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// Creates the loop device, or skips the test when io_uring is unavailable.
std::unique_ptr<Device> make_loop(const TempFile& f, ParamMap extra = {}) {
  ParamMap p = {{"target", "loop"}, {"filename", f.path()}};
  for (auto& [k, v] : extra) p[k] = v;
  auto r = create_device("ublk", p);
  if (!r) {
    if (r.status().message().find("io_uring") != std::string::npos) return nullptr;
    ADD_FAILURE() << r.status().message();
    return nullptr;
  }
  return std::move(*r);
}

#define MAKE_LOOP_OR_SKIP(dev, ...)                                  \
  auto dev = make_loop(__VA_ARGS__);                                 \
  if (!dev) {                                                        \
    if (::testing::Test::HasFailure()) return;                       \
    GTEST_SKIP() << "io_uring is not available here";                \
  }

TEST(UblkLoop, SizeComesFromTheFile) {
  TempFile f(kFileSize);
  ASSERT_TRUE(f.ok());
  MAKE_LOOP_OR_SKIP(dev, f);
  EXPECT_EQ(dev->size_bytes(), kFileSize);
  EXPECT_TRUE(dev->queue().limits().write_cache);
  auto r = create_device("ublk", {{"target", "loop"}, {"filename", f.path()}, {"size", "64m"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("larger than"), std::string::npos);
}

// Each thread owns a disjoint region, so its shadow copy is the truth there.
void random_io(Queue& q, uint64_t base, uint64_t span, unsigned seed, std::vector<unsigned char>* shadow) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> buf, out;
  for (int i = 0; i < 60; i++) {
    const uint32_t sectors = 1 + rng() % 2048;  // 512 B .. 1 MiB
    const uint32_t len = sectors * kSectorSize;
    const uint64_t off = base + (rng() % ((span - len) / kSectorSize + 1)) * kSectorSize;
    if (rng() % 3) {
      buf.resize(len);
      for (auto& b : buf) b = static_cast<unsigned char>(rng());
      ASSERT_EQ(q.write_sync(buf.data(), off, len), BlkStatus::ok);
      std::copy(buf.begin(), buf.end(), shadow->begin() + off);
    } else {
      out.assign(len, 0);
      ASSERT_EQ(q.read_sync(out.data(), off, len), BlkStatus::ok);
      ASSERT_TRUE(std::equal(out.begin(), out.end(), shadow->begin() + off)) << "off " << off << " len " << len;
    }
  }
}

TEST(UblkLoop, RandomWritesAndReadsMatchTheFile) {
  TempFile f(kFileSize);
  ASSERT_TRUE(f.ok());
  const unsigned nq = std::min(2u, nr_cpu_ids());
  MAKE_LOOP_OR_SKIP(dev, f, {{"nr_hw_queues", std::to_string(nq)}, {"queue_depth", "16"}});
  Queue& q = dev->queue();
  std::vector<unsigned char> shadow(kFileSize, 0);
  constexpr unsigned kThreads = 4;
  const uint64_t span = kFileSize / kThreads;
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] { random_io(q, t * span, span, 1000 + t, &shadow); });
  for (auto& th : ts) th.join();
  ASSERT_EQ(q.flush_sync(), BlkStatus::ok);
  // Through the device, in 1 MiB pieces, and straight from the file.
  std::vector<unsigned char> out(1 << 20);
  for (uint64_t off = 0; off < kFileSize; off += out.size()) {
    ASSERT_EQ(q.read_sync(out.data(), off, out.size()), BlkStatus::ok);
    ASSERT_TRUE(std::equal(out.begin(), out.end(), shadow.begin() + off)) << "off " << off;
  }
  EXPECT_TRUE(f.read_all(kFileSize) == shadow);
}

// direct=1 opens the file with O_DIRECT (ublksrv's loop default): aligned
// I/O reaches the file and reads back; the parameter is refused for the null
// target. Skips on a file system without O_DIRECT (tmpfs).
TEST(UblkLoop, DirectIoReachesTheFile) {
  TempFile f(kFileSize);
  ASSERT_TRUE(f.ok());
  auto r = create_device("ublk", {{"target", "loop"}, {"filename", f.path()}, {"direct", "1"}});
  if (!r) {
    if (r.status().code() == EINVAL) GTEST_SKIP() << "no O_DIRECT here: " << r.status().message();
    if (r.status().message().find("io_uring") != std::string::npos) GTEST_SKIP() << "no io_uring here";
    FAIL() << r.status().message();
  }
  Queue& q = (*r)->queue();
  constexpr size_t kLen = 64 << 10;
  void* wbuf = nullptr;
  void* rbuf = nullptr;
  ASSERT_EQ(posix_memalign(&wbuf, 4096, kLen), 0);
  ASSERT_EQ(posix_memalign(&rbuf, 4096, kLen), 0);
  std::memset(wbuf, 0xA5, kLen);
  EXPECT_EQ(q.write_sync(wbuf, 1 << 20, kLen), BlkStatus::ok);
  EXPECT_EQ(q.read_sync(rbuf, 1 << 20, kLen), BlkStatus::ok);
  EXPECT_EQ(std::memcmp(wbuf, rbuf, kLen), 0);
  const std::vector<unsigned char> file = f.read_all(kFileSize);
  EXPECT_TRUE(std::all_of(file.begin() + (1 << 20), file.begin() + (1 << 20) + kLen,
                          [](unsigned char c) { return c == 0xA5; }));
  std::free(wbuf);
  std::free(rbuf);
  auto bad = create_device("ublk", {{"target", "null"}, {"direct", "1"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("target=loop only"), std::string::npos);
}

// Counts a bio's ends and wakes the test at the first.
struct EndCount {
  std::atomic<int> n{0};
  base::Completion first;
  static void end_io(Bio* b) {
    auto* e = static_cast<EndCount*>(b->private_data);
    e->n.fetch_add(1);
    e->first.complete();
  }
  // Ended once, within 5 s.
  bool wait() { return first.wait_for(5ull * 1000 * 1000 * 1000) && n.load() == 1; }
};

TEST(UblkLoop, MultiSegmentBioAndFua) {
  TempFile f(kFileSize);
  ASSERT_TRUE(f.ok());
  MAKE_LOOP_OR_SKIP(dev, f);
  std::vector<unsigned char> a(4096, 0xa5), b(8192, 0x5a);
  iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  Bio bio;
  bio.op = ReqOp::write;
  bio.flags = kBioFua;
  bio.sector = 8;
  bio.size = 12288;
  bio.vec = iov;
  bio.nr_vecs = 2;
  EndCount ends;
  bio.private_data = &ends;
  bio.end_io = EndCount::end_io;
  dev->queue().submit_bio(&bio);
  ASSERT_TRUE(ends.wait());
  EXPECT_EQ(bio.status, BlkStatus::ok);
  auto file = f.read_all(kFileSize);
  EXPECT_TRUE(std::all_of(file.begin() + 4096, file.begin() + 8192, [](unsigned char c) { return c == 0xa5; }));
  EXPECT_TRUE(std::all_of(file.begin() + 8192, file.begin() + 16384, [](unsigned char c) { return c == 0x5a; }));
}

TEST(UblkLoop, DiscardReadsBackZeros) {
  TempFile f(kFileSize);
  ASSERT_TRUE(f.ok());
  MAKE_LOOP_OR_SKIP(dev, f);
  Queue& q = dev->queue();
  std::vector<unsigned char> a(65536, 0x77);
  ASSERT_EQ(q.write_sync(a.data(), 0, a.size()), BlkStatus::ok);
  Bio bio;
  bio.op = ReqOp::discard;
  bio.sector = 0;
  bio.size = 65536;
  EndCount ends;
  bio.private_data = &ends;
  bio.end_io = EndCount::end_io;
  q.submit_bio(&bio);
  ASSERT_TRUE(ends.wait());
  if (bio.status == BlkStatus::notsupp) GTEST_SKIP() << "the file system cannot punch holes";
  ASSERT_EQ(bio.status, BlkStatus::ok);
  std::vector<unsigned char> out(a.size(), 1);
  ASSERT_EQ(q.read_sync(out.data(), 0, out.size()), BlkStatus::ok);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](unsigned char c) { return c == 0; }));
}

}  // namespace
}  // namespace blkmq
