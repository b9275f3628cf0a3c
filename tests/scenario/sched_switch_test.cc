// Scheduler switching under verified I/O: four threads write and read back
// their own blocks of a memory-backed null device while a control thread
// rotates queue/scheduler among every registered scheduler and changes
// queue/nr_requests between 4 and its maximum. A switch freezes the queue,
// moves requests between scheduler and driver tags and rebuilds the
// scheduler: no bio may be lost, ended twice or see another's data. The
// test registers a FIFO scheduler of its own, so a scheduler is in the
// rotation even where none is built in.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "blkmq/elevator/elevator.h"
#include "support/fifo_sched.h"
#include "support/verified_io.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kBlock = kVerifyBlock;
constexpr unsigned kThreads = 4;
constexpr unsigned kBlocksPerThread = 512;
constexpr unsigned kDepthPerThread = 16;
constexpr unsigned kQueueDepth = 64;         // hw_queue_depth: the nr_requests limit without a scheduler
constexpr unsigned kMaxSchedRequests = 2048;  // the limit with one (the kernel's)
constexpr auto kSwitchPeriod = std::chrono::milliseconds(100);
constexpr auto kResizePeriod = std::chrono::milliseconds(20);

struct Counts {
  std::atomic<uint64_t> submitted{0}, ended{0}, doubles{0}, errors{0}, mismatches{0}, verified{0};
};

// Each 8-byte word names the block, the write and the offset, so a block
// that lands in the wrong place or is stale fails the comparison.
void fill_block(uint8_t* p, uint64_t block, uint32_t pattern) {
  for (uint32_t i = 0; i < kBlock; i += 8) {
    uint64_t v = (block << 32) ^ (uint64_t{pattern} << 13) ^ i;
    std::memcpy(p + i, &v, 8);
  }
}

// One worker: keeps kDepthPerThread I/Os in flight over its own blocks and
// remembers what each block must hold.
class Worker {
 public:
  Worker(Queue& q, unsigned id, Counts& c) : q_(q), base_(uint64_t{id} * kBlocksPerThread), c_(c), rng_(id + 1) {}

  void run(const std::atomic<bool>& stop) {
    while (!stop.load(std::memory_order_relaxed)) {
      for (VerifiedIo& io : ios_)
        if (io.done.load(std::memory_order_acquire)) {
          reap(io);
          issue(io);
        }
      std::this_thread::yield();
    }
    for (VerifiedIo& io : ios_) {
      wait_verified_io(io);
      reap(io);
    }
  }

 private:
  void reap(VerifiedIo& io) {
    const int ends = io.ends.exchange(0, std::memory_order_relaxed);
    if (ends == 0) return;
    if (ends > 1) c_.doubles++;
    c_.ended++;
    busy_[io.block] = false;
    if (io.bio.status != BlkStatus::ok) {
      c_.errors++;
    } else if (io.is_write) {
      written_[io.block] = io.pattern;
    } else if (written_[io.block] != 0) {
      uint8_t want[kBlock];
      fill_block(want, base_ + io.block, written_[io.block]);
      if (std::memcmp(want, io.buf, kBlock) != 0) c_.mismatches++;
      c_.verified++;
    }
  }

  void issue(VerifiedIo& io) {
    const uint64_t blk = rng_() % kBlocksPerThread;
    if (busy_[blk]) return;  // one I/O per block at a time: the expected content stays known
    busy_[blk] = true;
    io.block = blk;
    io.is_write = rng_() % 2 == 0;
    io.pattern = static_cast<uint32_t>(rng_() | 1);
    if (io.is_write) fill_block(io.buf, base_ + blk, io.pattern);
    else std::memset(io.buf, 0, kBlock);
    start_verified_io(io, base_ + blk, io.is_write ? ReqOp::write : ReqOp::read);
    c_.submitted++;
    q_.submit_bio(&io.bio);
  }

  Queue& q_;
  const uint64_t base_;
  Counts& c_;
  std::mt19937_64 rng_;
  std::vector<VerifiedIo> ios_ = std::vector<VerifiedIo>(kDepthPerThread);
  std::vector<uint32_t> written_ = std::vector<uint32_t>(kBlocksPerThread, 0);  // 0: never written
  std::vector<bool> busy_ = std::vector<bool>(kBlocksPerThread, false);
};

// A FIFO scheduler of this test (support/fifo_sched.h), so that switching
// to and from a scheduler (scheduler tags, nr_requests up to 2048) is
// exercised whatever else is registered.
const ElevatorType kFifoType = fifo_elevator("test-fifo");

