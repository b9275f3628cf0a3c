// A device removed while threads still submit to it (blktests block/027),
// and what a submitter waiting on a frozen queue gets when it gives up or
// the device goes away. Every bio ends exactly once with a status; after
// removal starts, new bios end with ioerr; nothing leaks or hangs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "core/core.h"
#include "support/verified_io.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

constexpr const char* kScheds[] = {"none", "mq-deadline", "kyber", "bfq"};
constexpr uint32_t kBlock = 4096;

struct SubmitterCounts {
  std::atomic<uint64_t> submitted{0}, ended{0}, ok{0}, ioerr{0}, other{0}, doubles{0};
  // Bios submitted after mark_dead() returned that did not end with ioerr.
  std::atomic<uint64_t> late_not_failed{0};
};

struct RemovalIo : VerifiedIo {
  bool after_dead = false;
};

void account(RemovalIo& io, SubmitterCounts& c) {
  if (io.ends.load() > 1) c.doubles++;
  c.ended++;
  const BlkStatus st = io.bio.status;
  if (st == BlkStatus::ok) c.ok++;
  else if (st == BlkStatus::ioerr) c.ioerr++;
  else c.other++;
  if (io.after_dead && st != BlkStatus::ioerr) c.late_not_failed++;
  io.ends.store(0);
}

// Keeps 8 reads and writes going on q until `stop`; `dead` says whether
// mark_dead() has returned, which makes every later bio's status known.
void submitter(Queue& q, unsigned id, std::atomic<bool>& stop, std::atomic<bool>& dead, SubmitterCounts& c) {
  std::vector<RemovalIo> ios(8);
  uint64_t n = 0;
  while (!stop.load()) {
    for (RemovalIo& io : ios) {
      if (!io.done.load(std::memory_order_acquire)) continue;
      if (io.ends.load()) account(io, c);
      io.after_dead = dead.load();
      n++;
      start_verified_io(io, id * 64 + n % 64, n % 2 ? ReqOp::write : ReqOp::read);
      c.submitted++;
      q.submit_bio(&io.bio);
    }
    std::this_thread::yield();
  }
  for (RemovalIo& io : ios) {
    wait_verified_io(io);
    if (io.ends.load()) account(io, c);
  }
}

// block/027: four threads submit; the device is marked dead under them and
// they go on submitting for a while (each new bio ends with ioerr at
// once), then stop, and the device is destroyed. Under every scheduler.
TEST(Removal, SubmittersStillSubmittingWhenTheDeviceIsRemoved) {
  Watchdog wd("removal while submitting", std::chrono::seconds(180));
  for (const char* sched : kScheds) {
    auto dev = make_null_device({{"irqmode", "2"}, {"completion_nsec", "50000"}, {"submit_queues", "2"},
                                 {"hw_queue_depth", "16"}, {"attr:queue/scheduler", sched}});
    ASSERT_TRUE(dev) << sched;
    SubmitterCounts c;
    std::atomic<bool> stop{false}, dead{false};
    std::vector<std::thread> th;
    for (unsigned i = 0; i < 4; i++) th.emplace_back([&, i] { submitter(dev->queue(), i, stop, dead, c); });
    // At least 300 ms (scaled: the run's length, time is the point) and
    // 100 good I/Os before the removal: a fixed sleep alone let bfq under
    // TSan on a loaded machine end 98.
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(300 * stress_scale())));
    eventually([&] { return c.ok.load() > 100u; }, 60000);
    dev->queue().mark_dead();
    dead = true;
    // Submitting against the dead device for a while: a duration, by design.
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(100 * stress_scale())));
    stop = true;
    for (auto& x : th) x.join();
    EXPECT_GT(c.ok.load(), 100u) << sched;
    EXPECT_GT(c.ioerr.load(), 0u) << sched;
    EXPECT_EQ(c.ended.load(), c.submitted.load()) << sched;
    EXPECT_EQ(c.doubles.load(), 0u) << sched;
    EXPECT_EQ(c.other.load(), 0u) << sched;
    EXPECT_EQ(c.late_not_failed.load(), 0u) << sched << ": a bio submitted to a dead queue did not end with ioerr";
    expect_queue_idle(dev->queue(), sched);
    dev.reset();
  }
}

// A submitter waiting for a frozen queue to thaw wakes when the device is
// removed, and its bio ends with ioerr (the kernel's bio_queue_enter on a
// dead disk). The freeze holder then unfreezes a dead queue: still ioerr.
TEST(Removal, FrozenQueueWaiterEndsWithIoerrWhenTheDeviceDies) {
  Watchdog wd("frozen waiter on a dying queue", std::chrono::seconds(60));
  auto dev = make_null_device({{"irqmode", "1"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  q.freeze();
  std::atomic<bool> ended{false};
  BlkStatus st = BlkStatus::ok;
  std::thread waiter([&] {
    uint8_t buf[kBlock];
    st = q.read_sync(buf, 0, kBlock);  // sleeps in the freeze
    ended = true;
  });
  // Asleep in the freeze (counted there), not merely not yet arrived.
  ASSERT_TRUE(eventually([&] { return to_impl(&q)->enter_waiters_.load() == 1; })) << "the submitter never slept";
  EXPECT_FALSE(ended.load()) << "a frozen queue let a bio through";
  q.mark_dead();
  waiter.join();
  EXPECT_EQ(st, BlkStatus::ioerr);
  q.unfreeze();
  uint8_t buf[kBlock];
  EXPECT_EQ(q.read_sync(buf, 0, kBlock), BlkStatus::ioerr);
  EXPECT_EQ(q.alloc_request(ReqOp::read), nullptr);
}

// A submitter that will not wait gives up on a frozen queue with again
// (-EAGAIN), a nowait passthrough allocation with nullptr; once thawed
// both go through.
TEST(Removal, NowaitSubmitterGivesUpOnAFrozenQueueWithAgain) {
  auto dev = make_null_device({{"irqmode", "1"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  uint8_t buf[kBlock] = {};
  iovec v{buf, kBlock};
  auto nowait_read = [&] {
    Bio b;
    b.op = ReqOp::read;
    b.flags = kBioNowait;
    b.size = kBlock;
    b.vec = &v;
    b.nr_vecs = 1;
    std::atomic<bool> done{false};
    b.private_data = &done;
    b.end_io = [](Bio* x) { static_cast<std::atomic<bool>*>(x->private_data)->store(true); };
    q.submit_bio(&b);
    while (!done.load()) std::this_thread::yield();
    return b.status;
  };
  q.freeze();
  EXPECT_EQ(nowait_read(), BlkStatus::again);
  EXPECT_EQ(q.alloc_request(ReqOp::read, false, true), nullptr);
  q.unfreeze();
  EXPECT_EQ(nowait_read(), BlkStatus::ok);
  Request* rq = q.alloc_request(ReqOp::read, false, true);
  ASSERT_NE(rq, nullptr);
  q.free_request(rq);
}

}  // namespace
}  // namespace blkmq::test
