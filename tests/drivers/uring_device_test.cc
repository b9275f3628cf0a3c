// The uring driver through the public API: create_device("uring") on files
// in a temporary directory, verified data transfers (buffered and
// O_DIRECT), flush/FUA, discard and write-zeroes, errors, a full file
// system, poll queues, SQPOLL and concurrent submitters.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "drivers/uring/uring_dev.h"
#include "drivers/uring/uring_params.h"
#include "support/device_test_util.h"
#include "support/random_verify.h"

namespace blkmq {
namespace {

using Clock = std::chrono::steady_clock;
using devtest::AlignedBuf;
using devtest::direct_io_works;
using devtest::fill_pattern;
using devtest::Waiter;
using devtest::waiter_end_io;

// A temporary directory, removed with everything in it.
struct TempDir : devtest::TempDir {
  TempDir() : devtest::TempDir("blkmq-uring") {}
};

std::unique_ptr<Device> make(const ParamMap& params) { return devtest::make_device("uring", params); }
std::string make_error(const ParamMap& params) { return devtest::make_device_error("uring", params); }

// Multi-segment slots, submit_wait and random_verify: support/random_verify.h.
using IoSlot = devtest::SegSlot;
using devtest::random_verify;
using devtest::submit_wait;


// ---- registration and parameters ----

TEST(UringDevice, IsRegisteredWithEveryParameter) {
  devtest::expect_registered("uring", uring::uring_param_infos());
}

TEST(UringDevice, BadParametersAreRefused) {
  TempDir dir;
  const std::string f = dir.file("bad");
  EXPECT_NE(make_error({}).find("filename"), std::string::npos);
  EXPECT_NE(make_error({{"filename", f}, {"size", "1m"}, {"bs", "1000"}}).find("bs"), std::string::npos);
  EXPECT_NE(make_error({{"filename", f}, {"size", "1m"}, {"bs", "8192"}}).find("bs"), std::string::npos);
  EXPECT_NE(make_error({{"filename", f}, {"size", "12x"}}).find("size"), std::string::npos);
  EXPECT_NE(make_error({{"filename", f}, {"nope", "1"}}).find("nope"), std::string::npos);
  EXPECT_NE(make_error({{"filename", f}, {"hw_queue_depth", "0"}}).find("hw_queue_depth"),
            std::string::npos);
  EXPECT_NE(make_error({{"filename", f}, {"size", "1m"}, {"force_async", "-1"}}).find("force_async"),
            std::string::npos);
  // A missing file without a size cannot be created.
  EXPECT_NE(make_error({{"filename", f}}).find("size"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(f));
  EXPECT_NE(make_error({{"filename", dir.path()}}).find("neither"), std::string::npos);
}

// fio's size syntax (base/parse.h): bytes when bare, 0 for the file's own
// size, else at least 1 MiB.
TEST(UringDevice, SizeSuffixes) {
  const struct {
    const char* text;
    uint64_t bytes;
  } ok[] = {{"0", 0}, {"1m", 1u << 20}, {"3M", 3u << 20}, {"2g", 2ull << 30}, {"1024kb", 1u << 20},
            {"2GiB", 2ull << 30}, {"1048576", 1u << 20}};
  for (const auto& c : ok) {
    auto p = uring::parse_uring_params({{"filename", "f"}, {"size", c.text}});
    ASSERT_TRUE(p) << c.text << ": " << p.status().message();
    EXPECT_EQ(p->size, c.bytes) << c.text;
  }
  for (const char* bad : {"", "k", "4k", "1024", "99999999999999999999", "1m ", "2x"}) {
    auto p = uring::parse_uring_params({{"filename", "f"}, {"size", bad}});
    ASSERT_FALSE(p) << bad;
    EXPECT_NE(p.status().message().find("expected a number of bytes"), std::string::npos) << p.status().message();
  }
}

TEST(UringDevice, CreatesAndSizesTheFile) {
  TempDir dir;
  const std::string f = dir.file("disk");
  {
    auto dev = make({{"filename", f}, {"size", "8m"}, {"bs", "4096"}});
    ASSERT_TRUE(dev);
    EXPECT_EQ(dev->driver_name(), "uring");
    EXPECT_EQ(dev->size_bytes(), 8u << 20);
    const QueueLimits& lim = dev->queue().limits();
    EXPECT_EQ(lim.logical_block_size, 4096u);
    EXPECT_EQ(lim.capacity_sectors, (8u << 20) >> kSectorShift);
    EXPECT_TRUE(lim.write_cache);
    EXPECT_TRUE(lim.fua);
    EXPECT_FALSE(lim.poll);
  }
  EXPECT_EQ(std::filesystem::file_size(f), 8u << 20);
  // An existing file keeps its size; a smaller size uses a prefix of it
  // and a larger one extends it.
  auto dev = make({{"filename", f}});
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->size_bytes(), 8u << 20);
  dev = make({{"filename", f}, {"size", "1m"}});
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->size_bytes(), 1u << 20);
  EXPECT_EQ(std::filesystem::file_size(f), 8u << 20);
  dev = make({{"filename", f}, {"size", "16m"}});
  ASSERT_TRUE(dev);
  EXPECT_EQ(std::filesystem::file_size(f), 16u << 20);
}

// ---- data ----

TEST(UringDevice, RandomWritesReadBackBuffered) {
  TempDir dir;
  auto dev = make({{"filename", dir.file("disk")}, {"size", "8m"}});
  ASSERT_TRUE(dev);
  random_verify(dev->queue(), dev->size_bytes(), 512, 96, 1);
}

TEST(UringDevice, RandomWritesReadBackDirect) {
  TempDir dir;
  if (!direct_io_works(dir.path())) GTEST_SKIP() << "the file system under /tmp refuses O_DIRECT";
  auto dev = make({{"filename", dir.file("disk")}, {"size", "8m"}, {"direct", "1"}, {"bs", "4096"},
                   {"submit_queues", "2"}});
  ASSERT_TRUE(dev);
  random_verify(dev->queue(), dev->size_bytes(), 4096, 96, 2);
}

TEST(UringDevice, FileMatchesTheSameDataWrittenWithPwrite) {
  TempDir dir;
  const std::string a = dir.file("through-blkmq"), b = dir.file("with-pwrite");
  constexpr uint64_t kSize = 4u << 20;
  std::mt19937_64 rng(7);
  int fd = open(b.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, kSize), 0);
  {
    auto dev = make({{"filename", a}, {"size", "4m"}});
    ASSERT_TRUE(dev);
    AlignedBuf buf(1u << 20);
    for (int i = 0; i < 64; i++) {
      uint32_t len = 512u << (rng() % 12);
      len = std::min<uint32_t>(len, 1u << 20);
      uint64_t off = (rng() % ((kSize - len) / 512 + 1)) * 512;
      fill_pattern(buf.data, len, rng());
      ASSERT_EQ(submit_wait(dev->queue(), ReqOp::write, off, len, buf.data), BlkStatus::ok);
      ASSERT_EQ(pwrite(fd, buf.data, len, static_cast<off_t>(off)), static_cast<ssize_t>(len));
    }
    ASSERT_EQ(dev->queue().flush_sync(), BlkStatus::ok);
  }
  close(fd);
  std::vector<char> x(kSize), y(kSize);
  int fa = open(a.c_str(), O_RDONLY), fb = open(b.c_str(), O_RDONLY);
  ASSERT_EQ(pread(fa, x.data(), kSize, 0), static_cast<ssize_t>(kSize));
  ASSERT_EQ(pread(fb, y.data(), kSize, 0), static_cast<ssize_t>(kSize));
  close(fa);
  close(fb);
  EXPECT_TRUE(x == y);
}

