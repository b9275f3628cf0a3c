// Parameter parsing and validation of the null driver: no core needed.
#include <gtest/gtest.h>

#include <set>

#include "blkmq/driver/tagset.h"
#include "drivers/null/null_params.h"
#include "support/device_test_util.h"

namespace blkmq::nullb {
namespace {

NullParams parse_ok(const ParamMap& m) { return devtest::parse_ok(parse_null_params, m); }
std::string parse_err(const ParamMap& m) { return devtest::parse_err(parse_null_params, m); }

TEST(NullParams, DefaultsAreNullBlks) {
  NullParams p = parse_ok({});
  EXPECT_EQ(p.submit_queues, 1u);
  EXPECT_EQ(p.poll_queues, 1u);
  EXPECT_EQ(p.hw_queue_depth, 64u);
  EXPECT_EQ(p.irqmode, IrqMode::softirq);
  EXPECT_EQ(p.completion_nsec, 10000u);
  EXPECT_FALSE(p.blocking);
  EXPECT_FALSE(p.shared_tags);
  EXPECT_FALSE(p.shared_tag_bitmap);
  EXPECT_EQ(p.no_sched, 0u);
  EXPECT_FALSE(p.memory_backed);
  EXPECT_EQ(p.bs, 512u);
  EXPECT_EQ(p.size_mib, 256000u);
  EXPECT_EQ(p.size_bytes(), 250ull << 30);
  EXPECT_EQ(p.mbps, 0u);
  EXPECT_FALSE(p.discard);
  EXPECT_EQ(p.cache_size_mib, 0u);
  EXPECT_TRUE(p.fua);
  EXPECT_FALSE(p.rotational);
  EXPECT_EQ(p.max_sectors, 2560u);
  EXPECT_FALSE(p.timeout_inject.configured);
  EXPECT_FALSE(p.requeue.configured);
  EXPECT_FALSE(p.init_hctx.configured);
  EXPECT_EQ(p.tag_set_flags(), 0u);
  EXPECT_FALSE(p.io_faults());
}

// The documented defaults, fed back through the parser, give the defaults.
TEST(NullParams, InfoDefaultsRoundTrip) {
  ParamMap m;
  auto infos = null_param_infos();
  for (const ParamInfo& i : infos) {
    EXPECT_FALSE(i.help.empty()) << i.name;
    m[i.name] = i.default_value;
  }
  NullParams from_infos = parse_ok(m);
  auto a = describe_null_params(from_infos);
  auto b = describe_null_params(NullParams{});
  EXPECT_EQ(a, b);
  // describe lists exactly the parameters the driver accepts.
  ASSERT_EQ(a.size(), infos.size());
  for (size_t i = 0; i < infos.size(); i++) EXPECT_EQ(a[i].first, infos[i].name);
}

TEST(NullParams, EveryParameterHasInfo) {
  std::set<std::string> names;
  for (const ParamInfo& i : null_param_infos()) names.insert(i.name);
  for (const char* n : {"submit_queues", "poll_queues", "hw_queue_depth", "irqmode",
                        "completion_nsec", "blocking", "shared_tags", "shared_tag_bitmap",
                        "no_sched", "memory_backed", "bs", "size", "mbps", "discard",
                        "cache_size", "fua", "rotational", "max_sectors", "home_node",
                        "timeout_inject", "requeue", "init_hctx"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
}

TEST(NullParams, ParsesValues) {
  NullParams p = parse_ok({{"submit_queues", "4"}, {"poll_queues", "0"}, {"hw_queue_depth", "1024"},
                           {"irqmode", "2"}, {"completion_nsec", "0"}, {"bs", "4096"},
                           {"size", "16"}, {"mbps", "100"}, {"rotational", "y"},
                           {"max_sectors", "256"}, {"home_node", "0"}});
  EXPECT_EQ(p.submit_queues, 4u);
  EXPECT_EQ(p.poll_queues, 0u);
  EXPECT_EQ(p.hw_queue_depth, 1024u);
  EXPECT_EQ(p.irqmode, IrqMode::timer);
  EXPECT_EQ(p.completion_nsec, 0u);
  EXPECT_EQ(p.bs, 4096u);
  EXPECT_EQ(p.size_bytes(), 16ull << 20);
  EXPECT_EQ(p.mbps, 100u);
  EXPECT_TRUE(p.rotational);
  EXPECT_EQ(p.max_sectors, 256u);
}

TEST(NullParams, TagSetFlags) {
  EXPECT_EQ(parse_ok({{"blocking", "1"}}).tag_set_flags(), kTagSetBlocking);
  EXPECT_EQ(parse_ok({{"shared_tag_bitmap", "1"}}).tag_set_flags(), kTagSetSharedTags);
  EXPECT_EQ(parse_ok({{"no_sched", "1"}}).tag_set_flags(), kTagSetNoSchedByDefault);
  EXPECT_EQ(parse_ok({{"no_sched", "2"}}).tag_set_flags(), kTagSetNoSched);
  EXPECT_EQ(parse_ok({{"memory_backed", "1"}}).tag_set_flags(), kTagSetBlocking);
}

TEST(NullParams, MemoryBackedDependencies) {
  NullParams p = parse_ok({{"memory_backed", "1"}, {"cache_size", "8"}, {"discard", "1"}});
  EXPECT_TRUE(p.blocking);
  EXPECT_EQ(p.cache_size_mib, 8u);
  EXPECT_TRUE(p.discard);
  // As null_blk: without data, a cache and discard mean nothing.
  NullParams q = parse_ok({{"cache_size", "8"}, {"discard", "1"}});
  EXPECT_FALSE(q.blocking);
  EXPECT_EQ(q.cache_size_mib, 0u);
  EXPECT_FALSE(q.discard);
}

TEST(NullParams, MaxSectorsRoundedToBlocks) {
  EXPECT_EQ(parse_ok({{"bs", "4096"}, {"max_sectors", "2561"}}).max_sectors, 2560u);
  std::string e = parse_err({{"bs", "4096"}, {"max_sectors", "4"}});
  EXPECT_NE(e.find("max_sectors"), std::string::npos) << e;
}

TEST(NullParams, RefusesBadValuesNamingTheParameter) {
  struct Case {
    const char* name;
    const char* value;
    const char* range;  // part of the message that states what is accepted
  };
  const Case cases[] = {
      {"submit_queues", "0", "from 1 to 4096"},      {"submit_queues", "x", "from 1 to 4096"},
      {"poll_queues", "-1", "from 0 to 4096"},       {"hw_queue_depth", "0", "from 1 to 10240"},
      {"hw_queue_depth", "10241", "from 1 to 10240"}, {"irqmode", "3", "2 = timer"},
      {"completion_nsec", "1e3", "from 0 to"},       {"blocking", "2", "1 or 0"},
      {"shared_tags", "maybe", "1 or 0"},            {"no_sched", "3", "no scheduler"},
      {"bs", "1000", "power of two"},                {"bs", "8192", "power of two"},
      {"bs", "256", "power of two"},                 {"size", "0", "from 1 MiB to 4 PiB"},
      {"mbps", "40961", "from 0 to 40960"},          {"max_sectors", "65536", "from 1 to 65535"},
      {"home_node", "-2", "from -1 to"},             {"irqmode", "", "2 = timer"},
      {"size", "12 ", "a number of MiB"},            {"timeout_inject", "1,2,3", "<interval>"},
      {"requeue", "1,101,0,1", "from 0 to 100 (percent)"}, {"init_hctx", "1,1,0,-2", "-1 = unlimited"},
  };
  for (const Case& c : cases) {
    std::string e = parse_err({{c.name, c.value}});
    EXPECT_NE(e.find(std::string("'") + c.name + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(c.range), std::string::npos) << c.name << "=" << c.value << ": " << e;
  }
}

// null's sizes are MiB when bare (null_blk's unit) and take fio's
// suffixes as bytes; "64M" was refused as "not an integer" with no unit
// named (issue 27). A suffixed size must be whole MiB.
TEST(NullParams, SizesTakeSuffixesAndABareNumberIsMib) {
  const struct {
    const char* value;
    uint64_t mib;
  } ok[] = {{"1024", 1024}, {"64M", 64}, {"64m", 64}, {"2G", 2048}, {"2GiB", 2048}, {"1t", 1u << 20},
            {"1048576k", 1024}};
  for (const auto& c : ok) {
    const NullParams p = parse_ok({{"size", c.value}, {"cache_size", c.value}, {"memory_backed", "1"}});
    EXPECT_EQ(p.size_mib, c.mib) << c.value;
    EXPECT_EQ(p.cache_size_mib, c.mib) << c.value;
  }
  for (const char* bad : {"1000k", "0M", "1.5G", "64X", "M"}) {
    const std::string e = parse_err({{"size", bad}});
    EXPECT_NE(e.find("expected a number of MiB (1024 is 1 GiB), or one with a suffix"), std::string::npos)
        << bad << ": " << e;
  }
}

TEST(NullParams, UnknownParameterIsNamed) {
  std::string e = parse_err({{"gb", "1"}});
  EXPECT_NE(e.find("'gb'"), std::string::npos) << e;
  EXPECT_NE(e.find("submit_queues"), std::string::npos) << e;  // lists what is known
}

TEST(NullParams, CoreAttributesAreSkipped) {
  NullParams p = parse_ok({{"attr:queue/scheduler", "none"}, {"irqmode", "0"}});
  EXPECT_EQ(p.irqmode, IrqMode::none);
}

TEST(NullParams, FaultStrings) {
  NullParams p = parse_ok({{"timeout_inject", "10,50,4096,-1"}, {"requeue", "1,100,0,3"}});
  EXPECT_TRUE(p.io_faults());
  EXPECT_EQ(p.timeout_inject.interval, 10u);
  EXPECT_EQ(p.timeout_inject.probability, 50u);
  EXPECT_EQ(p.timeout_inject.space, 4096u);
  EXPECT_EQ(p.timeout_inject.times, -1);
  EXPECT_EQ(p.requeue.times, 3);
  // init_hctx alone does not slow the I/O path down.
  EXPECT_FALSE(parse_ok({{"init_hctx", "1,100,0,1"}}).io_faults());
  auto d = describe_null_params(p);
  bool found = false;
  for (auto& [k, v] : d) {
    if (k == "timeout_inject") {
      EXPECT_EQ(v, "10,50,4096,-1");
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace blkmq::nullb
