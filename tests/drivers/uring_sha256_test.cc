// The integrity acceptance check: a file written through blkmq has the same
// sha256 as the same bytes written directly with pwrite. The content is
// pseudo-random from a fixed seed, cut into extents of 512 B .. 1 MiB that
// go out shuffled from several threads, several bios in flight each, some
// of two segments; then a flush. Runs on the uring driver (buffered and
// O_DIRECT) and on the ublk loop target, each under none, mq-deadline and
// kyber. The hashes come from the system's sha256sum.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "blkmq/driver/context.h"
#include "support/device_test_util.h"

namespace blkmq {
namespace {

using devtest::AlignedBuf;
using devtest::TempDir;
using devtest::Waiter;
using devtest::waiter_end_io;

constexpr uint64_t kSize = 6ull << 20;
constexpr uint32_t kMaxExtent = 1u << 20;
constexpr unsigned kThreads = 4;
constexpr int kDepth = 8;  // bios in flight per thread
constexpr uint64_t kSeed = 0x5eed5a256ull;

struct Case {
  const char* name;
  const char* driver;  // "uring" or "ublk" (target=loop)
  bool direct;         // uring direct=1 (O_DIRECT), with bs=4096
  const char* scheduler;
};

std::string case_name(const testing::TestParamInfo<Case>& i) { return i.param.name; }

// sha256sum's digest of `path` ("" if it could not run).
std::string sha256_of(const std::string& path) {
  const std::string cmd = "sha256sum '" + path + "' 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return "";
  char out[256] = {};
  const size_t n = fread(out, 1, sizeof out - 1, f);
  const int rc = pclose(f);
  std::string s(out, n);
  if (rc != 0 || s.size() < 64) return "";
  s.resize(64);
  return s;
}

// The reference: the content written straight into a file.
void write_direct(const std::string& path, const unsigned char* data, uint64_t size) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << path;
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    ASSERT_GT(n, 0);
    done += static_cast<uint64_t>(n);
  }
  ASSERT_EQ(close(fd), 0);
}

struct Extent {
  uint64_t off;
  uint32_t len;
};

