// Many writers with preflushes, FUA and empty flushes under every
// scheduler, on a device with a volatile write cache (null cache_size),
// with native FUA and with FUA emulated by a post-flush (the flush state
// machine's two paths). Every bio and flush ends once and ok, reads
// return what was written, and nothing is left.
#include <gtest/gtest.h>

#include <string>

#include "blkmq/blkmq.h"
#include "support/verified_io.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

TEST(FlushFua, WritersWithFlushesAndFuaUnderEveryScheduler) {
  Watchdog wd("flush and FUA writers", std::chrono::seconds(240));
  for (const char* sched : {"none", "mq-deadline", "kyber", "bfq"}) {
    for (const char* fua : {"1", "0"}) {
      auto dev = make_null_device({{"memory_backed", "1"}, {"cache_size", "1"}, {"fua", fua}, {"irqmode", "1"},
                                   {"submit_queues", "2"}, {"hw_queue_depth", "16"},
                                   {"attr:queue/scheduler", sched}});
      ASSERT_TRUE(dev) << sched;
      ASSERT_EQ(*dev->queue().attr("queue/fua"), fua);
      std::atomic<bool> stop{false};
      IoTotals t;
      std::vector<std::thread> th;
      for (unsigned i = 0; i < 4; i++)
        th.emplace_back([&, i] { verified_worker(dev->queue(), i, 256, 8, stop, t, true, /*flushes=*/true); });
      // The run's length: time is the point.
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(500 * stress_scale())));
      stop = true;
      for (auto& x : th) x.join();
      SCOPED_TRACE(std::string(sched) + " fua=" + fua);
      EXPECT_GT(t.flushes.load(), 0u);
      EXPECT_GT(t.submitted.load(), 100u);
      t.expect_clean();
      // Idle first: a flush is accounted just after its bio ends.
      expect_queue_idle(dev->queue(), sched);
      auto stat = dev->queue().disk_stat();
      EXPECT_GE(stat.flush_ios, t.flushes.load()) << "the empty flushes, plus the preflushes and post-flushes";
    }
  }
}

}  // namespace
}  // namespace blkmq::test
