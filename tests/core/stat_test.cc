// Exact disk statistics (blktests block/031-style): while requests are held
// in the driver, `inflight` and the stat file's in-flight field count them
// and io_ticks grows (read while they are in flight, as part_stat_show
// updates it); once they end, every count matches the sequence of I/O
// issued, in-flight is zero and the busy time stops. The times are read
// off a manual runtime's clock, so they are exact, not bounds.
#include <gtest/gtest.h>

#include <sstream>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/stub_driver.h"

namespace blkmq::test {
namespace {

std::vector<uint64_t> stat_fields(Queue& q) {
  std::istringstream in(*q.attr("stat"));
  std::vector<uint64_t> f;
  uint64_t v;
  while (in >> v) f.push_back(v);
  return f;
}

enum Field { kReadIos, kReadMerges, kReadSectors, kReadTicks, kWriteIos, kWriteMerges, kWriteSectors,
             kWriteTicks, kInFlight, kIoTicks, kTimeInQueue, kDiscardIos, kDiscardMerges, kDiscardSectors,
             kDiscardTicks, kFlushIos, kFlushTicks };

// The core's io_ticks unit (its jiffy): 2^22 ns. A clock that starts on a
// tick and moves whole ticks makes io_ticks exact.
constexpr uint64_t kTick = 1ull << 22;
constexpr uint64_t kMs = 1000 * 1000;

TEST(DiskStats, InFlightAndBusyTimeWhileRequestsAreHeldThenExactCounts) {
  ManualRuntime rt(250000 * kTick);  // about 1049 s
  StubDriver::Options o;
  o.mode = CompleteMode::never;
  o.runtime = &rt;
  StubDriver d(o);
  Queue& q = d.q();
  BioTracker t;
  std::vector<std::unique_ptr<BioTracker::Slot>> s;
  // Three reads (the last two contiguous, merged in a plug) and two writes.
  s.push_back(t.make(ReqOp::read, 0, 4096));
  {
    Plug plug;
    s.push_back(t.make(ReqOp::read, 1 << 20, 4096));
    s.push_back(t.make(ReqOp::read, (1 << 20) + 4096, 8192));
    q.submit_bio(&s[1]->bio);
    q.submit_bio(&s[2]->bio);
  }
  q.submit_bio(&s[0]->bio);
  s.push_back(t.make(ReqOp::write, 2 << 20, 4096));
  s.push_back(t.make(ReqOp::write, 3 << 20, 16384));
  q.submit_bio(&s[3]->bio);
  q.submit_bio(&s[4]->bio);
  ASSERT_EQ(d.nr_seen(), 4u) << "two reads merged into one request";
  EXPECT_EQ(*q.attr("inflight"), "       2        2");
  auto f0 = stat_fields(q);
  ASSERT_EQ(f0.size(), 17u);
  EXPECT_EQ(f0[kInFlight], 4u);
  constexpr uint64_t kHeld = 15 * kTick;  // 62.9 ms
  rt.advance(kHeld);
  auto f1 = stat_fields(q);
  // Busy the whole time with four requests in flight.
  EXPECT_EQ(f1[kIoTicks] - f0[kIoTicks], kHeld / kMs);
  // time_in_queue sums the time of completed requests only, as the
  // kernel's field 11 (part_stat nsecs) does.
  EXPECT_EQ(f1[kTimeInQueue], f0[kTimeInQueue]);
  EXPECT_EQ(f1[kReadIos], 0u) << "ios count completions";
  for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
  ASSERT_TRUE(t.wait_for(5));
  ASSERT_TRUE(wait_requests_freed(q));
  auto f2 = stat_fields(q);
  EXPECT_EQ(f2[kReadIos], 2u);
  EXPECT_EQ(f2[kReadMerges], 1u);
  EXPECT_EQ(f2[kReadSectors], (4096 + 4096 + 8192) / 512u);
  EXPECT_EQ(f2[kWriteIos], 2u);
  EXPECT_EQ(f2[kWriteMerges], 0u);
  EXPECT_EQ(f2[kWriteSectors], (4096 + 16384) / 512u);
  EXPECT_EQ(f2[kReadTicks], 2 * kHeld / kMs);
  EXPECT_EQ(f2[kWriteTicks], 2 * kHeld / kMs);
  EXPECT_EQ(f2[kTimeInQueue], 4 * kHeld / kMs);
  EXPECT_EQ(f2[kIoTicks], f1[kIoTicks]) << "the ends came at the time f1 was read";
  EXPECT_EQ(f2[kInFlight], 0u);
  EXPECT_EQ(f2[kDiscardIos], 0u);
  EXPECT_EQ(*q.attr("inflight"), "       0        0");
  // Idle: busy time no longer grows.
  rt.advance(8 * kTick);
  auto f3 = stat_fields(q);
  EXPECT_EQ(f3[kIoTicks], f2[kIoTicks]);
  EXPECT_EQ(f3[kTimeInQueue], f2[kTimeInQueue]);
}

TEST(DiskStats, FlushesAreCountedInTheirOwnFields) {
  StubDriver::Options o;
  o.write_cache = true;
  StubDriver d(o);
  ASSERT_EQ(d.q().flush_sync(), BlkStatus::ok);
  ASSERT_EQ(d.q().flush_sync(), BlkStatus::ok);
  ASSERT_TRUE(wait_requests_freed(d.q()));
  auto f = stat_fields(d.q());
  EXPECT_EQ(f[kFlushIos], 2u);
  // The kernel's too: an empty flush bio is REQ_OP_WRITE | REQ_PREFLUSH and
  // counts as a write without sectors (two fsync()s on a loop device: writes
  // +2, flushes +2; Flush.FlushesSentToTheDeviceAreCountedAsTheKernelCountsThem).
  EXPECT_EQ(f[kWriteIos], 2u);
  EXPECT_EQ(f[kWriteSectors], 0u);
}

}  // namespace
}  // namespace blkmq::test
