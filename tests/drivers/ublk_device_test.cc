// The ublk driver through its public API (include/blkmq/ublk.h) and through
// create_device("ublk"): parameters, the null target from several threads,
// user targets that complete asynchronously, fail, run slowly, or transfer
// short, teardown with I/O in flight, and the completion context (seed 002).
#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "blkmq/elevator/elevator.h"
#include "blkmq/driver/context.h"
#include "blkmq/driver/ublk.h"
#include "support/device_test_util.h"

namespace blkmq {
namespace {

using namespace std::chrono_literals;
using devtest::IoSlot;
using devtest::pattern;
using devtest::Waiter;

std::unique_ptr<Device> make(const ParamMap& params) { return devtest::make_device("ublk", params); }
std::string make_error(const ParamMap& params) { return devtest::make_device_error("ublk", params); }

std::unique_ptr<Device> make_user(std::unique_ptr<UblkTarget> t, UblkOptions o) {
  auto r = create_ublk_device(std::move(t), o);
  EXPECT_TRUE(r.ok()) << (r ? "" : r.status().message());
  return r ? std::move(*r) : nullptr;
}

// Small: page faults are slow in some sandboxes (64 MiB took 0.7 s here).
constexpr uint64_t kRamSize = 8ull << 20;

UblkOptions small_options() {
  UblkOptions o;
  o.size = kRamSize;
  o.queue_depth = 32;
  return o;
}

std::string thread_name() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

// A RAM disk target: each I/O copies to or from `data`. Completes inline
// unless a worker is started, which then completes everything from its own
// thread (the asynchronous case).
class RamTarget : public UblkTarget {
 public:
  explicit RamTarget(uint64_t size) : data_(size) {}
  ~RamTarget() override { stop_worker(); }

  void handle(UblkIo& io) override {
    handled_.fetch_add(1);
    if (!async_) {
      finish(io);
      return;
    }
    std::lock_guard lk(mu_);
    pending_.push_back(&io);
    cv_.notify_one();
  }

  void start_worker(std::chrono::microseconds delay = 0us) {
    async_ = true;
    delay_ = delay;
    worker_ = std::thread([this] { work(); });
  }
  void stop_worker() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
      cv_.notify_one();
    }
    if (worker_.joinable()) worker_.join();
  }
  int handled() const { return handled_.load(); }
  std::vector<unsigned char>& data() { return data_; }

 protected:
  // Moves the data and completes; overridable for failure/short targets.
  virtual void finish(UblkIo& io) {
    if (io.op() == ReqOp::read || io.op() == ReqOp::write) {
      const bool write = io.op() == ReqOp::write;
      io.for_each_segment([&](void* base, size_t len, uint64_t off) {
        unsigned char* d = data_.data() + io.offset() + off;
        if (write) std::memcpy(d, base, len); else std::memcpy(base, d, len);
      });
    }
    io.complete(BlkStatus::ok);
  }

 private:
  void work() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stop_ and drained
      UblkIo* io = pending_.front();
      pending_.pop_front();
      lk.unlock();
      // The target's service time: a device latency, real time by design.
      if (delay_.count()) std::this_thread::sleep_for(delay_);
      finish(*io);
      lk.lock();
    }
  }

  std::vector<unsigned char> data_;
  std::atomic<int> handled_{0};
  bool async_ = false;
  std::chrono::microseconds delay_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<UblkIo*> pending_;
  bool stop_ = false;
  std::thread worker_;
};

// ---- registration and parameters ----

TEST(UblkDevice, IsRegisteredWithItsParameters) {
  auto names = device_drivers();
  EXPECT_NE(std::find(names.begin(), names.end(), "ublk"), names.end());
  std::vector<std::string> params;
  for (const ParamInfo& p : device_params("ublk")) params.push_back(p.name);
  for (const char* n : {"target", "nr_hw_queues", "queue_depth", "size", "bs", "filename", "pin"})
    EXPECT_NE(std::find(params.begin(), params.end(), n), params.end()) << n;
}

