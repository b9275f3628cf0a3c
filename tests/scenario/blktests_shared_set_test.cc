// blktests cases about one tag set shared by several queues or hw queues:
// block/022 (two devices on a shared tag set powered on and off from two
// threads: the freeze/unfreeze sequence of set_queue_shared must not hang),
// block/038 (a device powered on and off while the set's submit_queues
// changes), block/031 (verified random I/O through a host-wide tag set:
// null's shared_tag_bitmap, the scsi host's host_tagset). "Power" is
// creating and destroying a null device; submit_queues is
// update_nr_hw_queues on the set.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/stress.h"
#include "support/verified_io.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

// Every device on the shared set must agree on these (null refuses a
// device that differs).
const ParamMap kShared = {{"shared_tags", "1"}, {"submit_queues", "2"}, {"poll_queues", "0"},
                          {"hw_queue_depth", "16"}, {"irqmode", "1"}, {"memory_backed", "1"}, {"size", "16"}};

// Creates a device on the shared set, writes and reads one block, and
// destroys it; false (with a failure) if any step failed.
bool power_cycle(unsigned id, unsigned n) {
  auto dev = make_null_device(kShared);
  if (!dev) return false;
  uint8_t buf[4096];
  std::memset(buf, static_cast<int>(id * 31 + n), sizeof buf);
  const BlkStatus w = dev->queue().write_sync(buf, 4096 * id, sizeof buf);
  const BlkStatus r = dev->queue().read_sync(buf, 4096 * id, sizeof buf);
  EXPECT_EQ(w, BlkStatus::ok);
  EXPECT_EQ(r, BlkStatus::ok);
  return w == BlkStatus::ok && r == BlkStatus::ok;
}

// Power-cycles devices from `threads` threads until `limit` (at least
// `min_cycles` each); the cycles each thread completed.
std::vector<unsigned> power_loops(unsigned threads, const TimeLimit& limit, unsigned min_cycles) {
  std::vector<unsigned> cycles(threads, 0);
  std::vector<std::thread> th;
  for (unsigned i = 0; i < threads; i++)
    th.emplace_back([&, i] {
      while (cycles[i] < min_cycles || !limit.passed()) {
        if (!power_cycle(i, cycles[i])) return;
        cycles[i]++;
      }
    });
  for (auto& t : th) t.join();
  return cycles;
}

// block/022: two threads power their own device on and off on one shared
// tag set. Each creation and destruction switches fair sharing on or off,
// freezing the other queue, which the other thread may be creating or
// destroying at that moment. The watchdog catches a hang.
TEST(BlktestsSharedSet, TwoDevicesPoweredOnAndOffFromTwoThreads) {
  Watchdog wd("block/022 power loops", std::chrono::seconds(60));
  const TimeLimit limit(std::chrono::milliseconds(static_cast<int>(800 * stress_scale())));
  const auto cycles = power_loops(2, limit, 20);
  for (unsigned c : cycles) EXPECT_GE(c, 20u);
}

// block/038: one thread powers a device on and off while another sets the
// shared set's submit_queues to 1 and 4 (capped at the CPUs) in turn, and
// a third device keeps verified I/O on the set throughout.
TEST(BlktestsSharedSet, PowerCyclesRacingSubmitQueuesChanges) {
  Watchdog wd("block/038 power vs submit_queues", std::chrono::seconds(90));
  auto busy = make_null_device(kShared);
  ASSERT_TRUE(busy);
  TagSet& set = busy->queue().tag_set();
  std::atomic<bool> stop{false};
  std::atomic<unsigned> updates{0}, update_errors{0};
  std::thread updater([&] {
    for (unsigned i = 0; !stop.load(); i++) {
      if (!set.update_nr_hw_queues(i % 2 ? 4 : 1, 0)) update_errors++;
      updates++;
      // blktests' loop runs as fast as echo can write; here a pause lets
      // the I/O and the power loop get the set between updates (a pace:
      // real time is the point).
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::vector<unsigned> cycles;
  IoTotals t;
  run_verified_workers(*busy, 1, 0.05, t, true);  // the set has I/O before the race starts
  std::thread io([&] { run_verified_workers(*busy, 2, 1.0 * stress_scale(), t, true); });
  cycles = power_loops(1, TimeLimit(std::chrono::milliseconds(static_cast<int>(800 * stress_scale()))), 20);
  io.join();
  stop = true;
  updater.join();
  EXPECT_GE(cycles[0], 20u);
  EXPECT_GT(updates.load(), 20u);
  EXPECT_EQ(update_errors.load(), 0u);
  t.expect_clean();
  expect_queue_idle(busy->queue(), "the device beside the power loop");
}

// block/031: verified random I/O from four threads through one tag space
// for all hw queues (null shared_tag_bitmap=1, 512-byte blocks, a depth of
// 64 for two hw queues), then the same through a scsi host with
// host_tagset=1 and two hw queues.
TEST(BlktestsSharedSet, VerifiedRandomIoThroughAHostWideTagSet) {
  Watchdog wd("block/031 host tag set", std::chrono::seconds(90));
  struct Case {
    const char* driver;
    ParamMap p;
  };
  const Case cases[] = {
      {"null", {{"shared_tag_bitmap", "1"}, {"submit_queues", "2"}, {"poll_queues", "0"}, {"bs", "512"},
                {"hw_queue_depth", "64"}, {"memory_backed", "1"}, {"size", "16"}, {"irqmode", "1"}}},
      {"scsi", {{"host_tagset", "1"}, {"nr_hw_queues", "2"}, {"can_queue", "64"}, {"backing", "memory"},
                {"size", "16M"}, {"latency_us", "20"}}},
  };
  for (const Case& c : cases) {
    auto r = create_device(c.driver, c.p);
    ASSERT_TRUE(r) << c.driver << ": " << r.status().message();
    Device& dev = **r;
    EXPECT_TRUE(dev.queue().tag_set().config().flags & kTagSetSharedTags) << c.driver;
    IoTotals t;
    run_verified_workers(dev, 4, 0.6 * stress_scale(), t, true);
    EXPECT_GT(t.submitted.load(), 200u) << c.driver;
    t.expect_clean();
    expect_queue_idle(dev.queue(), c.driver);
  }
}

}  // namespace
}  // namespace blkmq::test
