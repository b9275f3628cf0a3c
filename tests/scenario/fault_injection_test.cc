// Requeue and timeout injection with verified I/O under every scheduler
// (blktests block/015, /016, /017), and timeouts racing with the late
// completion of the same request. Each bio ends exactly once; afterwards
// no driver or scheduler tag, kyber token or in-flight count is left.
#include <gtest/gtest.h>

#include <string>

#include "blkmq/blkmq.h"
#include "support/verified_io.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

constexpr const char* kScheds[] = {"none", "mq-deadline", "kyber", "bfq"};

// block/015: 10 % of the requests are requeued by the driver.
TEST(FaultInjection, TenPercentRequeueUnderEveryScheduler) {
  Watchdog wd("requeue injection", std::chrono::seconds(240));
  for (const char* sched : kScheds) {
    auto dev = make_null_device({{"memory_backed", "1"}, {"irqmode", "1"}, {"submit_queues", "2"},
                                 {"requeue", "1,10,0,-1"}, {"hw_queue_depth", "16"},
                                 {"attr:queue/scheduler", sched}});
    ASSERT_TRUE(dev) << sched;
    IoTotals t;
    run_verified_workers(*dev, 4, 1.0 * stress_scale(), t, true);
    EXPECT_GT(t.submitted.load(), 200u) << sched;
    t.expect_clean();
    expect_queue_idle(dev->queue(), sched);
  }
}

// block/016, /017: the driver drops 5 % and then 50 % of the requests,
// which the timeout handler ends with timeout; the rest end ok.
TEST(FaultInjection, TimeoutInjectionUnderEveryScheduler) {
  Watchdog wd("timeout injection", std::chrono::seconds(240));
  for (const char* sched : kScheds) {
    for (const char* percent : {"5", "50"}) {
      auto dev = make_null_device({{"irqmode", "2"}, {"completion_nsec", "20000"},
                                   {"timeout_inject", std::string("1,") + percent + ",0,-1"},
                                   {"attr:queue/io_timeout", "30"}, {"attr:queue/scheduler", sched}});
      ASSERT_TRUE(dev) << sched;
      IoTotals t;
      run_verified_workers(*dev, 2, 0.6 * stress_scale(), t, false);
      SCOPED_TRACE(std::string(sched) + " at " + percent + " %");
      EXPECT_GT(t.timeouts.load(), 0u);
      EXPECT_GT(t.ended.load(), t.timeouts.load()) << "only timeouts: nothing completed";
      t.expect_clean(/*timeouts_ok=*/true);
      expect_queue_idle(dev->queue(), sched);
    }
  }
}

// The driver's completion lands when the request's timer fires (both at
// 20 ms), so the timeout handler and the completion race for the same
// request over and over: each bio still ends once, as ok (the completion
// won) or timeout (the handler did), and both outcomes occur.
TEST(FaultInjection, TimeoutRacingALateCompletionEndsTheRequestOnce) {
  Watchdog wd("timeout racing completion", std::chrono::seconds(180));
  for (const char* sched : kScheds) {
    auto dev = make_null_device({{"irqmode", "2"}, {"completion_nsec", "20000000"}, {"hw_queue_depth", "64"},
                                 {"attr:queue/io_timeout", "20"}, {"attr:queue/scheduler", sched}});
    ASSERT_TRUE(dev) << sched;
    IoTotals t;
    run_verified_workers(*dev, 2, 0.8 * stress_scale(), t, false);
    SCOPED_TRACE(sched);
    EXPECT_GT(t.timeouts.load(), 0u);
    EXPECT_GT(t.ended.load(), t.timeouts.load()) << "no completion won the race";
    t.expect_clean(/*timeouts_ok=*/true);
    expect_queue_idle(dev->queue(), sched);
  }
}

}  // namespace
}  // namespace blkmq::test
