// The rq-qos chain: a test-only policy records which hook the core calls,
// in what order, and can hold a bio in throttle, where no tag may be held.
#include <gtest/gtest.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "qos/rq_qos.h"
#include "support/stub_driver.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

// What the recorder saw, and the gate its throttle holds kBioMeta bios at.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> events;
  bool gate_open = true;
  int waiting = 0;  // bios asleep in throttle

  void add(const char* e) {
    std::lock_guard<std::mutex> l(mu);
    events.emplace_back(e);
    cv.notify_all();
  }
  // The events once there are n: a request that a driver completed on
  // another thread (a requeued one, on kblockd) ends its bio, which wakes
  // the submitter, before done runs there, as in the kernel.
  std::vector<std::string> take(size_t n) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return events.size() >= n; });
    return std::exchange(events, {});
  }
  std::vector<std::string> take() {
    std::lock_guard<std::mutex> l(mu);
    return std::exchange(events, {});
  }
};
Recorder g_rec;

void rec_throttle(RqQos*, Bio* bio) {
  g_rec.add("throttle");
  if (!(bio->flags & kBioMeta)) return;
  std::unique_lock<std::mutex> l(g_rec.mu);
  g_rec.waiting++;
  g_rec.cv.notify_all();
  g_rec.cv.wait(l, [] { return g_rec.gate_open; });
  g_rec.waiting--;
}

RqQosType make_recorder() {
  RqQosType t;
  t.name = "test-recorder";
  t.ops.throttle = rec_throttle;
  t.ops.cleanup = [](RqQos*, Bio*) { g_rec.add("cleanup"); };
  t.ops.track = [](RqQos*, Request*, Bio*) { g_rec.add("track"); };
  t.ops.merge = [](RqQos*, Request*, Bio*) { g_rec.add("merge"); };
  t.ops.issue = [](RqQos*, Request*) { g_rec.add("issue"); };
  t.ops.requeue = [](RqQos*, Request*) { g_rec.add("requeue"); };
  t.ops.done = [](RqQos*, Request*) { g_rec.add("done"); };
  t.ops.done_bio = [](RqQos*, Bio*) { g_rec.add("done_bio"); };
  t.ops.queue_depth_changed = [](RqQos*) { g_rec.add("queue_depth_changed"); };
  t.ops.exit = [](RqQos*) { g_rec.add("exit"); };
  return t;
}

const RqQosType* recorder() {
  static const RqQosType t = make_recorder();
  static const bool registered = register_rq_qos(&t).ok();
  EXPECT_TRUE(registered);
  return &t;
}

using Events = std::vector<std::string>;

TEST(RqQos, HooksAreCalledWhereTheKernelCallsThem) {
  Watchdog w("RqQos.HooksAreCalledWhereTheKernelCallsThem", std::chrono::seconds(60));
  recorder();
  StubDriver d(StubDriver::Options{});
  Queue& q = d.q();
  ASSERT_TRUE(rq_qos_add(&q, "test-recorder").ok());
  // wbt is on every queue by default (wbt_enable_default); the test's
  // policy comes after it.
  EXPECT_EQ(rq_qos_list(&q), (std::vector<std::string>{"wbt", "test-recorder"}));
  std::vector<uint8_t> buf(8192, 7);
  ASSERT_EQ(q.write_sync(buf.data(), 0, 4096), BlkStatus::ok);
  // done_bio when the bio ends (bio_endio), done when the request is freed.
  EXPECT_EQ(g_rec.take(5), (Events{"throttle", "track", "issue", "done_bio", "done"}));

  BioTracker t;
  auto a = t.make(ReqOp::write, 1 << 20, 4096);
  auto b = t.make(ReqOp::write, (1 << 20) + 4096, 4096);
  {
    Plug plug;
    q.submit_bio(&a->bio);
    q.submit_bio(&b->bio);  // a back merge into a's plugged request
  }
  ASSERT_TRUE(t.wait_for(2));
  EXPECT_EQ(g_rec.take(7), (Events{"throttle", "track", "merge", "issue", "done_bio", "done_bio", "done"}));

  d.requeue_next.store(1);
  ASSERT_EQ(q.read_sync(buf.data(), 0, 4096), BlkStatus::ok);
  EXPECT_EQ(g_rec.take(7), (Events{"throttle", "track", "issue", "requeue", "issue", "done_bio", "done"}));

  rq_qos_queue_depth_changed(&q);
  EXPECT_EQ(g_rec.take(), (Events{"queue_depth_changed"}));
  EXPECT_EQ(rq_qos_add(&q, "test-recorder").code(), EBUSY);
  EXPECT_EQ(rq_qos_add(&q, "no-such-policy").code(), ENOENT);
  EXPECT_TRUE(rq_qos_del(&q, "test-recorder").ok());
  EXPECT_EQ(g_rec.take(), (Events{"exit"}));
  EXPECT_EQ(rq_qos_del(&q, "test-recorder").code(), ENOENT);
  ASSERT_EQ(q.write_sync(buf.data(), 0, 4096), BlkStatus::ok);
  EXPECT_TRUE(g_rec.take().empty()) << "no hook once the policy is gone";
  EXPECT_EQ(register_rq_qos(recorder()).code(), EEXIST);
}

TEST(RqQos, TeardownCallsExit) {
  recorder();
  {
    StubDriver d(StubDriver::Options{});
    ASSERT_TRUE(rq_qos_add(&d.q(), "test-recorder").ok());
  }
  EXPECT_EQ(g_rec.take(), (Events{"exit"}));
}

// A bio asleep in throttle holds no tag: with one tag, another bio gets it
// meanwhile; once let go, the sleeper waits for that tag like any other.
TEST(RqQos, ThrottleSleepsWithNoTagHeld) {
  Watchdog w("RqQos.ThrottleSleepsWithNoTagHeld", std::chrono::seconds(60));
  recorder();
  StubDriver::Options o;
  o.depth = 1;
  o.mode = CompleteMode::never;
  StubDriver d(o);
  Queue& q = d.q();
  ASSERT_TRUE(rq_qos_add(&q, "test-recorder").ok());
  {
    std::lock_guard<std::mutex> l(g_rec.mu);
    g_rec.gate_open = false;
  }
  BioTracker t;
  auto held = t.make(ReqOp::write, 0, 4096, kBioMeta);
  auto other = t.make(ReqOp::write, 1 << 20, 4096);
  std::thread sleeper([&] { q.submit_bio(&held->bio); });
  {
    std::unique_lock<std::mutex> l(g_rec.mu);
    g_rec.cv.wait(l, [] { return g_rec.waiting == 1; });
  }
  EXPECT_EQ(*q.attr("mq/0/tags_busy"), "0");
  q.submit_bio(&other->bio);
  ASSERT_EQ(d.nr_seen(), 1u) << "the only tag was free while a bio slept in throttle";
  {
    std::lock_guard<std::mutex> l(g_rec.mu);
    g_rec.gate_open = true;
  }
  g_rec.cv.notify_all();
  for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
  sleeper.join();
  // The sleeper took the tag the other bio gave back (it may reach the
  // driver only after submit_bio returned, through a queue run).
  while (d.nr_seen() < 2) std::this_thread::yield();
  for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
  ASSERT_TRUE(t.wait_for(2));
  EXPECT_EQ(t.doubles.load(), 0);
  EXPECT_TRUE(rq_qos_del(&q, "test-recorder").ok());
  g_rec.take();
}

}  // namespace
}  // namespace blkmq::test
