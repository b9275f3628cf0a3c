// Regression: a queue being destroyed drained and quiesced itself and
// cancelled its requeue work, and only then waited for its tag set's update
// lock (to exit its scheduler). An update_nr_hw_queues holding that lock
// meanwhile unquiesced the dying queue (undoing the drain's quiesce: the
// teardown had reset the depth the update owned) and restarted its requeue
// and run work, which then ran the scheduler's has_work while the teardown
// freed the scheduler and the queue (TSan, in
// QueueCreateRacingUpdate.CreationReadsTheQueueCountsUnderTheSetsLock:
// requeue_work_fn against the queue's delete). The teardown now holds the
// update lock shared from its start until the queue is off the set's list.
// This test puts the teardown in that window every time: the update's
// init_hctx holds it while the queue is destroyed. The set runs on a
// manual runtime, so work restarted on the freed queue waits in its queue
// until the test runs it, and then runs on freed memory every time, which
// ASan reports (this binary runs in both sanitizer trees).
#include <gtest/gtest.h>
#include <sys/syscall.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "blkmq/blkmq.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

using namespace std::chrono_literals;

std::atomic<bool> g_hold{false}, g_holding{false};
std::atomic<pid_t> g_teardown_tid{0};

BlkStatus inline_queue_rq(HwCtx*, const QueueData& bd) {
  start_request(bd.rq);
  end_request(bd.rq, BlkStatus::ok);
  return BlkStatus::ok;
}

// Called by the update (with the set's update lock held) for each hctx it
// builds; the first one, when armed, holds the update there until the
// teardown sleeps (behind the lock), or 5 s: a bounded stay, since a
// teardown that does not wait for the lock never sleeps there.
int holding_init_hctx(HwCtx*, void*, unsigned) {
  if (g_hold.exchange(false)) {
    g_holding = true;
    eventually([] { return g_teardown_tid.load() && asleep_in(g_teardown_tid.load(), SYS_futex); }, 5000);
  }
  return 0;
}

TEST(QueueTeardownRacingUpdate, ATeardownDuringAnUpdateWaitsForIt) {
  Watchdog wd("teardown racing update_nr_hw_queues", std::chrono::seconds(30));
  ManualRuntime rt;
  DriverOps ops;
  ops.queue_rq = inline_queue_rq;
  ops.init_hctx = holding_init_hctx;
  TagSetConfig c;
  c.ops = &ops;
  c.nr_queues[0] = 1;
  c.queue_depth = 8;
  c.runtime = &rt;
  auto set = TagSet::create(c);
  ASSERT_TRUE(set) << set.status().message();
  QueueConfig qc;
  qc.limits.capacity_sectors = 2048;
  qc.scheduler = "mq-deadline";  // the teardown waits for the update lock to exit it
  auto keep = Queue::create(**set, qc);
  auto dying = Queue::create(**set, qc);
  ASSERT_TRUE(keep && dying);
  g_hold = true;
  g_teardown_tid = this_tid();
  std::thread updater([&] { EXPECT_TRUE((*set)->update_nr_hw_queues(1, 0)); });
  while (!g_holding.load()) std::this_thread::yield();
  dying->reset();  // waits for the update to end, then tears down alone
  updater.join();
  // Whatever the update left queued or armed runs now: on the freed queue,
  // if it restarted that queue's work.
  rt.advance(10ull * 1000 * 1000 * 1000);
  uint8_t buf[512] = {};
  EXPECT_EQ((*keep)->read_sync(buf, 0, sizeof buf), BlkStatus::ok);
  keep->reset();
}

}  // namespace
}  // namespace blkmq::test
