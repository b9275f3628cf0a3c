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

}  // namespace
}  // namespace blkmq::test
