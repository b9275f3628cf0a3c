// The scenario harness can fail: its idle check sees a tag still held, and
// the verified workers see a wrong block. Otherwise a scenario's "nothing
// left, nothing lost" would pass by construction.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "blkmq/blkmq.h"
#include "support/verified_io.h"

namespace blkmq::test {
namespace {

TEST(Harness, IdleCheckSeesAHeldDriverTag) {
  auto dev = make_null_device({{"irqmode", "1"}, {"attr:queue/scheduler", "none"}});
  ASSERT_TRUE(dev);
  Request* rq = dev->queue().alloc_request(ReqOp::read);
  ASSERT_NE(rq, nullptr);
  EXPECT_NONFATAL_FAILURE(expect_queue_idle(dev->queue(), "one request held"), "tags_busy=1");
  dev->queue().free_request(rq);
  expect_queue_idle(dev->queue(), "after the free");
}

TEST(Harness, IdleCheckSeesAHeldSchedulerTag) {
  auto dev = make_null_device({{"irqmode", "1"}, {"attr:queue/scheduler", "mq-deadline"}});
  ASSERT_TRUE(dev);
  Request* rq = dev->queue().alloc_request(ReqOp::read);
  ASSERT_NE(rq, nullptr);
  EXPECT_NONFATAL_FAILURE(expect_queue_idle(dev->queue(), "one request held"), "sched_tags_busy=1");
  dev->queue().free_request(rq);
}

// A device that drops writes (null without memory_backed reads zeroes)
// fails verification: the workers compare what they read.
TEST(Harness, VerifiedWorkersSeeLostWrites) {
  auto dev = make_null_device({{"irqmode", "1"}});
  ASSERT_TRUE(dev);
  IoTotals t;
  run_verified_workers(*dev, 1, 0.2, t, true);
  EXPECT_GT(t.mismatches.load(), 0u);
  EXPECT_NONFATAL_FAILURE(t.expect_clean(), "mismatches");
}

}  // namespace
}  // namespace blkmq::test
