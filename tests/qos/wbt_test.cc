// wbt (src/qos/wbt.cc): the scale steps and windows on a ManualRuntime's
// clock, which writes wait and which never do, queue/wbt_lat_usec, the
// default per scheduler, and one threaded test of waiting writes while the
// target changes and the queue goes away.
#include "qos/wbt.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "qos/rq_qos.h"
#include "support/stub_driver.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

constexpr uint64_t kMs = 1000 * 1000;

// A stub device on a manual clock whose driver holds every request until
// the test ends it.
struct Dev {
  explicit Dev(StubDriver::Options o = {}) : d(with_runtime(std::move(o), &rt)) {}
  static StubDriver::Options with_runtime(StubDriver::Options o, Runtime* rt) {
    o.runtime = rt;
    o.mode = CompleteMode::never;
    return o;
  }
  Queue& q() { return d.q(); }
  WbtInfo info() {
    WbtInfo i;
    EXPECT_TRUE(wbt_info(&d.q(), &i));
    return i;
  }
  Bio* make(ReqOp op, uint32_t flags) {
    slots.push_back(t.make(op, (slots.size() % 4096) * 4096, 4096, flags));
    return &slots.back()->bio;
  }
  void submit(ReqOp op, uint32_t flags = 0) { d.q().submit_bio(make(op, flags)); }
  void end_held() {
    for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
    rt.run_pending();
  }
  std::string attr(const char* name) { return *d.q().attr(name); }

  ManualRuntime rt;
  StubDriver d;
  BioTracker t;
  std::vector<std::unique_ptr<BioTracker::Slot>> slots;
};

// One window from `start`: three rounds of a writeback write and a read
// that each take `lat`, then the clock to the window's end, where its timer
// decides. Returns when the next window starts.
uint64_t run_window(Dev& v, uint64_t start, uint64_t lat) {
  for (int i = 0; i < 3; i++) {
    v.submit(ReqOp::write, kBioWriteback);
    v.submit(ReqOp::read);
    v.rt.advance(lat);
    v.end_held();
  }
  const uint64_t end = start + v.info().curr_win_nsec;
  v.rt.advance(end - v.rt.now_ns());
  return end;
}

// The kernel's window: (100 ms << 4) / int_sqrt((step + 1) << 8), its
// fixed point for 100 ms / sqrt(step + 1).
uint64_t kernel_window(int step) {
  const uint64_t x = uint64_t(step + 1) << 8;
  uint64_t r = 0;
  while ((r + 1) * (r + 1) <= x) r++;
  return (100 * kMs << 4) / r;
}

TEST(Wbt, DefaultsOnANonRotationalQueue) {
  Dev v;
  EXPECT_EQ(v.attr("queue/wbt_lat_usec"), "2000");
  const WbtInfo i = v.info();
  EXPECT_EQ(i.enable_state, 1) << "on by default";
  EXPECT_EQ(i.max_depth, 16u);
  EXPECT_EQ(i.wb_normal, 8u);
  EXPECT_EQ(i.wb_background, 4u) << "background writeback gets less than normal";
  EXPECT_EQ(i.curr_win_nsec, 100 * kMs);
  StubDriver::Options o;
  o.rotational = true;
  Dev rot(o);
  EXPECT_EQ(rot.attr("queue/wbt_lat_usec"), "75000");
}

// The figure: reads take 5 ms against a 2 ms target, so each window
// scales the depth down, 16 -> 8 -> 4 -> 2 -> 1, and shortens the next
// window. Then reads at 1 ms scale it back up, past the default.
TEST(Wbt, SlowReadsScaleDownThenFastReadsScaleUp) {
  Watchdog w("Wbt.SlowReadsScaleDownThenFastReadsScaleUp", std::chrono::seconds(60));
  Dev v;
  const unsigned depth[] = {16, 8, 4, 2, 1};
  const unsigned normal[] = {8, 4, 2, 2, 1};
  const unsigned background[] = {4, 2, 1, 1, 1};
  const double ideal_ms[] = {100, 70.7, 57.7, 50, 44.7};
  uint64_t start = v.rt.now_ns();
  for (int step = 0; step <= 4; step++) {
    const WbtInfo i = v.info();
    EXPECT_EQ(i.scale_step, step);
    EXPECT_EQ(i.max_depth, depth[step]) << "step " << step;
    EXPECT_EQ(i.wb_normal, normal[step]) << "step " << step;
    EXPECT_EQ(i.wb_background, background[step]) << "step " << step;
    if (step > 0) {
      EXPECT_EQ(i.curr_win_nsec, kernel_window(step)) << "step " << step;
      // 72.7, 59.3, 50.0 and 45.7 ms: the fixed point rounds the square
      // root down, so the kernel's windows are a little longer.
      EXPECT_NEAR(double(i.curr_win_nsec) / kMs, ideal_ms[step], ideal_ms[step] * 0.03) << "step " << step;
    }
    if (step < 4) start = run_window(v, start, 5 * kMs);
  }
  EXPECT_EQ(v.info().curr_win_nsec, 45714285u);
  start = run_window(v, start, 5 * kMs);
  EXPECT_EQ(v.info().scale_step, 4) << "depth 1 is the floor";
  for (int step = 3; step >= -1; step--) {
    start = run_window(v, start, 1 * kMs);
    EXPECT_EQ(v.info().scale_step, step);
  }
  EXPECT_EQ(v.info().max_depth, 31u) << "reads are fine: writes get more than the default";
  EXPECT_EQ(v.info().curr_win_nsec, 100 * kMs) << "a negative step keeps the default window";
  EXPECT_EQ(v.t.ended.load(), int(v.slots.size()));
}

