#include "bench/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/randmap.h"

namespace bench {
namespace {

TEST(LatHistogram, IndexIsMonotonicAndValueInBucket) {
  unsigned last = 0;
  for (uint64_t v = 0; v < 200000; v += 7) {
    unsigned i = LatHistogram::index(v);
    EXPECT_GE(i, last);
    last = i;
    uint64_t rep = LatHistogram::value(i);
    // The bucket's representative is within 1/64 of the value (fio's error bound).
    EXPECT_LE(std::abs(static_cast<double>(rep) - static_cast<double>(v)), std::max(1.0, v / 64.0)) << v;
  }
  EXPECT_LT(LatHistogram::index(UINT64_MAX), LatHistogram::kBuckets);
  EXPECT_EQ(LatHistogram::index(127), 127u);
  EXPECT_EQ(LatHistogram::index(128), 128u);
}

TEST(LatHistogram, PercentilesOfUniform) {
  LatHistogram h;
  for (uint64_t v = 1; v <= 100000; ++v) h.add(v * 10);  // 10 ns .. 1 ms
  EXPECT_EQ(h.total(), 100000u);
  auto near = [](uint64_t got, double want) { return std::abs(got - want) <= want * 0.02; };
  EXPECT_TRUE(near(h.percentile(50), 500000)) << h.percentile(50);
  EXPECT_TRUE(near(h.percentile(99), 990000)) << h.percentile(99);
  EXPECT_TRUE(near(h.percentile(1), 10000)) << h.percentile(1);
  std::vector<uint64_t> all = h.percentiles(default_percentiles());
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  EXPECT_EQ(all.size(), 17u);
}

TEST(LatHistogram, EmptyAndMerge) {
  LatHistogram a, b;
  EXPECT_EQ(a.percentile(50), 0u);
  for (int i = 0; i < 100; ++i) a.add(100);
  for (int i = 0; i < 100; ++i) b.add(10000);
  a.merge(b);
  EXPECT_EQ(a.total(), 200u);
  EXPECT_EQ(a.percentile(40), 100u);
  EXPECT_NEAR(static_cast<double>(a.percentile(90)), 10000.0, 10000.0 / 64);
}

TEST(LatStat, MeanStddevMinMax) {
  LatStat s;
  for (uint64_t v : {2, 4, 4, 4, 5, 5, 7, 9}) s.add(v);
  EXPECT_EQ(s.n, 8u);
  EXPECT_EQ(s.min, 2u);
  EXPECT_EQ(s.max, 9u);
  EXPECT_DOUBLE_EQ(s.mean(), 5.0);
  EXPECT_NEAR(s.stddev(), 2.138, 0.001);  // sample stddev, as fio
  LatStat e;
  EXPECT_EQ(e.min_or_zero(), 0u);
  EXPECT_EQ(e.stddev(), 0.0);
  e.merge(s);
  EXPECT_EQ(e.min, 2u);
  EXPECT_EQ(e.n, 8u);
}

TEST(JobResult, MergeForGroupReporting) {
  JobResult a, b;
  a.name = "j";
  a.runtime_ns = a.cpu_runtime_ns = 1000;
  b.runtime_ns = b.cpu_runtime_ns = 3000;
  a.dir[kRead].ios = 10;
  b.dir[kRead].ios = 5;
  b.error = 5;
  b.error_msg = "read failed";
  a.cpu.usr_ns = 100;
  b.cpu.usr_ns = 200;
  JobResult m = merge_results({&a, &b});
  EXPECT_EQ(m.name, "j");
  EXPECT_EQ(m.nr_jobs, 2u);
  EXPECT_EQ(m.dir[kRead].ios, 15u);
  EXPECT_EQ(m.runtime_ns, 3000u);
  EXPECT_EQ(m.cpu_runtime_ns, 4000u);
  EXPECT_EQ(m.cpu.usr_ns, 300u);
  EXPECT_EQ(m.error, 5);
  EXPECT_EQ(m.error_msg, "read failed");
}

TEST(CpuUsage, ThreadNowMoves) {
  CpuUsage a = CpuUsage::thread_now();
  volatile uint64_t x = 0;
  for (int i = 0; i < 20000000; ++i) x += static_cast<uint64_t>(i);
  CpuUsage d = CpuUsage::thread_now() - a;
  EXPECT_GT(d.usr_ns + d.sys_ns, 0u);
}

TEST(RandomMap, EveryBlockOncePerPass) {
  for (uint64_t n : {1ull, 2ull, 3ull, 7ull, 64ull, 1000ull, 4097ull, 65536ull, 100003ull}) {
    for (uint64_t seed : {0ull, 1ull, 12345ull}) {
      RandomMap m(n, seed);
      std::vector<uint8_t> seen(n, 0);
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t b = m.next();
        ASSERT_LT(b, n);
        ASSERT_EQ(seen[b], 0) << "n=" << n << " block " << b << " twice";
        seen[b] = 1;
      }
      // The next pass again covers everything.
      std::fill(seen.begin(), seen.end(), 0);
      for (uint64_t i = 0; i < n; ++i) seen[m.next()] = 1;
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(n));
    }
  }
}

TEST(RandomMap, LooksRandom) {
  // Not a sequential walk: few consecutive neighbours, and seeds differ.
  const uint64_t n = 1 << 16;
  RandomMap a(n, 1), b(n, 2);
  uint64_t prev = a.next(), adjacent = 0, same = 0;
  for (int i = 0; i < 10000; ++i) {
    uint64_t x = a.next();
    adjacent += (x == prev + 1);
    same += (x == b.next());
    prev = x;
  }
  EXPECT_LT(adjacent, 50u);
  EXPECT_LT(same, 50u);
}

TEST(Xoshiro, BelowIsInRangeAndSpread) {
  Xoshiro256 r(42);
  uint64_t hist[10] = {};
  for (int i = 0; i < 100000; ++i) {
    uint64_t v = r.below(10);
    ASSERT_LT(v, 10u);
    hist[v]++;
  }
  for (uint64_t h : hist) EXPECT_NEAR(static_cast<double>(h), 10000.0, 600.0);
  Xoshiro256 s1(7), s2(7);
  EXPECT_EQ(s1.next(), s2.next());  // randrepeat: same seed, same sequence
}

}  // namespace
}  // namespace bench
