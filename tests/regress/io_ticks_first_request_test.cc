// Regression: the first request a queue ever started added the whole time
// since the clock's zero (the machine's uptime, with CLOCK_MONOTONIC) to
// io_ticks. account_io_start marked the request in flight before it
// brought io_ticks up to date, so that first update, moving the stamp from
// 0, found a request in flight and counted the interval as busy:
// BlktestsIostat (blktests block/024) read io_ticks of 2045163 ms after
// 0.8 s of I/O, 34 minutes after boot. The kernel's blk_account_io_start
// updates io_ticks first and then counts the request in flight.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>

#include "blkmq/blkmq.h"
#include "support/stub_driver.h"

namespace blkmq::test {
namespace {

TEST(IoTicksFirstRequest, TheFirstRequestDoesNotCountTheTimeBeforeIt) {
  ManualRuntime rt(100ull * 1000 * 1000 * 1000);  // the queue's clock: 100 s from its zero
  StubDriver::Options o;
  o.runtime = &rt;
  StubDriver d(o);
  BioTracker t;
  auto s = t.make(ReqOp::read, 0, 4096);
  d.q().submit_bio(&s->bio);  // completes inline, at the same instant
  rt.run_pending();
  ASSERT_EQ(t.ended.load(), 1);
  EXPECT_EQ(s->status, BlkStatus::ok);
  rt.advance(50ull * 1000 * 1000);
  EXPECT_LT(d.q().disk_stat().io_ticks_ms, 10u) << "the 100 s before the first request counted as busy";
}

}  // namespace
}  // namespace blkmq::test