TEST(UblkDevice, BadParametersAreRefusedByName) {
  EXPECT_NE(make_error({{"target", "disk"}}).find("target"), std::string::npos);
  EXPECT_NE(make_error({{"nr_hw_queues", "0"}}).find("nr_hw_queues"), std::string::npos);
  EXPECT_NE(make_error({{"nr_hw_queues", "100000"}}).find("nr_hw_queues"), std::string::npos);
  EXPECT_NE(make_error({{"queue_depth", "0"}}).find("queue_depth"), std::string::npos);
  EXPECT_NE(make_error({{"bs", "1000"}}).find("block size"), std::string::npos);
  EXPECT_NE(make_error({{"size", "12x"}}).find("size"), std::string::npos);
  EXPECT_NE(make_error({{"size", "1000"}}).find("size"), std::string::npos);
  EXPECT_NE(make_error({{"pin", "2"}}).find("pin"), std::string::npos);
  EXPECT_NE(make_error({{"colour", "red"}}).find("colour"), std::string::npos);
  EXPECT_NE(make_error({{"target", "loop"}}).find("filename"), std::string::npos);
  EXPECT_NE(make_error({{"target", "loop"}, {"filename", "/nonexistent/x"}}).find("/nonexistent/x"),
            std::string::npos);
  EXPECT_NE(make_error({{"filename", "/tmp/x"}}).find("filename"), std::string::npos);
}

TEST(UblkDevice, OptionsAreValidated) {
  UblkOptions o = small_options();
  o.size = 0;
  auto r = create_ublk_device(std::make_unique<RamTarget>(1), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("size"), std::string::npos);
  EXPECT_FALSE(create_ublk_device(nullptr, small_options()).ok());
}

TEST(UblkDevice, DefaultsAndScheduler) {
  auto dev = make({{"size", "1g"}, {"bs", "4096"}});
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->driver_name(), "ublk");
  EXPECT_EQ(dev->size_bytes(), 1ull << 30);
  EXPECT_EQ(dev->queue().nr_hw_queues(), 1u);
  EXPECT_EQ(dev->queue().limits().logical_block_size, 4096u);
  EXPECT_NE(ublk_target(*dev), nullptr);
  auto regs = registered_elevators();
  const bool dl = std::find(regs.begin(), regs.end(), "mq-deadline") != regs.end();
  auto sched = dev->queue().attr("queue/scheduler");
  ASSERT_TRUE(sched.ok());
  EXPECT_NE(sched->find(dl ? "[mq-deadline]" : "[none]"), std::string::npos) << *sched;
  std::vector<unsigned char> buf(4096);
  EXPECT_EQ(dev->queue().read_sync(buf.data(), 0, 4096), BlkStatus::ok);
}

TEST(UblkDevice, InitQueueFailureFailsCreation) {
  struct Failing : UblkTarget {
    void handle(UblkIo& io) override { io.complete(); }
    Status init_queue(unsigned q) override { return Status::invalid("no ring for queue " + std::to_string(q)); }
  };
  auto r = create_ublk_device(std::make_unique<Failing>(), small_options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no ring for queue 0"), std::string::npos);
}

// ---- the null target ----

TEST(UblkDevice, NullTargetFromSeveralThreads) {
  const unsigned nq = std::min(2u, nr_cpu_ids());
  auto dev = make({{"nr_hw_queues", std::to_string(nq)}, {"queue_depth", "16"}, {"size", "256m"}});
  ASSERT_TRUE(dev);
  constexpr int kThreads = 4, kRounds = 20, kDepth = 8;
  std::vector<std::thread> ts;
  std::atomic<int> errors{0}, total{0};
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      std::vector<IoSlot> slots(kDepth);
      for (int r = 0; r < kRounds; r++) {
        Waiter w;
        for (int i = 0; i < kDepth; i++) {
          const uint64_t off = (uint64_t(t) * 1000 + r * kDepth + i) * 4096;
          slots[i].prep(i % 2 ? ReqOp::write : ReqOp::read, off, 4096, &w);
          dev->queue().submit_bio(&slots[i].bio);
        }
        EXPECT_TRUE(w.wait(kDepth));
        errors += w.errors();
      }
      for (auto& s : slots) total += s.ends.load();
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(total.load(), kThreads * kRounds * kDepth);  // each bio ended exactly once
}

// ---- user targets ----

TEST(UblkDevice, AsyncUserTargetCompletesFromItsOwnThread) {
  auto owned = std::make_unique<RamTarget>(kRamSize);
  RamTarget* t = owned.get();
  t->start_worker();
  auto dev = make_user(std::move(owned), small_options());
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  auto a = pattern(128 << 10, 1);
  ASSERT_EQ(q.write_sync(a.data(), 1 << 20, a.size()), BlkStatus::ok);
  std::vector<unsigned char> out(a.size());
  ASSERT_EQ(q.read_sync(out.data(), 1 << 20, out.size()), BlkStatus::ok);
  EXPECT_EQ(out, a);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), t->data().begin() + (1 << 20)));
  // Many in flight at once: all end, once.
  Waiter w;
  std::vector<IoSlot> slots(64);
  for (int i = 0; i < 64; i++) {
    slots[i].prep(ReqOp::read, uint64_t(i) * 8192, 8192, &w);
    q.submit_bio(&slots[i].bio);
  }
  ASSERT_TRUE(w.wait(64));
  EXPECT_EQ(w.errors(), 0);
  for (auto& s : slots) EXPECT_EQ(s.ends.load(), 1);
}