// The device cut into extents of `unit` << 0..k bytes, at most 1 MiB, in a
// shuffled order.
std::vector<Extent> shuffled_extents(uint32_t unit, std::mt19937_64& rng) {
  unsigned max_shift = 0;
  while ((unit << (max_shift + 1)) <= kMaxExtent) max_shift++;
  std::vector<Extent> v;
  for (uint64_t off = 0; off < kSize;) {
    uint32_t len = unit << (rng() % (max_shift + 1));
    len = static_cast<uint32_t>(std::min<uint64_t>(len, kSize - off));
    v.push_back({off, len});
    off += len;
  }
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

// One writer: its share of the extents, up to kDepth bios at a time, every
// third one in two segments. Returns the number of failed bios.
int write_extents(Queue& q, const unsigned char* data, const std::vector<Extent>& ext, unsigned t,
                  uint32_t unit) {
  struct Slot {
    Bio bio;
    iovec iov[2];
  };
  std::vector<Extent> mine;
  for (size_t i = t; i < ext.size(); i += kThreads) mine.push_back(ext[i]);
  int errors = 0;
  for (size_t i = 0; i < mine.size(); i += kDepth) {
    const size_t n = std::min<size_t>(kDepth, mine.size() - i);
    std::vector<Slot> slots(n);
    Waiter w;
    for (size_t j = 0; j < n; j++) {
      const Extent& e = mine[i + j];
      Slot& s = slots[j];
      unsigned char* p = const_cast<unsigned char*>(data + e.off);
      const uint32_t first = (j % 3 == 0 && e.len > unit) ? unit : e.len;
      s.iov[0] = {p, first};
      s.iov[1] = {p + first, e.len - first};
      s.bio = devtest::bio_at(ReqOp::write, e.off, e.len);
      s.bio.vec = s.iov;
      s.bio.nr_vecs = first < e.len ? 2 : 1;
      s.bio.end_io = waiter_end_io;
      s.bio.private_data = &w;
      q.submit_bio(&s.bio);
    }
    EXPECT_TRUE(w.wait(static_cast<int>(n)));
    errors += w.errors();
  }
  return errors;
}

class Sha256 : public testing::TestWithParam<Case> {};

TEST_P(Sha256, FileWrittenThroughBlkmqMatchesPwrite) {
  const Case& c = GetParam();
  TempDir dir("blkmq-sha256");
  const std::string through = dir.file("through-blkmq");
  const std::string reference = dir.file("with-pwrite");
  if (c.direct && !devtest::direct_io_works(dir.path()))
    GTEST_SKIP() << "the file system under /tmp refuses O_DIRECT";

  AlignedBuf data(kSize);
  devtest::fill_pattern(data.data, kSize, kSeed);
  write_direct(reference, data.data, kSize);
  if (HasFatalFailure()) return;

  const uint32_t unit = c.direct ? 4096 : 512;
  const std::string queues = std::to_string(std::min(2u, nr_cpu_ids()));
  ParamMap params = {{"filename", through}, {"attr:queue/scheduler", c.scheduler}};
  if (std::string(c.driver) == "uring") {
    params.insert({{"size", std::to_string(kSize)}, {"submit_queues", queues}});
    if (c.direct) params.insert({{"direct", "1"}, {"bs", "4096"}});
  } else {
    // The loop target serves an existing file, at its size.
    int fd = open(through.c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, kSize), 0);
    close(fd);
    params.insert({{"target", "loop"}, {"nr_hw_queues", queues}, {"queue_depth", "32"}});
  }
  auto r = create_device(c.driver, params);
  if (!r && std::string(c.driver) == "ublk" &&
      r.status().message().find("io_uring") != std::string::npos)
    GTEST_SKIP() << "io_uring is not available here: " << r.status().message();
  ASSERT_TRUE(r.ok()) << (r ? "" : r.status().message());
  std::unique_ptr<Device> dev = std::move(*r);
  Queue& q = dev->queue();
  ASSERT_EQ(dev->size_bytes(), kSize);
  auto sched = q.attr("queue/scheduler");
  ASSERT_TRUE(sched.ok());
  EXPECT_NE(sched->find(std::string("[") + c.scheduler + "]"), std::string::npos) << *sched;

  std::mt19937_64 rng(kSeed);
  const std::vector<Extent> ext = shuffled_extents(unit, rng);
  std::vector<int> errors(kThreads, 0);
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] { errors[t] = write_extents(q, data.data, ext, t, unit); });
  for (auto& th : ts) th.join();
  for (unsigned t = 0; t < kThreads; t++) EXPECT_EQ(errors[t], 0) << "writer " << t;
  ASSERT_EQ(q.flush_sync(), BlkStatus::ok);

  const std::string want = sha256_of(reference);
  ASSERT_EQ(want.size(), 64u) << "sha256sum did not run";
  EXPECT_EQ(sha256_of(through), want) << c.name << ": " << ext.size() << " extents";
  // And still the same once the device is gone (nothing written late).
  dev.reset();
  EXPECT_EQ(sha256_of(through), want);
}

INSTANTIATE_TEST_SUITE_P(
    Integrity, Sha256,
    testing::Values(Case{"uring_buffered_none", "uring", false, "none"},
                    Case{"uring_buffered_mq_deadline", "uring", false, "mq-deadline"},
                    Case{"uring_buffered_kyber", "uring", false, "kyber"},
                    Case{"uring_direct_none", "uring", true, "none"},
                    Case{"uring_direct_mq_deadline", "uring", true, "mq-deadline"},
                    Case{"uring_direct_kyber", "uring", true, "kyber"},
                    Case{"ublk_loop_none", "ublk", false, "none"},
                    Case{"ublk_loop_mq_deadline", "ublk", false, "mq-deadline"},
                    Case{"ublk_loop_kyber", "ublk", false, "kyber"}),
    case_name);

}  // namespace
}  // namespace blkmq
