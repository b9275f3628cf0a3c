// fault_attr semantics of the null driver's fault injection: no core needed.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "drivers/null/null_fault.h"

namespace blkmq::nullb {
namespace {

FaultConfig cfg(const char* s) {
  auto r = parse_fault_config("requeue", s);
  EXPECT_TRUE(r.ok()) << s;
  return r ? *r : FaultConfig{};
}

TEST(NullFault, ParseAndFormat) {
  FaultConfig c = cfg("3,100,512,7");
  EXPECT_TRUE(c.configured);
  EXPECT_EQ(c.interval, 3u);
  EXPECT_EQ(c.probability, 100u);
  EXPECT_EQ(c.space, 512u);
  EXPECT_EQ(c.times, 7);
  EXPECT_EQ(format_fault_config(c), "3,100,512,7");
  EXPECT_FALSE(cfg("").configured);
  EXPECT_EQ(format_fault_config(FaultConfig{}), "");
  for (const char* bad : {"1", "1,2", "1,2,3", "1,2,3,4,5", "a,1,1,1", "1,1,1,x", " 1,1,1,1",
                          "1,,1,1", "-1,1,1,1", "1,1,-1,1", "1,1,1,-5"}) {
    auto r = parse_fault_config("timeout_inject", bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r) {
      EXPECT_NE(r.status().message().find("'timeout_inject'"), std::string::npos);
    }
  }
}

TEST(NullFault, DisabledNeverFails) {
  FaultAttr a;
  EXPECT_FALSE(a.enabled());
  EXPECT_FALSE(a.should_fail(1));
  a.configure(cfg("1,0,0,-1"));  // probability 0
  EXPECT_FALSE(a.enabled());
  a.configure(cfg("1,100,0,0"));  // no times left
  EXPECT_FALSE(a.enabled());
  EXPECT_FALSE(a.should_fail(1));
}

TEST(NullFault, TimesCountsDown) {
  FaultAttr a;
  a.configure(cfg("1,100,0,3"));
  EXPECT_TRUE(a.enabled());
  int fails = 0;
  for (int i = 0; i < 10; i++) fails += a.should_fail(1);
  EXPECT_EQ(fails, 3);
  EXPECT_EQ(a.times_left(), 0);
}

TEST(NullFault, UnlimitedTimes) {
  FaultAttr a;
  a.configure(cfg("1,100,0,-1"));
  for (int i = 0; i < 100; i++) EXPECT_TRUE(a.should_fail(1));
  EXPECT_EQ(a.times_left(), -1);
}

TEST(NullFault, IntervalFailsEveryNth) {
  FaultAttr a;
  a.configure(cfg("4,100,0,-1"));
  std::vector<bool> got;
  for (int i = 0; i < 12; i++) got.push_back(a.should_fail(1));
  std::vector<bool> want = {false, false, false, true, false, false,
                            false, true, false, false, false, true};
  EXPECT_EQ(got, want);
}

TEST(NullFault, SpaceLetsBytesThroughFirst) {
  FaultAttr a;
  a.configure(cfg("1,100,10000,-1"));
  // 4096 + 4096 are let through (space 10000 > size each time), then
  // 1808 left is not > 4096: failures start.
  EXPECT_FALSE(a.should_fail(4096));
  EXPECT_FALSE(a.should_fail(4096));
  EXPECT_TRUE(a.should_fail(4096));
  EXPECT_TRUE(a.should_fail(4096));
}

TEST(NullFault, ProbabilityIsRoughlyHonoured) {
  FaultAttr a;
  a.configure(cfg("1,30,0,-1"));
  int fails = 0;
  const int n = 20000;
  for (int i = 0; i < n; i++) fails += a.should_fail(1);
  EXPECT_GT(fails, n * 25 / 100);
  EXPECT_LT(fails, n * 35 / 100);
}

TEST(NullFault, TimesAreExactUnderConcurrency) {
  FaultAttr a;
  a.configure(cfg("1,100,0,1000"));
  std::atomic<int> fails{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; t++) {
    ts.emplace_back([&] {
      for (int i = 0; i < 1000; i++) fails += a.should_fail(1);
    });
  }
  for (auto& t : ts) t.join();
  // A call that passed the times check may still fail after another took
  // the last one (as the kernel's); at most one per racing thread extra.
  EXPECT_GE(fails.load(), 1000);
  EXPECT_LE(fails.load(), 1008);
  EXPECT_EQ(a.times_left(), 0);
}

}  // namespace
}  // namespace blkmq::nullb
