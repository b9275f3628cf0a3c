// What the driver tests share: creating devices by name, counting bio
// completions, bios with their own buffers, and temporary files.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "blkmq/blkmq.h"

namespace blkmq::devtest {

// create_device(driver, params), expected to succeed (nullptr and a test
// failure otherwise).
inline std::unique_ptr<Device> make_device(std::string_view driver, const ParamMap& params) {
  auto r = create_device(driver, params);
  EXPECT_TRUE(r.ok()) << (r ? "" : r.status().message());
  return r ? std::move(*r) : nullptr;
}

// create_device(driver, params), expected to fail: its message.
inline std::string make_device_error(std::string_view driver, const ParamMap& params) {
  auto r = create_device(driver, params);
  EXPECT_FALSE(r.ok());
  return r ? "" : r.status().message();
}

// The driver is registered under `driver` with exactly `infos` (names and
// defaults, in order) as its parameters.
inline void expect_registered(std::string_view driver, const std::vector<ParamInfo>& infos) {
  auto drivers = device_drivers();
  EXPECT_NE(std::find(drivers.begin(), drivers.end(), driver), drivers.end()) << driver;
  auto params = device_params(driver);
  ASSERT_EQ(params.size(), infos.size()) << driver;
  for (size_t i = 0; i < infos.size(); i++) {
    EXPECT_EQ(params[i].name, infos[i].name);
    EXPECT_EQ(params[i].default_value, infos[i].default_value) << infos[i].name;
  }
}

// A driver's parameter parser (ParamMap -> Result<Params>) run on `m`,
// expected to succeed: the parsed parameters (defaults on failure).
template <typename Parse>
auto parse_ok(Parse parse, const ParamMap& m) {
  auto r = parse(m);
  EXPECT_TRUE(r.ok()) << (r ? "" : r.status().message());
  using Params = std::remove_cvref_t<decltype(*r)>;
  return r ? *r : Params{};
}

// The same, expected to fail: its message.
template <typename Parse>
std::string parse_err(Parse parse, const ParamMap& m) {
  auto r = parse(m);
  EXPECT_FALSE(r.ok());
  return r ? "" : r.status().message();
}

// Counts bio completions; wait() returns when `want` have ended. Remembers
// the last error and the name of the thread the last completion ran in.
class Waiter {
 public:
  void done(BlkStatus st) {
    char name[32] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    std::lock_guard lk(mu_);
    ended_++;
    if (st != BlkStatus::ok) {
      errors_++;
      last_error_ = st;
    }
    thread_ = name;
    cv_.notify_all();
  }
  bool wait(int want, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, limit, [&] { return ended_ >= want; });
  }
  int ended() {
    std::lock_guard lk(mu_);
    return ended_;
  }
  int errors() {
    std::lock_guard lk(mu_);
    return errors_;
  }
  BlkStatus last_error() {
    std::lock_guard lk(mu_);
    return last_error_;
  }
  std::string thread() {
    std::lock_guard lk(mu_);
    return thread_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int ended_ = 0;
  int errors_ = 0;
  BlkStatus last_error_ = BlkStatus::ok;
  std::string thread_;
};

// end_io for a bio whose private_data is a Waiter.
inline void waiter_end_io(Bio* bio) { static_cast<Waiter*>(bio->private_data)->done(bio->status); }

// A bio without data or completion: op, flags, and the byte range.
inline Bio bio_at(ReqOp op, uint64_t offset, uint32_t len, uint32_t flags = 0) {
  Bio bio;
  bio.op = op;
  bio.flags = flags;
  bio.sector = offset >> kSectorShift;
  bio.size = len;
  return bio;
}

// `n` bytes of a simple pattern that differs with `seed`.
inline std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<unsigned char>(seed * 37 + i * 11 + 3);
  return v;
}

// A bio with its own zeroed buffer (for ops that carry data), for
// asynchronous submission. Counts its own completions in `ends`, which
// catches a bio ended twice.
struct IoSlot {
  Bio bio;
  iovec iov{};
  std::vector<unsigned char> buf;
  std::atomic<int> ends{0};
  Waiter* w = nullptr;

  void prep(ReqOp op, uint64_t offset, uint32_t len, Waiter* waiter, uint32_t flags = 0) {
    bio = bio_at(op, offset, len, flags);
    if (op_has_data(op)) {
      buf.assign(len, 0);
      iov = {buf.data(), len};
      bio.vec = &iov;
      bio.nr_vecs = 1;
    }
    bio.end_io = [](Bio* b) {
      auto* s = static_cast<IoSlot*>(b->private_data);
      s->ends.fetch_add(1);
      s->w->done(b->status);
    };
    bio.private_data = this;
    w = waiter;
  }
};

// A temporary directory under /tmp, removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "blkmq-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    const char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = p ? p : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    if (path_ != "/tmp") std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const char* name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Whether the file system under `dir` accepts O_DIRECT.
inline bool direct_io_works(const std::string& dir) {
  std::string f = dir + "/direct-probe";
  int fd = open(f.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0644);
  if (fd >= 0) close(fd);
  unlink(f.c_str());
  return fd >= 0;
}

// Page-aligned buffer (O_DIRECT needs aligned memory).
struct AlignedBuf {
  explicit AlignedBuf(size_t n) : size(n) {
    void* p = nullptr;
    EXPECT_EQ(posix_memalign(&p, 4096, std::max<size_t>(n, 1)), 0);
    data = static_cast<unsigned char*>(p);
  }
  ~AlignedBuf() { free(data); }
  AlignedBuf(const AlignedBuf&) = delete;
  AlignedBuf& operator=(const AlignedBuf&) = delete;
  unsigned char* data;
  size_t size;
};

// Deterministic pseudo-random bytes (xorshift) from `seed`.
inline void fill_pattern(unsigned char* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<unsigned char>(x);
  }
}

}  // namespace blkmq::devtest
