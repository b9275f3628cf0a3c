// update_nr_hw_queues under verified I/O with a scheduler attached, racing
// scheduler switches, and with init_hctx failing part-way (blktests
// block/029, /030, /040). After each, every tag is free and the scheduler
// holds nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "blkmq/blkmq.h"
#include "support/verified_io.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

constexpr const char* kScheds[] = {"none", "mq-deadline", "kyber", "bfq"};
// 1 <-> 2 <-> 4: the core caps the count at the CPUs (as the kernel's
// null_blk does), so on a 2-CPU machine 4 exercises the cap as well.
constexpr unsigned kCounts[] = {1, 2, 4, 2};

ParamMap null_params(const char* sched) {
  return {{"memory_backed", "1"}, {"irqmode", "1"}, {"submit_queues", "2"}, {"poll_queues", "0"}, {"hw_queue_depth", "16"},
          {"attr:queue/scheduler", sched}};
}

std::string current_scheduler(Queue& q) {
  auto s = q.attr("queue/scheduler");
  if (!s) return "?";
  const size_t a = s->find('['), b = s->find(']');
  return a == std::string::npos ? "?" : s->substr(a + 1, b - a - 1);
}

// block/029 with a scheduler: the count changes every 10 ms while three
// workers verify their blocks; the scheduler is still attached afterwards.
TEST(NrHwQueues, UpdateUnderEverySchedulerLosesNothing) {
  Watchdog wd("update_nr_hw_queues under every scheduler", std::chrono::seconds(240));
  for (const char* sched : kScheds) {
    auto dev = make_null_device(null_params(sched));
    ASSERT_TRUE(dev) << sched;
    IoTotals t;
    unsigned flips = 0;
    run_verified_workers(*dev, 3, 1.0 * stress_scale(), t, true, [&] {
      Status s = dev->queue().tag_set().update_nr_hw_queues(kCounts[flips++ % 4], 0);
      EXPECT_TRUE(s) << sched << ": " << s.message();
    });
    EXPECT_GT(flips, 5u) << sched;
    EXPECT_GT(t.submitted.load(), 100u) << sched;
    t.expect_clean();
    EXPECT_EQ(current_scheduler(dev->queue()), sched);
    expect_queue_idle(dev->queue(), sched);
  }
}

// block/040: a second thread switches the scheduler while the count
// changes and I/O runs. Every call succeeds, nothing is lost, and the
// queue ends on a scheduler that one of them set.
TEST(NrHwQueues, UpdateRacingSchedulerSwitches) {
  Watchdog wd("update_nr_hw_queues racing switches", std::chrono::seconds(180));
  auto dev = make_null_device(null_params("mq-deadline"));
  ASSERT_TRUE(dev);
  std::atomic<bool> stop{false};
  std::atomic<unsigned> switches{0}, switch_errors{0};
  std::thread switcher([&] {
    for (unsigned i = 0; !stop.load(); i++) {
      if (!dev->queue().set_attr("queue/scheduler", kScheds[i % 4])) switch_errors++;
      switches++;
      // The switches' pace against the updates: time is the point.
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  IoTotals t;
  unsigned flips = 0;
  run_verified_workers(*dev, 2, 1.5 * stress_scale(), t, true, [&] {
    Status s = dev->queue().tag_set().update_nr_hw_queues(kCounts[flips++ % 4], 0);
    EXPECT_TRUE(s) << s.message();
  });
  stop = true;
  switcher.join();
  EXPECT_GT(switches.load(), 5u);
  EXPECT_EQ(switch_errors.load(), 0u);
  t.expect_clean();
  const std::string now = current_scheduler(dev->queue());
  EXPECT_TRUE(now == "none" || now == "mq-deadline" || now == "kyber" || now == "bfq") << now;
  expect_queue_idle(dev->queue(), "after the race");
}

// block/030: every fourth init_hctx fails, so some updates fail part-way.
// A failed update restores the old count and the queue keeps serving
// verified I/O under its scheduler; some updates still succeed.
TEST(NrHwQueues, InitHctxFaultDuringUpdateRollsBack) {
  Watchdog wd("init_hctx fault during update_nr_hw_queues", std::chrono::seconds(240));
  for (const char* sched : kScheds) {
    ParamMap p = null_params(sched);
    // Creation makes 2 hctxs (calls 1 and 2); from then on every fourth
    // call fails, which lands inside some updates and not others.
    p["init_hctx"] = "4,100,0,-1";
    auto dev = make_null_device(p);
    ASSERT_TRUE(dev) << sched;
    IoTotals t;
    unsigned flips = 0, failed = 0, ok = 0;
    run_verified_workers(*dev, 2, 1.0 * stress_scale(), t, true, [&] {
      const unsigned before = dev->queue().nr_hw_queues();
      Status s = dev->queue().tag_set().update_nr_hw_queues(kCounts[flips++ % 4], 0);
      if (s) {
        ok++;
      } else {
        failed++;
        EXPECT_EQ(dev->queue().nr_hw_queues(), before) << sched << ": " << s.message();
      }
    });
    EXPECT_GT(failed, 0u) << sched;
    EXPECT_GT(ok, 0u) << sched;
    t.expect_clean();
    EXPECT_EQ(current_scheduler(dev->queue()), sched);
    // Still serving after the last update, whichever way it went.
    uint8_t buf[4096] = {};
    EXPECT_EQ(dev->queue().write_sync(buf, 0, sizeof buf), BlkStatus::ok) << sched;
    EXPECT_EQ(dev->queue().read_sync(buf, 0, sizeof buf), BlkStatus::ok) << sched;
    expect_queue_idle(dev->queue(), sched);
  }
}

}  // namespace
}  // namespace blkmq::test