// A read that never completes within the window is a miss by itself (the
// kernel's sync_issue check): a flooded device may finish no read at all.
TEST(Wbt, AReadStuckPastTheTargetScalesDown) {
  Dev v;
  const uint64_t start = v.rt.now_ns();
  v.submit(ReqOp::write, kBioWriteback);  // opens the window
  v.submit(ReqOp::read);
  std::vector<Request*> held = v.d.take_held();
  ASSERT_EQ(held.size(), 2u);
  end_request(held[0], BlkStatus::ok);  // the write; the read stays
  v.rt.advance(start + 100 * kMs - v.rt.now_ns());
  EXPECT_EQ(v.info().scale_step, 1) << "no read completed, one waited 100 ms against 2 ms";
  end_request(held[1], BlkStatus::ok);
  v.rt.run_pending();
  EXPECT_EQ(v.t.ended.load(), 2);
}

// Writes alone (no read to judge by) let the step go negative, up to 3/4 of
// the queue depth; windows that see nothing at all bring it back to the
// middle, one step per five windows, and then the window closes.
TEST(Wbt, UnknownWindowsDriftBackToTheMiddle) {
  Dev v;
  uint64_t start = v.rt.now_ns();
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < 3; i++) {
      v.submit(ReqOp::write, kBioWriteback);
      v.rt.advance(kMs);
      v.end_held();
    }
    start += v.info().curr_win_nsec;
    v.rt.advance(start - v.rt.now_ns());
  }
  WbtInfo i = v.info();
  EXPECT_TRUE(i.window_open);
  EXPECT_EQ(i.scale_step, -2);
  EXPECT_EQ(i.max_depth, 48u) << "3/4 of the 64 requests";
  for (int k = 0; k < 4; k++) v.rt.advance(100 * kMs);
  EXPECT_EQ(v.info().unknown_cnt, 4u);
  EXPECT_EQ(v.info().scale_step, -2);
  v.rt.advance(100 * kMs);
  EXPECT_EQ(v.info().scale_step, -1);
  for (int k = 0; k < 5; k++) v.rt.advance(100 * kMs);
  EXPECT_EQ(v.info().scale_step, 0);
  EXPECT_EQ(v.info().max_depth, 16u);
  EXPECT_FALSE(v.info().window_open) << "nothing in flight at the middle step: the window closes";
  v.rt.advance(1000 * kMs);
  EXPECT_EQ(v.info().unknown_cnt, 0u) << "no window ran since";
}

// At depth 1 with one writeback write in flight: reads and direct writes
// go straight on; another writeback write sleeps until that one ends.
TEST(Wbt, ReadsAndDirectWritesNeverWait) {
  Watchdog w("Wbt.ReadsAndDirectWritesNeverWait", std::chrono::seconds(60));
  Dev v;
  uint64_t start = v.rt.now_ns();
  for (int k = 0; k < 4; k++) start = run_window(v, start, 5 * kMs);
  ASSERT_EQ(v.info().max_depth, 1u);
  v.submit(ReqOp::write, kBioWriteback);
  ASSERT_EQ(v.info().inflight[0], 1);
  const size_t seen = v.d.nr_seen();
  for (int k = 0; k < 8; k++) {
    v.submit(ReqOp::read);
    v.submit(ReqOp::write, kBioSync);
    v.submit(ReqOp::write);
  }
  EXPECT_EQ(v.d.nr_seen(), seen + 24) << "none of them waited";
  Bio* late = v.make(ReqOp::write, kBioWriteback);
  std::thread writer([&] { v.q().submit_bio(late); });
  ASSERT_TRUE(eventually([&] { return v.info().waiting == 1; }));
  EXPECT_EQ(v.d.nr_seen(), seen + 24);
  v.end_held();  // the write in flight ends: the sleeper takes its slot
  writer.join();
  EXPECT_EQ(v.d.nr_seen(), seen + 25);
  v.end_held();
  EXPECT_EQ(v.info().inflight[0], 0);
  EXPECT_EQ(v.t.ended.load(), int(v.slots.size()));
}