void register_test_fifo() {
  static std::once_flag once;
  std::call_once(once, [] {
    Status st = register_elevator(&kFifoType);
    EXPECT_TRUE(st) << st.message();
  });
}

// "[none] mq-deadline kyber bfq" -> {"none", "mq-deadline", "kyber", "bfq"};
// the bracketed one is current.
std::vector<std::string> parse_schedulers(const std::string& attr, std::string* current) {
  std::vector<std::string> out;
  std::istringstream in(attr);
  for (std::string w; in >> w;) {
    if (w.size() > 2 && w.front() == '[' && w.back() == ']') {
      w = w.substr(1, w.size() - 2);
      if (current) *current = w;
    }
    out.push_back(w);
  }
  return out;
}

TEST(SchedSwitchParse, ReadsTheSysfsList) {
  std::string cur;
  EXPECT_EQ(parse_schedulers("[none] mq-deadline kyber bfq\n", &cur),
            (std::vector<std::string>{"none", "mq-deadline", "kyber", "bfq"}));
  EXPECT_EQ(cur, "none");
  EXPECT_EQ(parse_schedulers("none [kyber]", &cur), (std::vector<std::string>{"none", "kyber"}));
  EXPECT_EQ(cur, "kyber");
}

// The control thread's work: every kSwitchPeriod the next scheduler, every
// kResizePeriod an nr_requests value valid for the current one (a boundary
// every other time). It is the only thread changing attributes, so the
// limit it computes is the limit the queue applies.
struct Controller {
  Queue& q;
  std::vector<std::string> scheds;
  size_t next_sched = 0;
  bool have_sched = false;
  std::mt19937 rng{12345};
  uint64_t sched_switches = 0, resizes = 0;

  void switch_scheduler() {
    const std::string& name = scheds[next_sched++ % scheds.size()];
    Status st = q.set_attr("queue/scheduler", name);
    ASSERT_TRUE(st) << "queue/scheduler=" << name << ": " << st.message();
    auto now = q.attr("queue/scheduler");
    ASSERT_TRUE(now);
    std::string cur;
    parse_schedulers(*now, &cur);
    ASSERT_EQ(cur, name);
    have_sched = name != "none";
    sched_switches++;
  }

  void resize() {
    const unsigned max = have_sched ? kMaxSchedRequests : kQueueDepth;
    unsigned nr = 4 + rng() % (max - 3);
    if (resizes % 4 == 1) nr = 4;
    if (resizes % 4 == 3) nr = max;
    Status st = q.set_attr("queue/nr_requests", std::to_string(nr));
    ASSERT_TRUE(st) << "queue/nr_requests=" << nr << ": " << st.message();
    resizes++;
  }
};

// The scenarios' device: a 64 MiB memory-backed null device of
// kQueueDepth tags, with the test's FIFO scheduler registered.
std::unique_ptr<Device> make_switch_device() {
  register_test_fifo();
  auto made = create_device("null", {{"memory_backed", "1"},
                                     {"hw_queue_depth", std::to_string(kQueueDepth)},
                                     {"size", "64"}});
  if (!made) {
    ADD_FAILURE() << made.status().message();
    return nullptr;
  }
  return std::move(made.value());
}