TEST(UringDevice, FlushAndFua) {
  TempDir dir;
  auto dev = make({{"filename", dir.file("disk")}, {"size", "1m"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  AlignedBuf buf(8192);
  fill_pattern(buf.data, 8192, 3);
  EXPECT_EQ(q.flush_sync(), BlkStatus::ok);
  EXPECT_EQ(q.write_sync(buf.data, 4096, 8192, kBioFua), BlkStatus::ok);
  EXPECT_EQ(q.write_sync(buf.data, 0, 4096, kBioPreflush | kBioFua), BlkStatus::ok);
  AlignedBuf back(8192);
  EXPECT_EQ(q.read_sync(back.data, 4096, 8192), BlkStatus::ok);
  EXPECT_EQ(std::memcmp(back.data, buf.data, 8192), 0);
  DiskStat st = q.disk_stat();
  EXPECT_GE(st.flush_ios, 1u);
}

// Reads and writes carry their I/O priority to the kernel (sqe->ioprio),
// as loop passes a request's to its backing file; the RT class only when
// io_uring would take it, else the I/O would fail with -EPERM.
TEST(UringDevice, ForwardsTheIoPriorityTheKernelAccepts) {
  const uint16_t rt = ioprio_value(IoprioClass::rt, 2), idle = ioprio_value(IoprioClass::idle, 7),
                 be = ioprio_value(IoprioClass::be, 0);
  EXPECT_EQ(uring::forwarded_ioprio(rt, true), rt);
  EXPECT_EQ(uring::forwarded_ioprio(rt, false), kIoprioDefault);
  EXPECT_EQ(uring::forwarded_ioprio(idle, false), idle);
  EXPECT_EQ(uring::forwarded_ioprio(be, false), be);
  EXPECT_EQ(uring::forwarded_ioprio(kIoprioDefault, true), kIoprioDefault);
  // Every class reaches the file and completes, whatever this process may.
  TempDir dir;
  auto dev = make({{"filename", dir.file("disk")}, {"size", "1m"}});
  ASSERT_TRUE(dev);
  AlignedBuf buf(4096);
  fill_pattern(buf.data, 4096, 9);
  for (uint16_t prio : {rt, idle, be, kIoprioDefault}) {
    for (ReqOp op : {ReqOp::write, ReqOp::read}) {
      Waiter w;
      IoSlot s;
      s.prep(op, 8192, 4096, buf.data, &w);
      s.bio.ioprio = prio;
      dev->queue().submit_bio(&s.bio);
      ASSERT_TRUE(w.wait(1));
      EXPECT_EQ(s.bio.status, BlkStatus::ok) << "ioprio " << prio;
    }
  }
}

TEST(UringDevice, DiscardAndWriteZeroesReadBackZeros) {
  TempDir dir;
  auto dev = make({{"filename", dir.file("disk")}, {"size", "2m"}, {"bs", "4096"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  const QueueLimits& lim = q.limits();
  if (lim.max_discard_sectors == 0 && lim.max_write_zeroes_sectors == 0) {
    GTEST_SKIP() << "the file system supports neither punch hole nor zero range";
  }
  AlignedBuf buf(1u << 20), back(1u << 20), zeros(1u << 20);
  std::memset(zeros.data, 0, zeros.size);
  for (ReqOp op : {ReqOp::discard, ReqOp::write_zeroes}) {
    const bool supported = op == ReqOp::discard ? lim.max_discard_sectors : lim.max_write_zeroes_sectors;
    fill_pattern(buf.data, buf.size, 5);
    ASSERT_EQ(q.write_sync(buf.data, 0, 1u << 20), BlkStatus::ok);
    BlkStatus st = submit_wait(q, op, 64 << 10, 128 << 10, nullptr);
    if (!supported) {
      EXPECT_EQ(st, BlkStatus::notsupp);
      continue;
    }
    ASSERT_EQ(st, BlkStatus::ok);
    ASSERT_EQ(q.read_sync(back.data, 0, 1u << 20), BlkStatus::ok);
    EXPECT_EQ(std::memcmp(back.data, buf.data, 64 << 10), 0);
    EXPECT_EQ(std::memcmp(back.data + (64 << 10), zeros.data, 128 << 10), 0);
    EXPECT_EQ(std::memcmp(back.data + (192 << 10), buf.data + (192 << 10), (1u << 20) - (192 << 10)), 0);
  }
}

// ---- errors ----

TEST(UringDevice, OutOfRangeAndMisalignedFailCleanly) {
  TempDir dir;
  auto dev = make({{"filename", dir.file("disk")}, {"size", "1m"}, {"bs", "4096"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  AlignedBuf buf(8192);
  EXPECT_EQ(q.read_sync(buf.data, 1u << 20, 4096), BlkStatus::inval);
  EXPECT_EQ(q.write_sync(buf.data, (1u << 20) - 4096, 8192), BlkStatus::inval);
  EXPECT_EQ(q.read_sync(buf.data, 512, 4096), BlkStatus::inval);
  EXPECT_EQ(q.write_sync(buf.data, 0, 1024), BlkStatus::inval);
  // The device still works afterwards.
  EXPECT_EQ(q.write_sync(buf.data, 0, 4096), BlkStatus::ok);
  EXPECT_EQ(std::filesystem::file_size(dir.file("disk")), 1u << 20);
}

TEST(UringDevice, ReadPastAShrunkFileFailsAfterTheShortPart) {
  TempDir dir;
  const std::string f = dir.file("disk");
  auto dev = make({{"filename", f}, {"size", "1m"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  AlignedBuf buf(8192);
  fill_pattern(buf.data, 8192, 17);
  ASSERT_EQ(q.write_sync(buf.data, (1u << 20) - 8192, 8192), BlkStatus::ok);
  // Someone else shrinks the file: the read comes back short, the driver
  // continues after the short part (across segments) and finds EOF.
  ASSERT_EQ(truncate(f.c_str(), (1u << 20) - 3000), 0);
  Waiter w;
  IoSlot s;
  AlignedBuf back(8192);
  s.prep(ReqOp::read, (1u << 20) - 8192, 8192, back.data, &w, 0, 512);
  q.submit_bio(&s.bio);
  ASSERT_TRUE(w.wait(1));
  EXPECT_EQ(s.bio.status, BlkStatus::ioerr);
  EXPECT_EQ(std::memcmp(back.data, buf.data, 8192 - 3000), 0);
  EXPECT_EQ(q.read_sync(back.data, 0, 4096), BlkStatus::ok);
}

// ---- non-vectored and registered buffers (fio's nonvectored, fixedbufs) ----

uring::SqeCounts counts(Device& dev) { return static_cast<uring::UringDevice&>(dev).sqe_counts(); }

// One-segment reads and writes go as IORING_OP_READ/WRITE, several
// segments as READV/WRITEV; nonvectored=0 sends everything vectored.
TEST(UringDevice, OneSegmentGoesNonVectoredUnlessTurnedOff) {
  TempDir dir;
  for (const char* nv : {"1", "0"}) {
    auto dev = make({{"filename", dir.file("disk")}, {"size", "1m"}, {"nonvectored", nv}});
    ASSERT_TRUE(dev);
    Queue& q = dev->queue();
    AlignedBuf buf(8192), back(8192);
    fill_pattern(buf.data, 8192, 5);
    ASSERT_EQ(q.write_sync(buf.data, 0, 8192), BlkStatus::ok);
    ASSERT_EQ(q.read_sync(back.data, 0, 8192), BlkStatus::ok);
    EXPECT_EQ(std::memcmp(back.data, buf.data, 8192), 0);
    Waiter w;
    IoSlot s;
    std::memset(back.data, 0, 8192);
    s.prep(ReqOp::read, 0, 8192, back.data, &w, 0, 4096);  // two segments
    q.submit_bio(&s.bio);
    ASSERT_TRUE(w.wait(1));
    EXPECT_EQ(s.bio.status, BlkStatus::ok);
    EXPECT_EQ(std::memcmp(back.data, buf.data, 8192), 0);
    const uring::SqeCounts c = counts(*dev);
    EXPECT_EQ(c.fixed, 0u);
    if (nv[0] == '1') {
      EXPECT_EQ(c.nonvectored, 2u) << "the one-segment write and read";
      EXPECT_EQ(c.vectored, 1u) << "the two-segment read";
    } else {
      EXPECT_EQ(c.nonvectored, 0u);
      EXPECT_EQ(c.vectored, 3u);
    }
  }
}

// I/O whose one segment lies in a registered region goes READ_FIXED /
// WRITE_FIXED and moves the right bytes; memory outside it, or several
// segments, take the other paths; an empty set unregisters.
void registered_buffers(bool direct) {
  TempDir dir;
  if (direct && !direct_io_works(dir.path())) GTEST_SKIP() << "the file system under /tmp refuses O_DIRECT";
  auto dev = make({{"filename", dir.file("disk")}, {"size", "4m"}, {"direct", direct ? "1" : "0"}, {"bs", "4096"},
                   {"submit_queues", "2"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  // The registered region, and unregistered memory right after it.
  AlignedBuf mem((1u << 20) + (64u << 10));
  const iovec reg{mem.data, 1u << 20};
  unsigned char* const outside = mem.data + reg.iov_len;
  ASSERT_TRUE(dev->register_buffers(&reg, 1));
  std::mt19937_64 rng(11);
  constexpr int kIos = 64;
  for (int i = 0; i < kIos; i++) {
    const uint32_t len = 4096u << (rng() % 5);
    const uint64_t off = (rng() % ((dev->size_bytes() - len) / 4096 + 1)) * 4096;
    unsigned char* at = mem.data + (rng() % ((reg.iov_len - 2 * len) / 4096 + 1)) * 4096;
    fill_pattern(at, len, i);
    ASSERT_EQ(q.write_sync(at, off, len), BlkStatus::ok);
    unsigned char* back = at + len;
    std::memset(back, 0, len);
    ASSERT_EQ(q.read_sync(back, off, len), BlkStatus::ok);
    ASSERT_EQ(std::memcmp(back, at, len), 0) << "I/O " << i;
  }
  uring::SqeCounts c = counts(*dev);
  EXPECT_EQ(c.fixed, 2u * kIos);
  EXPECT_EQ(c.nonvectored + c.vectored, 0u);
  fill_pattern(outside, 8192, 99);
  ASSERT_EQ(q.write_sync(outside - 4096, 0, 8192), BlkStatus::ok) << "straddles the region's end";
  ASSERT_EQ(q.read_sync(outside + 4096, 8192, 4096), BlkStatus::ok) << "outside the region";
  ASSERT_EQ(q.read_sync(outside - 4096, 4096, 4096), BlkStatus::ok) << "the region's last page";
  EXPECT_EQ(std::memcmp(outside - 4096, outside, 4096), 0);
  ASSERT_TRUE(dev->register_buffers(nullptr, 0));
  ASSERT_EQ(q.read_sync(mem.data, 0, 4096), BlkStatus::ok);
  c = counts(*dev);
  EXPECT_EQ(c.fixed, 2u * kIos + 1) << "only the region's last page, before unregistering";
  EXPECT_EQ(c.nonvectored, 3u);
  EXPECT_EQ(c.vectored, 0u);
}

TEST(UringDevice, RegisteredBuffersGoFixedAndReadBackBuffered) { registered_buffers(false); }
TEST(UringDevice, RegisteredBuffersGoFixedAndReadBackDirect) { registered_buffers(true); }

// A short read into a registered buffer continues where it stopped, still
// from the registered buffer, as the shrunk-file test does across segments.
TEST(UringDevice, ShortReadIntoARegisteredBufferContinuesFixed) {
  TempDir dir;
  const std::string f = dir.file("disk");
  auto dev = make({{"filename", f}, {"size", "1m"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  AlignedBuf buf(8192), back(8192);
  const iovec reg{back.data, back.size};
  ASSERT_TRUE(dev->register_buffers(&reg, 1));
  fill_pattern(buf.data, 8192, 23);
  ASSERT_EQ(q.write_sync(buf.data, (1u << 20) - 8192, 8192), BlkStatus::ok);
  ASSERT_EQ(truncate(f.c_str(), (1u << 20) - 3000), 0);
  EXPECT_EQ(q.read_sync(back.data, (1u << 20) - 8192, 8192), BlkStatus::ioerr);
  EXPECT_EQ(std::memcmp(back.data, buf.data, 8192 - 3000), 0);
  EXPECT_GE(counts(*dev).fixed, 2u) << "the first transfer and its continuation";
}

// Regions without memory are refused; a driver without registration says
// so, and its I/O is unaffected.
TEST(UringDevice, BadRegisteredBuffersAreRefused) {
  TempDir dir;
  auto dev = make({{"filename", dir.file("disk")}, {"size", "1m"}});
  ASSERT_TRUE(dev);
  const iovec none{nullptr, 4096}, empty{dev.get(), 0};
  EXPECT_EQ(dev->register_buffers(&none, 1).code(), EINVAL);
  EXPECT_EQ(dev->register_buffers(&empty, 1).code(), EINVAL);
  auto null = devtest::make_device("null", {{"size", "1"}});
  ASSERT_TRUE(null);
  AlignedBuf buf(4096);
  const iovec reg{buf.data, buf.size};
  EXPECT_EQ(null->register_buffers(&reg, 1).code(), EOPNOTSUPP);
  EXPECT_EQ(null->queue().write_sync(buf.data, 0, 4096), BlkStatus::ok);
}

// Mounts a 1 MiB tmpfs for the life of the object, where permitted.
class SmallTmpfs {
 public:
  explicit SmallTmpfs(const std::string& dir) : dir_(dir) {
    mounted_ = mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m") == 0;
  }
  ~SmallTmpfs() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

TEST(UringDevice, FullFileSystemGivesNospc) {
  TempDir dir;
  SmallTmpfs fs(dir.path());
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << ")";
  // A sparse 4 MiB file on a 1 MiB file system.
  auto dev = make({{"filename", dir.file("disk")}, {"size", "4m"}, {"bs", "4096"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  AlignedBuf buf(256 << 10), back(256 << 10);
  fill_pattern(buf.data, buf.size, 9);
  ASSERT_EQ(q.write_sync(buf.data, 0, 256 << 10), BlkStatus::ok);
  BlkStatus last = BlkStatus::ok;
  for (uint64_t off = 256 << 10; off < (4u << 20) && last == BlkStatus::ok; off += 256 << 10) {
    last = q.write_sync(buf.data, off, 256 << 10);
  }
  EXPECT_EQ(last, BlkStatus::nospc);
  // What was written before is intact.
  ASSERT_EQ(q.read_sync(back.data, 0, 256 << 10), BlkStatus::ok);
  EXPECT_EQ(std::memcmp(back.data, buf.data, 256 << 10), 0);
  dev.reset();
}

// ---- queues ----

TEST(UringDevice, PollQueuesAreReapedByPoll) {
  TempDir dir;
  auto dev = make({{"filename", dir.file("disk")}, {"size", "1m"}, {"poll_queues", "1"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  EXPECT_TRUE(q.limits().poll);
  EXPECT_EQ(q.nr_hw_queues(), 2u);
  AlignedBuf buf(65536), back(65536);
  fill_pattern(buf.data, buf.size, 11);
  Waiter w;
  IoSlot s[2];
  s[0].prep(ReqOp::write, 0, 65536, buf.data, &w, kBioPolled, 4096);
  q.submit_bio(&s[0].bio);
  int found = 0;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (w.ended() < 1 && Clock::now() < deadline) found += q.poll(&s[0].bio);
  ASSERT_EQ(w.ended(), 1);
  s[1].prep(ReqOp::read, 0, 65536, back.data, &w, kBioPolled);
  q.submit_bio(&s[1].bio);
  while (w.ended() < 2 && Clock::now() < deadline) found += q.poll(&s[1].bio);
  ASSERT_EQ(w.ended(), 2);
  EXPECT_EQ(w.errors(), 0);
  EXPECT_EQ(found, 2);
  EXPECT_EQ(std::memcmp(back.data, buf.data, 65536), 0);
}

TEST(UringDevice, SqpollAndUnregisteredFilesWork) {
  TempDir dir;
  for (const char* sqpoll : {"1", "0"}) {
    auto dev = make({{"filename", dir.file("disk")}, {"size", "4m"}, {"sqpoll", sqpoll},
                     {"fixed_files", "0"}, {"hw_queue_depth", "8"}});
    ASSERT_TRUE(dev);
    random_verify(dev->queue(), dev->size_bytes(), 512, 32, 13);
  }
}

TEST(UringDevice, SeveralSubmittersAtOnce) {
  TempDir dir;
  constexpr int kThreads = 4;
  constexpr uint64_t kSlice = 1u << 20;
  auto dev = make({{"filename", dir.file("disk")}, {"size", "4m"}, {"submit_queues", "2"},
                   {"hw_queue_depth", "8"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      AlignedBuf buf(kSlice), back(kSlice);
      const uint64_t base = t * kSlice;
      for (int round = 0; round < 4; round++) {
        fill_pattern(buf.data, kSlice, t * 100 + round);
        Waiter w;
        std::vector<IoSlot> slots(16);
        for (int i = 0; i < 16; i++) {
          slots[i].prep(ReqOp::write, base + i * (kSlice / 16), kSlice / 16, buf.data + i * (kSlice / 16), &w);
          q.submit_bio(&slots[i].bio);
        }
        if (!w.wait(16) || w.errors()) failures++;
        if (q.read_sync(back.data, base, kSlice) != BlkStatus::ok) failures++;
        if (std::memcmp(back.data, buf.data, kSlice) != 0) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

// io_uring ties a request to the thread that submitted it and, when that
// thread exits, cancels whatever of it still waits in the thread's io-wq
// (-ECANCELED). Any thread dispatches for everyone in blkmq, so a thread
// that exits with other threads' requests in flight must not fail them.
// force_async=1 sends every request to io-wq (on ext4 buffered writes that
// allocate blocks go there anyway), so most of these are still there when
// their submitter exits.
void exiting_submitters(bool direct) {
  TempDir dir;
  if (direct && !direct_io_works(dir.path())) GTEST_SKIP() << "no O_DIRECT under " << dir.path();
  constexpr int kThreads = 16;
  constexpr int kPerThread = 16;
  constexpr uint32_t kBs = 4096;
  auto dev = make({{"filename", dir.file("disk")}, {"size", "64m"}, {"direct", direct ? "1" : "0"},
                   {"hw_queue_depth", "64"}, {"force_async", "1"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  Waiter w;
  AlignedBuf buf(size_t{kThreads} * kPerThread * kBs);
  fill_pattern(buf.data, size_t{kThreads} * kPerThread * kBs, 7);
  std::vector<IoSlot> slots(kThreads * kPerThread);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    // Each submits its writes, 256 KiB apart so every one allocates, and
    // exits at once.
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; i++) {
        const int k = t * kPerThread + i;
        slots[k].prep(ReqOp::write, uint64_t(k) << 18, kBs, buf.data + size_t(k) * kBs, &w);
        q.submit_bio(&slots[k].bio);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(w.wait(kThreads * kPerThread));
  EXPECT_EQ(w.errors(), 0) << blk_status_name(w.last_error());
  AlignedBuf back(kBs);
  for (int k = 0; k < kThreads * kPerThread; k++) {
    ASSERT_EQ(q.read_sync(back.data, uint64_t(k) << 18, kBs), BlkStatus::ok);
    ASSERT_EQ(std::memcmp(back.data, buf.data + size_t(k) * kBs, kBs), 0) << "block " << k;
  }
}

TEST(UringDevice, ExitedSubmitterDoesNotCancelBuffered) { exiting_submitters(false); }
TEST(UringDevice, ExitedSubmitterDoesNotCancelDirect) { exiting_submitters(true); }

}  // namespace
}  // namespace blkmq
