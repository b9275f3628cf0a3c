// bfq's tunables: the kernel's names, units, defaults and ranges; bad
// values refused with a message naming the tunable, changing nothing.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/stub_driver.h"
#include "sched/bfq/bfq.h"

namespace blkmq::test {
namespace {

std::string get(Queue& q, const std::string& name) {
  auto v = q.attr("queue/iosched/" + name);
  return v ? *v : "<error: " + v.status().message() + ">";
}

StubDriver::Options bfq_opts() {
  StubDriver::Options o;
  o.scheduler = "bfq";
  return o;
}

TEST(BfqAttrs, RegisteredLast) {
  StubDriver d(bfq_opts());
  EXPECT_EQ(*d.q().attr("queue/scheduler"), "none mq-deadline kyber [bfq]");
}

TEST(BfqAttrs, KernelDefaults) {
  StubDriver d(bfq_opts());
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"slice_idle", "8"},         {"slice_idle_us", "8000"},   {"fifo_expire_sync", "125"},
      {"fifo_expire_async", "250"}, {"back_seek_max", "16384"}, {"back_seek_penalty", "2"},
      {"max_budget", "0"},         {"timeout_sync", "125"},     {"strict_guarantees", "0"},
      {"low_latency", "1"},        {"insert_lists", "split"},
  };
  for (const auto& [name, value] : defaults) EXPECT_EQ(get(d.q(), name), value) << name;
}

TEST(BfqAttrs, StoresValidValues) {
  StubDriver d(bfq_opts());
  const std::vector<std::pair<std::string, std::string>> ok = {
      {"slice_idle", "0"},          {"slice_idle", "20"},         {"slice_idle_us", "2500"},
      {"fifo_expire_sync", "1"},    {"fifo_expire_async", "2147483647"}, {"back_seek_max", "0"},
      {"back_seek_penalty", "1"},   {"max_budget", "4096"},       {"max_budget", "0"},
      {"timeout_sync", "40"},       {"strict_guarantees", "1"},   {"low_latency", "0"},
      {"insert_lists", "locked"},   {"insert_lists", "split"},
  };
  for (const auto& [name, value] : ok) {
    ASSERT_TRUE(d.q().set_attr("queue/iosched/" + name, value)) << name << "=" << value;
    EXPECT_EQ(get(d.q(), name), value);
  }
}

TEST(BfqAttrs, SliceIdleUnitsAgree) {
  StubDriver d(bfq_opts());
  ASSERT_TRUE(d.q().set_attr("queue/iosched/slice_idle", "3"));
  EXPECT_EQ(get(d.q(), "slice_idle_us"), "3000");
  ASSERT_TRUE(d.q().set_attr("queue/iosched/slice_idle_us", "12500"));
  EXPECT_EQ(get(d.q(), "slice_idle"), "12");
}

TEST(BfqAttrs, RefusesBadValuesAndKeepsTheOldOne) {
  StubDriver d(bfq_opts());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"slice_idle", "-1"},         {"slice_idle", "abc"},        {"slice_idle_us", ""},
      {"fifo_expire_sync", "0"},    {"fifo_expire_async", "-2"},  {"back_seek_max", "2147483648"},
      {"back_seek_penalty", "0"},   {"max_budget", "-1"},         {"timeout_sync", "0"},
      {"strict_guarantees", "2"},   {"low_latency", "yes"},       {"insert_lists", "both"},
      {"timeout_sync", "1.5"},
  };
  for (const auto& [name, value] : bad) {
    const std::string before = get(d.q(), name);
    Status s = d.q().set_attr("queue/iosched/" + name, value);
    EXPECT_FALSE(s) << name << "=" << value;
    EXPECT_EQ(s.code(), EINVAL) << name;
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
    EXPECT_EQ(get(d.q(), name), before) << name;
  }
}

}  // namespace
}  // namespace blkmq::test
