// Stress scenarios on the null device: teardown with I/O in flight, and one
// hardware tag shared by several submitters. Fault injection, hw queue
// count changes and removal have files of their own in this folder.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/verified_io.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

constexpr uint32_t kBlock = kVerifyBlock;

// One I/O of the teardown scenario.
struct Io {
  Bio bio;
  iovec v;
  alignas(64) uint8_t buf[kBlock];
  std::atomic<int> ends{0};
};

void end_io(Bio* b) { static_cast<Io*>(b->private_data)->ends.fetch_add(1); }

TEST(NullStress, TeardownWithIoInFlightDrains) {
  Watchdog wd("teardown scenario", std::chrono::seconds(120));
  for (int round = 0; round < 5; round++) {
    auto dev = make_null_device({{"irqmode", "2"}, {"completion_nsec", "200000"}, {"hw_queue_depth", "8"}});
    ASSERT_TRUE(dev);
    std::vector<Io> ios(64);
    for (unsigned i = 0; i < ios.size(); i++) {
      Io& io = ios[i];
      io.v = iovec{io.buf, kBlock};
      io.bio.op = ReqOp::read;
      io.bio.sector = i * 8;
      io.bio.size = kBlock;
      io.bio.vec = &io.v;
      io.bio.nr_vecs = 1;
      io.bio.end_io = end_io;
      io.bio.private_data = &io;
    }
    std::thread sub([&] {
      for (Io& io : ios) dev->queue().submit_bio(&io.bio);
    });
    sub.join();
    dev.reset();  // must wait for all 64
    for (Io& io : ios) {
      EXPECT_EQ(io.ends.load(), 1);
      EXPECT_EQ(io.bio.status, BlkStatus::ok);
    }
  }
}

// A device of one hardware tag under every scheduler, with four submitters
// of 16 I/Os each: every request waits for the one tag, and submitters
// sleep in tag allocation, so a lost wake-up (a tag freed without waking
// a waiter, a queue not rerun after a completion) stops the device, which
// the per-scheduler progress check and the watchdog catch.
TEST(NullStress, OneTagUnderEverySchedulerWithSeveralSubmitters) {
  Watchdog wd("one-tag scenario", std::chrono::seconds(180));
  for (const char* sched : {"none", "mq-deadline", "kyber", "bfq"}) {
    auto dev = make_null_device({{"memory_backed", "1"}, {"irqmode", "2"}, {"completion_nsec", "20000"},
                          {"submit_queues", "1"}, {"hw_queue_depth", "1"}, {"attr:queue/scheduler", sched}});
    ASSERT_TRUE(dev) << sched;
    IoTotals t;
    const double seconds = 1.0 * stress_scale();
    run_verified_workers(*dev, 4, seconds, t, true);
    std::printf("[          ] %s: %llu I/Os through one tag in %.2f s\n", sched,
                static_cast<unsigned long long>(t.submitted.load()), seconds);
    // bfq is the slowest (about 450/s: with 2 scheduler tags each queue
    // empties after every request and is idled for); a stall gives none.
    EXPECT_GT(static_cast<double>(t.submitted.load()), 100 * seconds) << sched;
    EXPECT_EQ(t.ended.load(), t.submitted.load()) << sched;
    EXPECT_EQ(t.doubles.load(), 0u) << sched;
    EXPECT_EQ(t.errors.load(), 0u) << sched;
    EXPECT_EQ(t.mismatches.load(), 0u) << sched;
    // The accounting follows the bios' end, and nothing signals it.
    eventually([&] { return dev->queue().disk_stat().in_flight == 0; }, 1000);
    EXPECT_EQ(dev->queue().disk_stat().in_flight, 0u) << sched;
  }
}

}  // namespace
}  // namespace blkmq::test