TEST(SchedSwitch, RotateSchedulersAndNrRequestsUnderVerifiedIo) {
  const double seconds = 20.0 * stress_scale();
  Watchdog wd("scheduler switch scenario", std::chrono::seconds(static_cast<int>(seconds) + 120));
  std::unique_ptr<Device> dev = make_switch_device();
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_GE(dev->size_bytes(), uint64_t{kThreads} * kBlocksPerThread * kBlock);
  auto list = q.attr("queue/scheduler");
  ASSERT_TRUE(list) << list.status().message();
  Controller ctl{q, parse_schedulers(*list, nullptr)};
  ASSERT_FALSE(ctl.scheds.empty());
  // Every built-in scheduler is in the rotation, bfq included.
  for (const char* name : {"none", "mq-deadline", "kyber", "bfq"})
    EXPECT_NE(std::find(ctl.scheds.begin(), ctl.scheds.end(), name), ctl.scheds.end()) << name;
  std::printf("[          ] schedulers: %s, %.1f s\n", list->c_str(), seconds);

  Counts c;
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < kThreads; i++) workers.push_back(std::make_unique<Worker>(q, i, c));
  for (auto& w : workers) threads.emplace_back([&stop, w = w.get()] { w->run(stop); });

  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  auto next_switch = Clock::now();
  while (Clock::now() < end && !::testing::Test::HasFatalFailure()) {
    if (Clock::now() >= next_switch) {
      ctl.switch_scheduler();
      next_switch += kSwitchPeriod;
    }
    ctl.resize();
    // The pace of the resizes over a run of fixed length: time is the point.
    std::this_thread::sleep_for(kResizePeriod);
  }
  stop = true;
  for (auto& t : threads) t.join();

  std::printf("[          ] %llu I/Os, %llu verified reads, %llu scheduler switches, %llu nr_requests changes\n",
              static_cast<unsigned long long>(c.submitted.load()), static_cast<unsigned long long>(c.verified.load()),
              static_cast<unsigned long long>(ctl.sched_switches), static_cast<unsigned long long>(ctl.resizes));
  EXPECT_GT(c.submitted.load(), 1000u);
  EXPECT_GT(c.verified.load(), 0u);
  EXPECT_GE(ctl.sched_switches, 5u);
  EXPECT_EQ(c.ended.load(), c.submitted.load());
  EXPECT_EQ(c.doubles.load(), 0u);
  EXPECT_EQ(c.errors.load(), 0u);
  EXPECT_EQ(c.mismatches.load(), 0u);
  // The last requests are accounted just after their bios end.
  eventually([&] { return q.disk_stat().in_flight == 0; }, 1000);
  EXPECT_EQ(q.disk_stat().in_flight, 0u);
}

// blktests block/047: two threads switch the scheduler of one queue at the
// same time, each to schedulers of its own choosing, first with the queue
// idle and then under verified I/O. Every switch succeeds (they serialize),
// the queue ends on a scheduler one of them set, and no bio is lost, ended
// twice or corrupted.
void racing_switches(bool with_io) {
  const double seconds = 4.0 * stress_scale();
  Watchdog wd("racing scheduler switches", std::chrono::seconds(static_cast<int>(seconds) + 120));
  std::unique_ptr<Device> dev = make_switch_device();
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  auto list = q.attr("queue/scheduler");
  ASSERT_TRUE(list) << list.status().message();
  const std::vector<std::string> scheds = parse_schedulers(*list, nullptr);
  ASSERT_GE(scheds.size(), 2u);

  Counts c;
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::thread> threads;
  if (with_io) {
    for (unsigned i = 0; i < kThreads; i++) workers.push_back(std::make_unique<Worker>(q, i, c));
    for (auto& w : workers) threads.emplace_back([&stop, w = w.get()] { w->run(stop); });
  }
  std::atomic<uint64_t> switches{0}, failures{0};
  std::string last[2];
  std::vector<std::thread> switchers;
  for (unsigned t = 0; t < 2; t++)
    switchers.emplace_back([&, t] {
      std::mt19937 rng(77 + t);
      while (!stop.load(std::memory_order_relaxed)) {
        const std::string& name = scheds[rng() % scheds.size()];
        if (q.set_attr("queue/scheduler", name)) {
          last[t] = name;
          switches.fetch_add(1, std::memory_order_relaxed);
        } else {
          failures.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  // The run's length: time is the point.
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : switchers) t.join();
  for (auto& t : threads) t.join();

  std::string cur;
  auto now = q.attr("queue/scheduler");
  ASSERT_TRUE(now);
  parse_schedulers(*now, &cur);
  std::printf("[          ] %llu switches by two threads, %llu I/Os, ends on %s\n",
              static_cast<unsigned long long>(switches.load()), static_cast<unsigned long long>(c.submitted.load()),
              cur.c_str());
  EXPECT_GE(switches.load(), 10u);
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_TRUE(cur == last[0] || cur == last[1]) << cur << " was set by neither thread last";
  if (with_io) {
    EXPECT_GT(c.submitted.load(), 100u);
    EXPECT_EQ(c.ended.load(), c.submitted.load());
    EXPECT_EQ(c.doubles.load(), 0u);
    EXPECT_EQ(c.errors.load(), 0u);
    EXPECT_EQ(c.mismatches.load(), 0u);
  }
  eventually([&] { return q.disk_stat().in_flight == 0; }, 1000);  // accounted just after the bios end
  EXPECT_EQ(q.disk_stat().in_flight, 0u);
}

TEST(SchedSwitch, TwoThreadsSwitchingAnIdleQueue) { racing_switches(false); }
TEST(SchedSwitch, TwoThreadsSwitchingUnderVerifiedIo) { racing_switches(true); }

}  // namespace
}  // namespace blkmq::test
