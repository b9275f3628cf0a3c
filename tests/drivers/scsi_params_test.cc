// Parameter parsing and config validation of the scsi driver: no I/O.
#include <gtest/gtest.h>

#include <algorithm>

#include "blkmq/blkmq.h"
#include "drivers/scsi/scsi_params.h"
#include "support/device_test_util.h"

namespace blkmq::scsi {
namespace {

ScsiParams parse_ok(const ParamMap& m) { return devtest::parse_ok(parse_scsi_params, m); }
std::string parse_err(const ParamMap& m) { return devtest::parse_err(parse_scsi_params, m); }

TEST(ScsiParams, Defaults) {
  ScsiParams p = parse_ok({});
  EXPECT_EQ(p.host.can_queue, 64u);
  EXPECT_EQ(p.host.nr_hw_queues, 1u);
  EXPECT_EQ(p.host.latency_us, 0u);
  EXPECT_FALSE(p.host.no_sched);
  EXPECT_FALSE(p.host.host_tagset);
  EXPECT_FALSE(p.host.blocking);
  EXPECT_EQ(p.lun.queue_depth, 32u);
  EXPECT_EQ(p.lun.backing, ScsiBacking::null);
  EXPECT_EQ(p.lun.size, 250ull << 30);
  EXPECT_EQ(p.lun.bs, 512u);
  EXPECT_EQ(p.luns, 1u);
}

TEST(ScsiParams, EveryParameterIsRead) {
  ScsiParams p = parse_ok({{"can_queue", "128"}, {"queue_depth", "7"}, {"nr_hw_queues", "2"},
                           {"luns", "3"}, {"backing", "memory"}, {"size", "64M"}, {"bs", "4096"},
                           {"latency_us", "25"}, {"no_sched", "1"}, {"host_tagset", "y"},
                           {"attr:queue/nomerges", "2"}});
  EXPECT_EQ(p.host.can_queue, 128u);
  EXPECT_EQ(p.lun.queue_depth, 7u);
  EXPECT_EQ(p.host.nr_hw_queues, 2u);
  EXPECT_EQ(p.luns, 3u);
  EXPECT_EQ(p.lun.backing, ScsiBacking::memory);
  EXPECT_TRUE(p.host.blocking) << "memory backing locks and allocates in queue_rq";
  EXPECT_EQ(p.lun.size, 64ull << 20);
  EXPECT_EQ(p.lun.bs, 4096u);
  EXPECT_EQ(p.host.latency_us, 25u);
  EXPECT_TRUE(p.host.no_sched);
  EXPECT_TRUE(p.host.host_tagset);
}

// fio's size syntax (base/parse.h), bytes when bare, at least 1 MiB.
TEST(ScsiParams, SizeSuffixes) {
  const struct {
    const char* text;
    uint64_t bytes;
  } ok[] = {{"1048576", 1ull << 20}, {"1024k", 1ull << 20}, {"3M", 3ull << 20}, {"2G", 2ull << 30},
            {"2GiB", 2ull << 30},    {"2GB", 2ull << 30},    {"1T", 1ull << 40}, {"1p", 1ull << 50}};
  for (const auto& c : ok) EXPECT_EQ(parse_ok({{"size", c.text}}).lun.size, c.bytes) << c.text;
  for (const char* bad : {"", "G", "1X", "1Gx", "-1", "1.5G", "99999999999P", " 1", "4096", "4k"}) {
    const std::string e = parse_err({{"size", bad}});
    EXPECT_EQ(e.rfind(std::string("scsi: parameter 'size': '") + bad + "' ", 0), 0u) << bad << ": " << e;
    EXPECT_NE(e.find("expected a number of bytes, or one with a suffix k, m, g"), std::string::npos) << e;
    EXPECT_NE(e.find("at least 1 MiB"), std::string::npos) << e;
  }
}

TEST(ScsiParams, BadValuesAreRefusedByName) {
  struct Case {
    const char* name;
    const char* value;
  };
  const Case cases[] = {
      {"can_queue", "0"},     {"can_queue", "10241"}, {"can_queue", "x"},
      {"queue_depth", "0"},   {"queue_depth", "-3"},  {"nr_hw_queues", "0"},
      {"luns", "0"},          {"luns", "257"},        {"backing", "disk"},
      {"size", "abc"},        {"size", "0"},          {"size", "1000"},
      {"bs", "1000"},         {"bs", "256"},          {"bs", "8192"},
      {"latency_us", "-1"},   {"latency_us", "10000001"}, {"no_sched", "2"},
      {"host_tagset", "maybe"},
  };
  for (const Case& c : cases) {
    std::string msg = parse_err({{c.name, c.value}});
    EXPECT_NE(msg.find(std::string("'") + c.name + "'"), std::string::npos)
        << c.name << "=" << c.value << ": " << msg;
  }
  // The size must hold whole blocks of the chosen size.
  EXPECT_NE(parse_err({{"bs", "4096"}, {"size", "6k"}}).find("'size'"), std::string::npos);
  EXPECT_NE(parse_err({{"colour", "red"}}).find("unknown parameter 'colour'"), std::string::npos);
}

TEST(ScsiParams, DriverIsRegisteredWithItsParameters) {
  auto drivers = device_drivers();
  EXPECT_NE(std::find(drivers.begin(), drivers.end(), "scsi"), drivers.end());
  auto infos = device_params("scsi");
  for (const char* name : {"can_queue", "queue_depth", "nr_hw_queues", "luns", "backing", "size",
                           "bs", "latency_us", "no_sched", "host_tagset"}) {
    auto it = std::find_if(infos.begin(), infos.end(), [&](const ParamInfo& i) { return i.name == name; });
    EXPECT_NE(it, infos.end()) << name;
    if (it != infos.end()) {
      EXPECT_FALSE(it->help.empty()) << name;
    }
  }
  // Every default parses back to the defaults.
  ParamMap m;
  for (const ParamInfo& i : infos) m[i.name] = i.default_value;
  ScsiParams p = parse_ok(m);
  EXPECT_EQ(p.lun.size, ScsiLunConfig{}.size);
  EXPECT_EQ(p.host.can_queue, ScsiHostConfig{}.can_queue);
}

TEST(ScsiParams, CreateDeviceRefusesBadValues) {
  auto r = create_device("scsi", {{"queue_depth", "0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'queue_depth'"), std::string::npos);
  auto u = create_device("scsi", {{"depth", "4"}});
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("depth"), std::string::npos);
}

TEST(ScsiParams, LibraryConfigsAreValidated) {
  ScsiHostConfig h;
  h.can_queue = 0;
  EXPECT_FALSE(ScsiHost::create(h).ok());
  h = ScsiHostConfig{};
  auto host = ScsiHost::create(h);
  ASSERT_TRUE(host.ok());
  ScsiLunConfig l;
  l.queue_depth = 0;
  EXPECT_FALSE((*host)->add_lun(l).ok());
  l = ScsiLunConfig{};
  l.backing = ScsiBacking::memory;
  auto m = (*host)->add_lun(l);
  ASSERT_FALSE(m.ok()) << "a memory LUN needs a blocking host";
  EXPECT_NE(m.status().message().find("blocking"), std::string::npos);
  EXPECT_EQ((*host)->nr_luns(), 0u);
}

}  // namespace
}  // namespace blkmq::scsi
