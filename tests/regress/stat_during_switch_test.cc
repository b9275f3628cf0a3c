// Regression: reading `stat` or `inflight` while the scheduler switched
// walked the tags the switch was replacing (count_inflight read elevator_
// and the scheduler tags without holding the queue; TSan caught it when
// the sysfs tree refreshed a device during a switch). The walk now holds a
// usage reference, as the kernel's tag iterator holds q_usage_counter.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "blkmq/blkmq.h"
#include "support/verified_io.h"

namespace blkmq::test {
namespace {

TEST(StatDuringSwitch, ReadingStatAndInflightWhileTheSchedulerSwitches) {
  auto dev = make_null_device({{"irqmode", "1"}, {"size", "64"}, {"memory_backed", "1"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::thread reader([&] {
    while (!stop.load()) {
      EXPECT_TRUE(q.attr("stat"));
      EXPECT_TRUE(q.attr("inflight"));
      reads++;
    }
  });
  const char* scheds[] = {"mq-deadline", "kyber", "bfq", "none"};
  unsigned i = 0;
  IoTotals t;
  run_verified_workers(*dev, 2, 0.8, t, true, [&] { EXPECT_TRUE(q.set_attr("queue/scheduler", scheds[i++ % 4])); });
  stop = true;
  reader.join();
  t.expect_clean();
  EXPECT_GT(reads.load(), 0u);
  EXPECT_GT(i, 4u);
  expect_queue_idle(q, "after switching under stat readers");
}

}  // namespace
}  // namespace blkmq::test
