// Busy statuses, requeue, timeouts, budgets, shared tags, freeze, quiesce,
// update_nr_hw_queues and teardown.
#include <gtest/gtest.h>

#include <thread>

#include "base/lockstat.h"
#include "support/stub_driver.h"

namespace blkmq::test {
namespace {

using Slots = std::vector<std::unique_ptr<BioTracker::Slot>>;

void submit_n(StubDriver& d, BioTracker& t, Slots& s, int n, ReqOp op = ReqOp::write, uint64_t base = 0) {
  for (int i = 0; i < n; i++) {
    s.push_back(t.make(op, base + uint64_t(i) * 8192, 4096));
    d.q().submit_bio(&s.back()->bio);
  }
}

TEST(Dispatch, ResourceIsRetriedAndEveryBioEndsOnce) {
  StubDriver::Options o;
  o.mode = CompleteMode::irq_thread;
  StubDriver d(o);
  d.busy_next = 5;
  d.dev_busy_next = 3;
  BioTracker t;
  Slots s;
  submit_n(d, t, s, 64);
  ASSERT_TRUE(t.wait_for(64));
  EXPECT_EQ(t.doubles.load(), 0);
  EXPECT_EQ(t.errors.load(), 0);
  EXPECT_GE(d.q().hctx_stats(0).busy, 1u);
  ASSERT_TRUE(wait_requests_freed(d.q()));
}

TEST(Dispatch, DriverRequeueRequestsComeBack) {
  StubDriver::Options o;
  o.mode = CompleteMode::irq_thread;
  StubDriver d(o);
  d.requeue_next = 10;
  BioTracker t;
  Slots s;
  submit_n(d, t, s, 50);
  ASSERT_TRUE(t.wait_for(50));
  EXPECT_EQ(t.doubles.load(), 0);
  EXPECT_EQ(t.errors.load(), 0);
  EXPECT_EQ(d.nr_seen(), 50u);
}

TEST(Dispatch, ErrorStatusFromQueueRqEndsTheBio) {
  StubDriver d(StubDriver::Options{});
  DriverOps ops;
  ops.queue_rq = [](HwCtx*, const QueueData&) { return BlkStatus::ioerr; };
  TagSetConfig c;
  c.ops = &ops;
  auto set = TagSet::create(c);
  ASSERT_TRUE(set);
  QueueConfig qc;
  qc.scheduler = "none";
  qc.limits.capacity_sectors = 1 << 20;
  auto q = Queue::create(*set.value(), qc);
  ASSERT_TRUE(q);
  std::vector<uint8_t> b(4096);
  EXPECT_EQ(q.value()->write_sync(b.data(), 0, 4096), BlkStatus::ioerr);
}

constexpr uint64_t kMs = 1000 * 1000;

// A driver that never completes, on a runtime the test steps: the timeout
// timer fires when advance() passes its expiry, and the scan it queues
// runs then too, so no test here sleeps or waits for a worker.
StubDriver::Options never_completing_on(ManualRuntime& rt) {
  StubDriver::Options o;
  o.mode = CompleteMode::never;
  o.runtime = &rt;
  return o;
}

// A request times out exactly when its deadline passes by the queue's
// clock: not a millisecond before, and once it has, the timer's scan ends
// it.
TEST(Timeout, ExpiredRequestsGoToTheDriversHandler) {
  ManualRuntime rt;
  StubDriver d(never_completing_on(rt));
  ASSERT_TRUE(d.q().set_attr("queue/io_timeout", "100"));
  BioTracker t;
  Slots s;
  submit_n(d, t, s, 3, ReqOp::read);
  EXPECT_EQ(rt.advance(99 * kMs), 0u);
  EXPECT_EQ(d.timeouts.load(), 0) << "timed out before the deadline";
  EXPECT_EQ(rt.advance(1 * kMs), 1u) << "the timer fires at the deadline (a timeout under 1 s is not rounded)";
  EXPECT_EQ(t.ended.load(), 3);
  for (auto& x : s) EXPECT_EQ(x->status, BlkStatus::timeout);
  EXPECT_EQ(d.timeouts.load(), 3);
  EXPECT_EQ(t.doubles.load(), 0);
}

// reset_timer starts a fresh timeout period from the handler's time, and
// the scan rearms the timer for it.
TEST(Timeout, ResetTimerKeepsWaiting) {
  ManualRuntime rt;
  StubDriver d(never_completing_on(rt));
  d.timeout_completes = false;
  ASSERT_TRUE(d.q().set_attr("queue/io_timeout", "50"));
  BioTracker t;
  Slots s;
  submit_n(d, t, s, 1, ReqOp::read);
  for (int period = 1; period <= 3; period++) {
    rt.advance(49 * kMs);
    EXPECT_EQ(d.timeouts.load(), period - 1);
    rt.advance(1 * kMs);
    EXPECT_EQ(d.timeouts.load(), period);
    EXPECT_NE(rt.next_timer_ns(), UINT64_MAX) << "the timer was not rearmed for the new period";
  }
  EXPECT_EQ(t.ended.load(), 0);
  d.timeout_completes = true;
  rt.advance(50 * kMs);
  EXPECT_EQ(t.ended.load(), 1);
  EXPECT_EQ(s[0]->status, BlkStatus::timeout);
}

// A timeout of a second or more fires at the deadline rounded up to a
// whole second (round_jiffies_up), no later than 5 s from when it was set
// (BLK_MAX_TIMEOUT): the timer's expiry, read off the manual runtime.
TEST(Timeout, LongTimeoutsFireOnTheNextWholeSecond) {
  ManualRuntime rt(1000 * kMs * 1000 + 300 * kMs);  // 1000.3 s
  StubDriver d(never_completing_on(rt));
  ASSERT_TRUE(d.q().set_attr("queue/io_timeout", "1500"));
  BioTracker t;
  Slots s;
  submit_n(d, t, s, 1, ReqOp::read);
  EXPECT_EQ(rt.next_timer_ns(), 1002 * 1000 * kMs) << "deadline 1001.8 s, rounded up to 1002 s";
  rt.advance(1500 * kMs - 1);
  EXPECT_EQ(d.timeouts.load(), 0);
  rt.advance(1000 * kMs);
  EXPECT_EQ(d.timeouts.load(), 1);
  EXPECT_EQ(t.ended.load(), 1);
}

// update_nr_hw_queues stops the timeout timer while it replaces the hctxs;
// a request started afterwards must still time out, even when the timer
// was armed, before the update, for about the same moment.
TEST(Timeout, StillFiresAfterUpdateNrHwQueues) {
  ManualRuntime rt;
  StubDriver::Options o = never_completing_on(rt);
  o.nr_queues = 2;
  StubDriver d(o);
  ASSERT_TRUE(d.q().set_attr("queue/io_timeout", "1500"));
  BioTracker t;
  Slots s;
  submit_n(d, t, s, 1, ReqOp::read);  // arms the timer for ~1.5 s
  for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
  rt.run_pending();
  ASSERT_EQ(t.ended.load(), 1);
  ASSERT_TRUE(d.set().update_nr_hw_queues(1, 0));
  submit_n(d, t, s, 1, ReqOp::read);  // never completed by the driver
  rt.advance(6000 * kMs);
  for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);  // so teardown drains either way
  rt.run_pending();
  ASSERT_EQ(t.ended.load(), 2) << "the request never timed out";
  EXPECT_EQ(s.back()->status, BlkStatus::timeout);
  EXPECT_EQ(d.timeouts.load(), 1);
}

TEST(Budget, LimitsRequestsInTheDriver) {
  StubDriver::Options o;
  o.mode = CompleteMode::irq_thread;
  o.budgets = true;
  o.budget_limit = 3;
  StubDriver d(o);
  BioTracker t;
  Slots s;
  submit_n(d, t, s, 100);
  ASSERT_TRUE(t.wait_for(100));
  EXPECT_LE(d.max_inflight.load(), 3);
  ASSERT_TRUE(wait_requests_freed(d.q()));
  EXPECT_EQ(d.budget_used.load(), 0);
}

// On a manual runtime nothing but the test runs the queue, so "nothing
// reached the driver" is a fact, not a guess after a sleep.
TEST(Quiesce, NoDispatchUntilUnquiesce) {
  ManualRuntime rt;
  StubDriver::Options o;
  o.runtime = &rt;
  StubDriver d(o);
  d.q().quiesce();
  BioTracker t;
  Slots s;
  submit_n(d, t, s, 4);
  rt.run_pending();
  EXPECT_EQ(d.nr_seen(), 0u);
  d.q().unquiesce();  // runs the hw queues through kblockd
  EXPECT_EQ(d.nr_seen(), 0u) << "unquiesce ran the queue itself, not through kblockd";
  EXPECT_GE(rt.run_pending(), 1u);
  EXPECT_EQ(t.ended.load(), 4);
}

// freeze() returns only when every request is freed; a nowait submitter
// fails while frozen and a normal one sleeps until unfreeze. The freezer
// and the sleeper are real threads; what they wait for is observed
// (usage held, a sleeper counted), never assumed after a sleep.
TEST(Freeze, WaitsForInflightAndBlocksNewSubmitters) {
  StubDriver::Options o;
  o.mode = CompleteMode::never;
  StubDriver d(o);
  auto* qi = static_cast<QueueImpl*>(&d.q());
  BioTracker t;
  Slots s;
  submit_n(d, t, s, 2);
  std::atomic<bool> frozen{false};
  std::thread f([&] {
    d.q().freeze();
    frozen = true;
  });
  ASSERT_TRUE(eventually([&] { return qi->freeze_depth_.load() == 1; }));
  // The driver holds both requests, so their references keep the freeze
  // from completing: frozen cannot be true yet, whatever the timing.
  EXPECT_EQ(qi->usage_sum(), 2);
  EXPECT_FALSE(frozen.load());
  for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
  f.join();
  EXPECT_TRUE(frozen.load());
  auto nw = t.make(ReqOp::read, 0, 4096, kBioNowait);
  d.q().submit_bio(&nw->bio);
  EXPECT_EQ(nw->status, BlkStatus::again);
  std::thread sub([&] { submit_n(d, t, s, 1, ReqOp::read, 1 << 20); });
  ASSERT_TRUE(eventually([&] { return qi->enter_waiters_.load() == 1; })) << "the submitter never slept";
  EXPECT_EQ(d.nr_seen(), 2u);
  d.q().unfreeze();
  sub.join();
  EXPECT_EQ(d.nr_seen(), 3u) << "the woken submitter's bio did not reach the driver";
  for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
  EXPECT_EQ(t.ended.load(), 4);
}

TEST(Teardown, DrainsInflightIo) {
  StubDriver::Options o;
  o.mode = CompleteMode::irq_thread;
  o.depth = 8;
  auto d = std::make_unique<StubDriver>(o);
  BioTracker t;
  Slots s;
  submit_n(*d, t, s, 64);
  d->qptr().reset();  // returns once everything ended
  EXPECT_EQ(t.ended.load(), 64);
  EXPECT_EQ(t.doubles.load(), 0);
}

TEST(UpdateNrHwQueues, WhileIoRunsLosesNothing) {
  StubDriver::Options o;
  o.mode = CompleteMode::irq_thread;
  o.nr_queues = 2;
  StubDriver d(o);
  BioTracker t;
  std::atomic<bool> stop{false};
  std::atomic<int> submitted{0};
  std::vector<std::thread> th;
  std::mutex smu;
  Slots all;
  for (int k = 0; k < 2; k++) {
    th.emplace_back([&, k] {
      Slots mine;
      for (int i = 0; !stop && i < 4000; i++) {
        mine.push_back(t.make(ReqOp::write, (uint64_t(k) << 24) + uint64_t(i % 512) * 4096, 4096));
        d.q().submit_bio(&mine.back()->bio);
        submitted++;
      }
      std::lock_guard<std::mutex> g(smu);
      for (auto& m : mine) all.push_back(std::move(m));
    });
  }
  for (int r = 0; r < 6; r++) {
    EXPECT_TRUE(d.set().update_nr_hw_queues(1 + r % 2, 0));
    // I/O goes in between updates, not only while one runs.
    const int seen = submitted.load();
    EXPECT_TRUE(eventually([&] { return submitted.load() >= seen + 32 || submitted.load() == 8000; }));
  }
  stop = true;
  for (auto& x : th) x.join();
  ASSERT_TRUE(t.wait_for(submitted.load(), 20000));
  EXPECT_EQ(t.doubles.load(), 0);
  EXPECT_EQ(t.errors.load(), 0);
}

TEST(SharedTags, TwoQueuesShareFairly) {
  StubDriver::Options o;
  o.mode = CompleteMode::never;
  o.depth = 16;
  StubDriver d(o);
  auto q2 = d.make_queue();
  BioTracker t;
  Slots s;
  // The first queue becomes active and takes what it may...
  submit_n(d, t, s, 4);
  // ...the second queue becomes active: each may now hold 8 of 16.
  for (int i = 0; i < 4; i++) {
    s.push_back(t.make(ReqOp::write, uint64_t(i) * 8192, 4096));
    q2->submit_bio(&s.back()->bio);
  }
  Slots m;
  std::thread more([&] {
    for (int i = 0; i < 8; i++) {
      m.push_back(t.make(ReqOp::write, (1 << 20) + uint64_t(i) * 8192, 4096));
      d.q().submit_bio(&m.back()->bio);
    }
  });
  // `more` sleeps for a tag once the first queue holds its share: seen as
  // a submitter queued on the tags' wait queue (their lock's first taking).
  auto tag_waits = [&] {
    base::LockStat st;
    EXPECT_TRUE(base::LockStat::parse(*d.q().attr("mq/0/tags_wait_lock_stat"), &st));
    return st.acquired;
  };
  ASSERT_TRUE(eventually([&] { return tag_waits() >= 1; })) << "the first queue took more than its share";
  auto* qi = static_cast<QueueImpl*>(&d.q());
  EXPECT_LE(qi->hctx(0)->nr_active.load(), 8u);  // fair share: ceil(16 / 2)
  EXPECT_EQ(d.nr_seen(), 12u) << "the first queue's 8 and the second's 4";
  EXPECT_TRUE(eventually([&] {
    for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
    return t.ended.load() >= 16;
  }));
  more.join();
  EXPECT_EQ(t.ended.load(), 16);
}

}  // namespace
}  // namespace blkmq::test
