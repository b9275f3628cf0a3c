// The null driver's bandwidth budget (mbps): no core needed, no clock: the
// tick is stepped by hand.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "drivers/null/null_bw.h"

namespace blkmq::nullb {
namespace {

TEST(NullBw, PerTickIsOneFiftiethOfTheRate) {
  BwBudget b(100);
  EXPECT_EQ(b.per_tick(), (100ll << 20) / 50);
  EXPECT_EQ(b.available(), b.per_tick());
}

TEST(NullBw, ExhaustsAndRefills) {
  BwBudget b(50);  // 1 MiB per tick
  const uint64_t kReq = 64 << 10;
  int taken = 0;
  while (b.try_consume(kReq)) taken++;
  EXPECT_EQ(taken, 16);
  EXPECT_FALSE(b.try_consume(kReq));
  EXPECT_FALSE(b.try_consume(1));
  EXPECT_TRUE(b.refill());
  taken = 0;
  while (b.try_consume(kReq)) taken++;
  EXPECT_EQ(taken, 16);
}

TEST(NullBw, IdleTicksDoNotBankABurst) {
  BwBudget b(50);
  for (int i = 0; i < 10; i++) EXPECT_TRUE(b.refill());
  EXPECT_EQ(b.available(), b.per_tick());
}

TEST(NullBw, LargeRequestOverdrawsAndPaysBack) {
  BwBudget b(1);  // ~20 KiB per tick
  const uint64_t kBig = 1 << 20;
  // null_blk would refuse this forever; here it goes and leaves a debt.
  EXPECT_TRUE(b.try_consume(kBig));
  EXPECT_LT(b.available(), 0);
  int ticks = 0;
  while (!b.refill()) ticks++;
  // 1 MiB at 1 MiB/s: ~50 ticks (one second) before the next request.
  EXPECT_GE(ticks, 48);
  EXPECT_LE(ticks, 50);
  EXPECT_TRUE(b.try_consume(4096));
}

TEST(NullBw, LongRunRateIsExact) {
  BwBudget b(10);
  const uint64_t kReq = 128 << 10;
  uint64_t bytes = 0;
  const int kTicks = 500;  // 10 s of ticks
  for (int t = 0; t < kTicks; t++) {
    while (b.try_consume(kReq)) bytes += kReq;
    b.refill();
  }
  const double want = 10.0 * (1 << 20) * kTicks / 50;
  EXPECT_NEAR(static_cast<double>(bytes), want, want * 0.02);
}

TEST(NullBw, ThrottledMarkIsTakenOnce) {
  BwBudget b(10);
  EXPECT_FALSE(b.take_throttled());
  b.mark_throttled();
  EXPECT_TRUE(b.take_throttled());
  EXPECT_FALSE(b.take_throttled());
}

TEST(NullBw, DisableLiftsTheCap) {
  BwBudget b(1);
  while (b.try_consume(4096)) {
  }
  b.disable();
  for (int i = 0; i < 100000; i++) ASSERT_TRUE(b.try_consume(1 << 20));
  EXPECT_TRUE(b.refill());
}

TEST(NullBw, ConcurrentConsumersNeverOverdrawTwice) {
  BwBudget b(50);  // 1 MiB per tick
  std::atomic<uint64_t> got{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; t++) {
    ts.emplace_back([&] {
      for (int i = 0; i < 1000; i++) {
        if (b.try_consume(4096)) got += 4096;
      }
    });
  }
  for (auto& t : ts) t.join();
  // A positive budget lets one request through per racing thread at most
  // past zero.
  EXPECT_GE(got.load(), uint64_t(b.per_tick()));
  EXPECT_LE(got.load(), uint64_t(b.per_tick()) + 8 * 4096);
}

}  // namespace
}  // namespace blkmq::nullb
