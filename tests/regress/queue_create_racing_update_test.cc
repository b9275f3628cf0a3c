// Regression: Queue::create read the tag set's poll-queue count (for the
// queue's `poll` limit) before it took the set's lock, while
// update_nr_hw_queues on the same set writes the counts under that lock:
// a data race TSan reported in BlktestsSharedSet.PowerCyclesRacingSubmitQueuesChanges
// (blktests block/038: a device powered on while submit_queues changes).
// The read now sits under the lock with the rest of the hctx setup. The
// race is seen by TSan (this binary runs in the TSan tree); every build
// checks that each queue created is usable and that its poll limit is
// one of the two the updates set.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

BlkStatus inline_queue_rq(HwCtx*, const QueueData& bd) {
  start_request(bd.rq);
  end_request(bd.rq, BlkStatus::ok);
  return BlkStatus::ok;
}

TEST(QueueCreateRacingUpdate, CreationReadsTheQueueCountsUnderTheSetsLock) {
  Watchdog wd("queue creation racing update_nr_hw_queues", std::chrono::seconds(60));
  DriverOps ops;
  ops.queue_rq = inline_queue_rq;
  ops.poll = [](HwCtx*, IoCompBatch*) { return 0; };
  TagSetConfig c;
  c.ops = &ops;
  c.nr_queues[0] = 1;
  c.nr_queues[2] = 1;
  c.queue_depth = 8;
  auto set = TagSet::create(c);
  ASSERT_TRUE(set) << set.status().message();
  std::atomic<bool> stop{false};
  std::atomic<unsigned> updates{0};
  std::thread updater([&] {
    // Poll queues on and off, so each update writes the count creation reads.
    for (unsigned i = 0; !stop.load(); i++) {
      EXPECT_TRUE((*set)->update_nr_hw_queues(1, i % 2));
      updates++;
    }
  });
  for (int i = 0; i < 20 || updates.load() < 20; i++) {
    QueueConfig qc;
    qc.limits.capacity_sectors = 2048;
    qc.scheduler = "none";
    auto q = Queue::create(**set, qc);
    ASSERT_TRUE(q) << q.status().message();
    auto poll = (*q)->attr("queue/io_poll");
    ASSERT_TRUE(poll);
    EXPECT_TRUE(*poll == "0" || *poll == "1") << *poll;
    uint8_t buf[512] = {};
    EXPECT_EQ((*q)->read_sync(buf, 0, sizeof buf), BlkStatus::ok);
  }
  stop = true;
  updater.join();
  EXPECT_GE(updates.load(), 20u);
}

// Regression: a new queue's default scheduler (mq-deadline for one hw
// queue) was attached with the queue neither frozen nor quiesced, but the
// queue was already on the set's list, so an update_nr_hw_queues finishing
// meanwhile restarted its requeue work, whose queue run read the elevator
// as init set it (TSan, in BlktestsSharedSet.TwoDevicesPoweredOnAndOffFromTwoThreads
// beside block/038's updates). The kernel's elevator_init_mq freezes the
// queue and cancels its dispatch work; here the attach runs frozen and
// quiesced, as a switch does.
TEST(QueueCreateRacingUpdate, TheDefaultSchedulerIsAttachedWithTheQueueQuiesced) {
  Watchdog wd("default scheduler attach racing update_nr_hw_queues", std::chrono::seconds(60));
  DriverOps ops;
  ops.queue_rq = inline_queue_rq;
  TagSetConfig c;
  c.ops = &ops;
  c.nr_queues[0] = 1;
  c.queue_depth = 8;
  auto set = TagSet::create(c);
  ASSERT_TRUE(set) << set.status().message();
  std::atomic<bool> stop{false};
  std::atomic<unsigned> updates{0};
  std::thread updater([&] {
    while (!stop.load()) {
      EXPECT_TRUE((*set)->update_nr_hw_queues(1, 0));
      updates++;
    }
  });
  std::unique_ptr<Queue> last;
  for (int i = 0; i < 20 || updates.load() < 20; i++) {
    QueueConfig qc;
    qc.limits.capacity_sectors = 2048;  // no scheduler named: the default rule
    auto q = Queue::create(**set, qc);
    ASSERT_TRUE(q) << q.status().message();
    uint8_t buf[512] = {};
    EXPECT_EQ((*q)->read_sync(buf, 0, sizeof buf), BlkStatus::ok);
    last = std::move(*q);
  }
  stop = true;
  updater.join();
  // Read once no update runs: an update detaches the scheduler for its
  // duration, as the kernel's does, and puts it back.
  auto sched = last->attr("queue/scheduler");
  ASSERT_TRUE(sched);
  EXPECT_NE(sched->find("[mq-deadline]"), std::string::npos) << *sched;
}

}  // namespace
}  // namespace blkmq::test