// Fails every Nth request it sees with ioerr.
class FailNthTarget : public RamTarget {
 public:
  FailNthTarget(uint64_t size, int n) : RamTarget(size), n_(n) {}
  int failed() const { return failed_.load(); }

 protected:
  void finish(UblkIo& io) override {
    if (++seen_ % n_ == 0) {
      failed_++;
      io.complete(BlkStatus::ioerr);
      return;
    }
    RamTarget::finish(io);
  }

 private:
  int n_;
  std::atomic<int> seen_{0};
  std::atomic<int> failed_{0};
};

TEST(UblkDevice, TargetFailingEveryNthRequest) {
  auto owned = std::make_unique<FailNthTarget>(kRamSize, 3);
  FailNthTarget* t = owned.get();
  auto dev = make_user(std::move(owned), small_options());
  ASSERT_TRUE(dev);
  std::vector<unsigned char> buf(4096);
  int bad = 0;
  // One at a time: one bio per request, so requests and bios correspond.
  for (int i = 0; i < 30; i++) bad += dev->queue().read_sync(buf.data(), uint64_t(i) * 8192, 4096) != BlkStatus::ok;
  EXPECT_EQ(bad, 10);
  EXPECT_EQ(t->failed(), 10);
  // Asynchronous, with merges possible: every bio still ends once, and the
  // failures are exactly the failed requests' bios.
  Waiter w;
  std::vector<IoSlot> slots(48);
  for (int i = 0; i < 48; i++) {
    slots[i].prep(ReqOp::write, uint64_t(i) * 65536, 4096, &w);
    dev->queue().submit_bio(&slots[i].bio);
  }
  ASSERT_TRUE(w.wait(48));
  for (auto& s : slots) EXPECT_EQ(s.ends.load(), 1);
  EXPECT_GE(w.errors(), 1);
}

TEST(UblkDevice, TeardownWithSlowTargetDrains) {
  auto owned = std::make_unique<RamTarget>(kRamSize);
  owned->start_worker(2ms);
  UblkOptions o = small_options();
  o.nr_hw_queues = std::min(2u, nr_cpu_ids());
  auto dev = make_user(std::move(owned), o);
  ASSERT_TRUE(dev);
  Waiter w;
  std::vector<IoSlot> slots(40);
  for (int i = 0; i < 40; i++) {
    slots[i].prep(i % 2 ? ReqOp::write : ReqOp::read, uint64_t(i) * 131072, 4096, &w);
    dev->queue().submit_bio(&slots[i].bio);
  }
  EXPECT_LT(w.ended(), 40);  // 2 ms each: most are still in flight
  dev.reset();               // drains: returns once every bio has ended
  EXPECT_EQ(w.ended(), 40);
  EXPECT_EQ(w.errors(), 0);
  for (auto& s : slots) EXPECT_EQ(s.ends.load(), 1);
}

// Transfers at most `limit` bytes per request.
class ShortTarget : public RamTarget {
 public:
  ShortTarget(uint64_t size, uint32_t limit) : RamTarget(size), limit_(limit) {}