// Background writeback stops at wb_background (4); normal writeback goes
// to wb_normal (8) once no read was seen for 100 ms.
TEST(Wbt, BackgroundWritesGetASmallerLimit) {
  Watchdog w("Wbt.BackgroundWritesGetASmallerLimit", std::chrono::seconds(60));
  Dev v;
  v.rt.advance(200 * kMs);  // no recent read: normal writeback is not held to background
  for (int k = 0; k < 8; k++) v.submit(ReqOp::write, kBioWriteback);
  EXPECT_EQ(v.d.nr_seen(), 8u);
  EXPECT_EQ(v.info().waiting, 0u);
  v.end_held();
  for (int k = 0; k < 4; k++) v.submit(ReqOp::write, kBioWriteback | kBioBackground);
  EXPECT_EQ(v.d.nr_seen(), 12u);
  Bio* fifth = v.make(ReqOp::write, kBioWriteback | kBioBackground);
  std::thread writer([&] { v.q().submit_bio(fifth); });
  ASSERT_TRUE(eventually([&] { return v.info().waiting == 1; }));
  EXPECT_EQ(v.d.nr_seen(), 12u) << "the fifth background write is over its limit";
  EXPECT_EQ(v.attr("mq/0/tags_busy"), "4") << "it sleeps holding no tag";
  v.end_held();
  writer.join();
  EXPECT_EQ(v.d.nr_seen(), 13u);
  v.end_held();
  EXPECT_EQ(v.t.ended.load(), 13);
}

TEST(Wbt, ZeroTurnsItOffAndReleasesTheWaitersMinusOneRestores) {
  Watchdog w("Wbt.ZeroTurnsItOffAndReleasesTheWaitersMinusOneRestores", std::chrono::seconds(60));
  Dev v;
  for (int k = 0; k < 4; k++) v.submit(ReqOp::write, kBioWriteback | kBioBackground);
  std::vector<std::thread> writers;
  for (int k = 0; k < 3; k++) {
    Bio* b = v.make(ReqOp::write, kBioWriteback | kBioBackground);
    writers.emplace_back([&v, b] { v.q().submit_bio(b); });
  }
  ASSERT_TRUE(eventually([&] { return v.info().waiting == 3; }));
  ASSERT_TRUE(v.q().set_attr("queue/wbt_lat_usec", "0").ok());
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(v.d.nr_seen(), 7u) << "turning wbt off let every sleeper go";
  EXPECT_EQ(v.attr("queue/wbt_lat_usec"), "0");
  EXPECT_EQ(v.info().enable_state, 4);
  for (int k = 0; k < 16; k++) v.submit(ReqOp::write, kBioWriteback);
  EXPECT_EQ(v.d.nr_seen(), 23u) << "off: nothing waits";
  v.end_held();
  EXPECT_EQ(v.info().inflight[0], 0) << "the slots taken before and while it was off all came back";
  ASSERT_TRUE(v.q().set_attr("queue/wbt_lat_usec", "-1").ok());
  EXPECT_EQ(v.attr("queue/wbt_lat_usec"), "2000");
  EXPECT_EQ(v.info().enable_state, 2);
  ASSERT_TRUE(v.q().set_attr("queue/wbt_lat_usec", "5000\n").ok());
  EXPECT_EQ(v.attr("queue/wbt_lat_usec"), "5000");
  EXPECT_EQ(v.t.ended.load(), 23);
}

TEST(Wbt, BadValuesAreRefusedAndChangeNothing) {
  Dev v;
  ASSERT_TRUE(v.q().set_attr("queue/wbt_lat_usec", "3000").ok());
  for (const char* bad : {"-2", "abc", "1.5", "", "99999999999999999999", "1000us"}) {
    Status st = v.q().set_attr("queue/wbt_lat_usec", bad);
    EXPECT_EQ(st.code(), EINVAL) << "'" << bad << "'";
    EXPECT_EQ(v.attr("queue/wbt_lat_usec"), "3000") << "'" << bad << "'";
  }
}

