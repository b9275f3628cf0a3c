// blktests block/024 ("do I/O faster than a jiffy and check iostats
// times"): every I/O takes 0.5 ms (null irqmode=2, completion_nsec=500000),
// less than the kernel's shortest jiffy, and the time fields of `stat`
// must still add up, as they do since the kernel keeps them in
// nanoseconds (b57e99b4b8b0): blktests reads fields 4 and 8 (read and
// write ticks) after 1500 reads, 1500 writes, then 1500 reads beside two
// writers of 1800 each, and expects 1, 1 and then 1 and 2 more seconds.
// The same sequence, shorter, with bounds instead of rounding: each field
// grows by at least the I/Os' device time and, for one thread, by about
// the wall time at most; io_ticks (field 10) follows the wall time.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/stress.h"
#include "support/verified_io.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kIoMs = 0.5;

// `n` synchronous 4 KiB reads or writes, one at a time.
void sync_ios(Queue& q, bool write, unsigned n, unsigned id) {
  std::vector<uint8_t> buf(4096, 0x5a);
  for (unsigned i = 0; i < n; i++) {
    const uint64_t off = (uint64_t(id) * 4096 + i % 4096) * 4096;
    const BlkStatus st = write ? q.write_sync(buf.data(), off, 4096) : q.read_sync(buf.data(), off, 4096);
    ASSERT_EQ(st, BlkStatus::ok);
  }
}

// The stat once the last request is accounted: a sync I/O returns when its
// bio ends, which (as in the kernel's blk_mq_end_request) comes before the
// request's accounting, so wait until nothing is in flight.
DiskStat settled_stat(Queue& q) {
  DiskStat d;
  // Nothing signals the accounting's end: look until it is done.
  eventually([&] { return (d = q.disk_stat()).in_flight == 0; }, 1000);
  EXPECT_EQ(d.in_flight, 0u);
  return d;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

TEST(BlktestsIostat, SubMillisecondIosStillAddUpInTheTimeFields) {
  Watchdog wd("block/024 iostat times", std::chrono::seconds(60));
  auto dev = make_null_device({{"irqmode", "2"}, {"completion_nsec", "500000"}, {"poll_queues", "0"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  const unsigned n = scaled(400);
  const DiskStat s0 = settled_stat(q);
  auto t0 = Clock::now();
  sync_ios(q, false, n, 0);
  // The wall times end once the stat is settled: the last request's
  // accounting ends after its bio did.
  const DiskStat s1 = settled_stat(q);
  const double read_wall = ms_since(t0);
  t0 = Clock::now();
  sync_ios(q, true, n, 0);
  const DiskStat s2 = settled_stat(q);
  const double write_wall = ms_since(t0);
  // One reader beside two writers: the write field counts both writers'
  // time, twice the wall time, as blktests' "write 2 s".
  t0 = Clock::now();
  std::thread w1([&] { sync_ios(q, true, n, 1); });
  std::thread w2([&] { sync_ios(q, true, n, 2); });
  sync_ios(q, false, n, 3);
  w1.join();
  w2.join();
  const DiskStat s3 = settled_stat(q);
  const double mixed_wall = ms_since(t0);
  std::printf("[          ] %u I/Os of %.1f ms: read %llu ms in %.0f, write %llu ms in %.0f, then read %llu "
              "and write %llu ms in %.0f; io_ticks %llu ms\n",
              n, kIoMs, (unsigned long long)(s1.read_ticks_ms - s0.read_ticks_ms), read_wall,
              (unsigned long long)(s2.write_ticks_ms - s1.write_ticks_ms), write_wall,
              (unsigned long long)(s3.read_ticks_ms - s2.read_ticks_ms),
              (unsigned long long)(s3.write_ticks_ms - s2.write_ticks_ms), mixed_wall,
              (unsigned long long)(s3.io_ticks_ms - s0.io_ticks_ms));
  const double device_ms = n * kIoMs;
  // A request's time ends when it is accounted, after its bio has ended
  // and the next I/O may have started (the kernel's order too), so the
  // times of one thread's I/Os overlap a little; more under TSan.
  auto at_most = [](double wall) { return 1.25 * wall + 2; };
  // Truncation to whole ms per I/O would leave these at 0.
  EXPECT_GE(double(s1.read_ticks_ms - s0.read_ticks_ms), device_ms - 1);
  EXPECT_LE(double(s1.read_ticks_ms - s0.read_ticks_ms), at_most(read_wall));
  EXPECT_GE(double(s2.write_ticks_ms - s1.write_ticks_ms), device_ms - 1);
  EXPECT_LE(double(s2.write_ticks_ms - s1.write_ticks_ms), at_most(write_wall));
  EXPECT_EQ(s1.read_ios - s0.read_ios, n);
  EXPECT_EQ(s2.write_ios - s1.write_ios, n);
  EXPECT_GE(double(s3.read_ticks_ms - s2.read_ticks_ms), device_ms - 1);
  EXPECT_GE(double(s3.write_ticks_ms - s2.write_ticks_ms), 2 * device_ms - 1);
  EXPECT_LE(double(s3.write_ticks_ms - s2.write_ticks_ms), 2 * at_most(mixed_wall));
  // time_in_queue is every group's ticks together.
  EXPECT_GE(s3.time_in_queue_ms - s0.time_in_queue_ms,
            (s3.read_ticks_ms - s0.read_ticks_ms) + (s3.write_ticks_ms - s0.write_ticks_ms) - 1);
  // io_ticks: the device was busy nearly all the time. Kept in ~4 ms
  // ticks (core/complete.cc), so allow a tick at each end and, as in the
  // kernel, no credit for a tick boundary that a start crossed while idle.
  const double busy = double(s3.io_ticks_ms - s0.io_ticks_ms), wall = read_wall + write_wall + mixed_wall;
  EXPECT_GE(busy, 0.5 * wall);
  EXPECT_LE(busy, wall + 10);
}

}  // namespace
}  // namespace blkmq::test
