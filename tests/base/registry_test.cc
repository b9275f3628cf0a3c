// base::Registry, the one registry behind register_device_driver() and
// register_elevator(): built-ins by rank, one duplicate rule (EEXIST naming
// the thing), aliases, the kind's own check.
#include "base/registry.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

namespace blkmq::base {
namespace {

struct Plain {
  std::string name;
  int value = 0;
};

struct Aliased {
  std::string name;
  std::string alias;
};

const Builtin<Plain> kThird{3, [] { return Plain{"third", 3}; }};
const Builtin<Plain> kFirst{1, [] { return Plain{"first", 1}; }};
const Builtin<Plain> kAlsoFirst{1, [] { return Plain{"also-first", 11}; }};
const Builtin<Plain>* const kTable[] = {&kThird, &kFirst, &kAlsoFirst};

Status needs_positive_value(const Plain& p) {
  if (p.value <= 0) return Status::invalid("plain '" + p.name + "': value must be positive");
  return Status::OK();
}

TEST(Registry, BuiltinsComeFirstByRankThenTableOrder) {
  Registry<Plain> r("plain", kTable, nullptr);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"first", "also-first", "third"}));
  ASSERT_NE(r.find("third"), nullptr);
  EXPECT_EQ(r.find("third")->value, 3);
  EXPECT_EQ(r.find("fourth"), nullptr);
  static const Plain fourth{"fourth", 4};
  ASSERT_TRUE(r.add(&fourth));
  EXPECT_EQ(r.names().back(), "fourth");
  EXPECT_EQ(r.find("fourth"), &fourth);
}

TEST(Registry, ATakenNameIsRefusedWithEexistNamingIt) {
  Registry<Plain> r("driver", kTable, nullptr);
  static const Plain again{"first", 5};
  const Status st = r.add(&again);
  EXPECT_EQ(st.code(), EEXIST);
  EXPECT_EQ(st.message(), "driver 'first' is already registered");
  EXPECT_EQ(r.find("first")->value, 1) << "the first one stays";
  static const Plain mine{"mine", 6};
  ASSERT_TRUE(r.add(&mine));
  EXPECT_EQ(r.add(&mine).code(), EEXIST) << "the same entry twice";
  EXPECT_EQ(r.add(nullptr).code(), EINVAL);
}

TEST(Registry, TheKindsCheckAppliesToEveryEntry) {
  Registry<Plain> r("plain", kTable, &needs_positive_value);
  static const Plain zero{"zero", 0};
  const Status st = r.add(&zero);
  EXPECT_EQ(st.code(), EINVAL);
  EXPECT_EQ(st.message(), "plain 'zero': value must be positive");
  EXPECT_EQ(r.find("zero"), nullptr);
}

TEST(Registry, AnAliasFindsItsEntryAndMayNotShadowAnother) {
  Registry<Aliased> r("elevator", {}, nullptr);
  static const Aliased dl{"mq-deadline", "deadline"};
  static const Aliased ky{"kyber", ""};
  ASSERT_TRUE(r.add(&dl));
  ASSERT_TRUE(r.add(&ky));
  EXPECT_EQ(r.find("deadline"), &dl);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"mq-deadline", "kyber"})) << "aliases are not listed";
  static const Aliased named_as_alias{"deadline", ""};
  EXPECT_EQ(r.add(&named_as_alias).message(), "elevator 'deadline' is already registered");
  static const Aliased alias_of_another{"fifo", "kyber"};
  const Status st = r.add(&alias_of_another);
  EXPECT_EQ(st.code(), EEXIST);
  EXPECT_EQ(st.message(), "elevator 'fifo': its alias 'kyber' names elevator 'kyber'");
}

TEST(RegistryDeathTest, ABrokenBuiltinStopsAtFirstUse) {
  static const Builtin<Plain> dup{0, [] { return Plain{"first", 7}; }};
  static const Builtin<Plain>* const table[] = {&kFirst, &dup};
  EXPECT_DEATH(Registry<Plain>("plain", table, nullptr), "built-in plain 'first' cannot register");
}

}  // namespace
}  // namespace blkmq::base