 protected:
  void finish(UblkIo& io) override {
    if (io.op() != ReqOp::read || io.length() <= limit_) return RamTarget::finish(io);
    io.complete(BlkStatus::ok, limit_);
  }

 private:
  uint32_t limit_;
};

TEST(UblkDevice, ShortTransferEndsTheRestWithIoerr) {
  auto dev = make_user(std::make_unique<ShortTarget>(kRamSize, 4096 + 100), small_options());
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  std::vector<unsigned char> buf(16384);
  EXPECT_EQ(q.read_sync(buf.data(), 0, 4096), BlkStatus::ok);
  EXPECT_EQ(q.read_sync(buf.data(), 0, 16384), BlkStatus::ioerr);
  // Two adjacent bios merged into one request under a plug: the first lies
  // wholly inside the good bytes and ends ok, the second ends ioerr.
  Waiter w;
  std::vector<IoSlot> slots(2);
  {
    Plug plug(2);
    for (int i = 0; i < 2; i++) {
      slots[i].prep(ReqOp::read, 1048576 + uint64_t(i) * 4096, 4096, &w);
      q.submit_bio(&slots[i].bio);
    }
  }
  ASSERT_TRUE(w.wait(2));
  EXPECT_EQ(slots[0].ends.load(), 1);
  EXPECT_EQ(slots[1].ends.load(), 1);
  if (slots[1].bio.status != BlkStatus::ok) {  // merged into one request
    EXPECT_EQ(slots[0].bio.status, BlkStatus::ok);
    EXPECT_EQ(slots[1].bio.status, BlkStatus::ioerr);
  }
}

TEST(UblkDevice, DoubleCompletionIsIgnored) {
  static std::atomic<int> second_ok{0};
  struct Twice : UblkTarget {
    void handle(UblkIo& io) override {
      EXPECT_TRUE(io.complete());
      // Safe here only because nothing can reuse the request meanwhile:
      // this test issues a single I/O.
      second_ok += io.complete(BlkStatus::ioerr);
    }
  };
  auto dev = make_user(std::make_unique<Twice>(), small_options());
  ASSERT_TRUE(dev);
  std::vector<unsigned char> buf(4096);
  EXPECT_EQ(dev->queue().read_sync(buf.data(), 0, 4096), BlkStatus::ok);
  dev.reset();  // the servers have left handle() once this returns
  EXPECT_EQ(second_ok.load(), 0);
}

// ---- completion context (seed 002) ----

class ContextTarget : public UblkTarget {
 public:
  void handle(UblkIo& io) override {
    handler_name_ = thread_name();
    io.complete();
  }
  void completed(UblkIo& io) override {
    std::lock_guard lk(mu_);
    completer_name_ = thread_name();
  }
  std::string completer() {
    std::lock_guard lk(mu_);
    return completer_name_;
  }
  std::string handler() const { return handler_name_; }

 private:
  std::mutex mu_;
  std::string completer_name_;
  std::string handler_name_;  // written and read on the server thread, then after a sync read
};

std::string completion_thread(const char* mode) {
  auto owned = std::make_unique<ContextTarget>();
  ContextTarget* t = owned.get();
  UblkOptions o = small_options();
  o.nr_hw_queues = 1;
  o.completion_hook = true;
  auto dev = make_user(std::move(owned), o);
  if (!dev) return "";
  // rq_affinity=0: no handoff to the submitting CPU, so only
  // task_completion decides between the server thread and ksoftirqd.
  EXPECT_TRUE(dev->queue().set_attr("queue/rq_affinity", "0").ok());
  EXPECT_TRUE(dev->queue().set_attr("queue/task_completion", mode).ok());
  std::vector<unsigned char> buf(4096);
  EXPECT_EQ(dev->queue().read_sync(buf.data(), 0, 4096), BlkStatus::ok);
  EXPECT_EQ(t->handler(), "ublk-srv/0");
  return t->completer();
}

TEST(UblkDevice, TaskCompletionLocalRunsOnTheServerThread) {
  EXPECT_EQ(completion_thread("local"), "ublk-srv/0");
}

TEST(UblkDevice, TaskCompletionSoftirqRunsOnKsoftirqd) {
  EXPECT_EQ(completion_thread("softirq").rfind("ksoftirqd/", 0), 0u);
}

}  // namespace
}  // namespace blkmq