// bfq does its own write throttling: the kernel's wbt stays off by default
// while bfq is attached, and comes back with another scheduler. A target
// set by hand stays whatever the scheduler.
TEST(Wbt, BfqDisablesTheDefault) {
  StubDriver::Options o;
  o.scheduler = "bfq";
  Dev v(o);
  EXPECT_EQ(v.attr("queue/wbt_lat_usec"), "0");
  EXPECT_FALSE(wbt_info(&v.q(), nullptr)) << "never set up, as the kernel's wbt_enable_default skips it";
  ASSERT_TRUE(v.q().set_attr("queue/scheduler", "mq-deadline").ok());
  EXPECT_EQ(v.attr("queue/wbt_lat_usec"), "2000");
  ASSERT_TRUE(v.q().set_attr("queue/scheduler", "bfq").ok());
  EXPECT_EQ(v.attr("queue/wbt_lat_usec"), "0");
  EXPECT_EQ(v.info().enable_state, 3);
  ASSERT_TRUE(v.q().set_attr("queue/scheduler", "none").ok());
  EXPECT_EQ(v.attr("queue/wbt_lat_usec"), "2000");
  ASSERT_TRUE(v.q().set_attr("queue/wbt_lat_usec", "4000").ok());
  ASSERT_TRUE(v.q().set_attr("queue/scheduler", "bfq").ok());
  EXPECT_EQ(v.attr("queue/wbt_lat_usec"), "4000") << "set by hand: bfq leaves it on";
  EXPECT_EQ(rq_qos_list(&v.q()), (std::vector<std::string>{"wbt"}));
}

// Real threads: writers sleep at the background limit while another thread
// rewrites the target, a completer ends requests, and the queue is marked
// dead and destroyed. Every bio ends exactly once, no tag stays taken.
TEST(Wbt, WaitingWritesSurviveTargetChangesAndTeardown) {
  Watchdog w("Wbt.WaitingWritesSurviveTargetChangesAndTeardown", std::chrono::seconds(120));
  StubDriver::Options o;
  o.mode = CompleteMode::never;
  o.depth = 32;
  auto d = std::make_unique<StubDriver>(o);
  Queue& q = d->q();
  BioTracker t;
  constexpr int kWriters = 4, kPerWriter = 24;
  std::vector<std::unique_ptr<BioTracker::Slot>> slots;
  for (int k = 0; k < kWriters * kPerWriter; k++)
    slots.push_back(t.make(ReqOp::write, uint64_t(k) * 8192, 4096, kBioWriteback | kBioBackground));
  std::vector<std::thread> writers;
  for (int wr = 0; wr < kWriters; wr++)
    writers.emplace_back([&, wr] {
      for (int k = 0; k < kPerWriter; k++) q.submit_bio(&slots[size_t(wr * kPerWriter + k)]->bio);
    });
  WbtInfo i;
  ASSERT_TRUE(eventually([&] { return wbt_info(&q, &i) && i.waiting == kWriters; }));
  EXPECT_EQ(d->nr_seen(), 4u) << "the background limit";
  std::atomic<bool> stop{false};
  std::thread completer([&] {
    while (!stop.load()) {
      for (Request* rq : d->take_held()) end_request(rq, BlkStatus::ok);
      std::this_thread::yield();
    }
  });
  for (const char* v : {"3000", "0", "-1", "500", "0", "100000", "-1"}) ASSERT_TRUE(q.set_attr("queue/wbt_lat_usec", v).ok());
  ASSERT_TRUE(eventually([&] { return t.ended.load() >= kPerWriter; }));
  q.mark_dead();  // writes still asleep end with an error; none is lost
  for (std::thread& th : writers) th.join();
  ASSERT_TRUE(t.wait_for(kWriters * kPerWriter));
  stop.store(true);
  completer.join();
  EXPECT_EQ(t.doubles.load(), 0);
  EXPECT_TRUE(wait_requests_freed(q));
  EXPECT_EQ(*q.attr("mq/0/tags_busy"), "0");
  ASSERT_TRUE(wbt_info(&q, &i));
  EXPECT_EQ(i.inflight[0], 0);
  EXPECT_EQ(i.waiting, 0u);
  d->qptr().reset();
  EXPECT_EQ(t.ended.load(), kWriters * kPerWriter);
}

}  // namespace
}  // namespace blkmq::test
