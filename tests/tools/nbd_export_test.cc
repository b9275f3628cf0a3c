// `blkmq nbd` with several exports: each its own device, aliases that share
// a device with another weight, and bfq sharing that device between two
// connections by weight, measured with fio's nbd engine.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_process.h"

namespace blkmq::test {
namespace {

// Runs `blkmq nbd ARGS` (shell words); its exit status, *out its output
// (the server's lines, then the --run command's).
int run_cli(const std::string& args, std::string* out) {
  Shell r = sh(std::string(BLKMQ_CLI_PATH) + " nbd " + args, 60);
  *out = std::move(r.output);
  return r.status;
}

nlohmann::json json_in(const std::string& out) {
  const size_t at = out.find('{');
  return at == std::string::npos ? nlohmann::json() : nlohmann::json::parse(out.substr(at), nullptr, false);
}

TEST(NbdExports, EachExportHasItsOwnDeviceAndAliasesShareOne) {
  if (!have("nbdinfo")) GTEST_SKIP() << "nbdinfo not installed";
  const std::string sock = temp_socket("list");
  std::string out;
  ASSERT_EQ(run_cli("--socket " + sock +
                        " --name a --description first --size 64 --alias a-gold=300"
                        " --export b --size 128 --read-only --export c --size 32 --attr ro=1 --run 'nbdinfo --list --json \"$uri\"'",
                    &out),
            0);
  const auto j = json_in(out);
  ASSERT_EQ(j["exports"].size(), 4u) << out;
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& e : j["exports"]) by_name[e["export-name"]] = e;
  EXPECT_EQ(by_name["a"]["export-size"], 64 << 20);
  EXPECT_EQ(by_name["a"]["description"], "first");
  EXPECT_EQ(by_name["a-gold"]["export-size"], 64 << 20);
  EXPECT_EQ(by_name["b"]["export-size"], 128 << 20);
  EXPECT_EQ(by_name["b"]["is_read_only"], true);
  EXPECT_EQ(by_name["a"]["is_read_only"], false);
  EXPECT_EQ(by_name["c"]["is_read_only"], true) << "a read-only device is exported read-only";
}

TEST(NbdExports, BadExportOptionsAreRefused) {
  std::string out;
  EXPECT_EQ(run_cli("--socket " + temp_socket("dup") + " --name a --export a --run true", &out), 1);
  EXPECT_EQ(run_cli("--socket " + temp_socket("w0") + " --weight 0 --run true", &out), 1);
  EXPECT_EQ(run_cli("--socket " + temp_socket("w1") + " --weight 1001 --run true", &out), 1);
  EXPECT_EQ(run_cli("--socket " + temp_socket("al") + " --alias gold --run true", &out), 1);
  EXPECT_EQ(run_cli("--socket " + temp_socket("al2") + " --alias gold=abc --run true", &out), 1);
  EXPECT_EQ(run_cli("--socket " + temp_socket("g0") + " --group 'a b' --run true", &out), 1);
  EXPECT_NE(out.find("--group"), std::string::npos) << out;
  EXPECT_EQ(run_cli("--socket " + temp_socket("g1") + " --alias gold=100@/x/.. --run true", &out), 1);
  EXPECT_EQ(run_cli("--socket " + temp_socket("g2") + " --alias gold=@/x --run true", &out), 1);
}

// --group and --alias NAME=W@PATH (issue 28): each tenant's connections
// are charged to its own group, which io.stat and blkmq stat show apart.
TEST(NbdExports, EachTenantsConnectionsAreChargedToItsGroup) {
  if (!have("nbdsh")) GTEST_SKIP() << "nbdsh not installed";
  const std::string ctl = temp_socket("grp_ctl");
  CliServer srv({"--size=64", "--group=/tenant-a", "--alias=b=100@/tenant-b/batch", "--control=" + ctl});
  ASSERT_TRUE(srv.up());
  const std::string nbdsh = "PATH=/usr/bin:$PATH nbdsh -u ";
  ASSERT_EQ(sh(nbdsh + "'" + srv.uri() + "' -c 'h.pwrite(b\"a\" * 65536, 0)'").status, 0);
  ASSERT_EQ(sh(nbdsh + "'" + srv.uri("b") + "' -c 'h.pwrite(b\"b\" * 8192, 0); h.pread(4096, 65536)'").status, 0);
  const std::string attr = std::string(BLKMQ_CLI_PATH) + " attr --control " + ctl + " nullb0 ";
  const Shell a = sh(attr + "cgroup/tenant-a/io.stat");
  ASSERT_EQ(a.status, 0) << a.output;
  EXPECT_NE(a.output.find("rbytes=0 wbytes=65536 rios=0 wios=1 "), std::string::npos) << a.output;
  const Shell b = sh(attr + "cgroup/tenant-b/batch/io.stat");
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_NE(b.output.find("rbytes=4096 wbytes=8192 rios=1 wios=1 "), std::string::npos) << b.output;
  // The parent counts its child, as cgroup v2's io.stat.
  EXPECT_NE(sh(attr + "cgroup/tenant-b/io.stat").output.find("rbytes=4096 wbytes=8192"), std::string::npos);
  const Shell st = sh(std::string(BLKMQ_CLI_PATH) + " stat --control " + ctl + " 0.1 1");
  ASSERT_EQ(st.status, 0) << st.output;
  for (const char* g : {"\n  /tenant-a ", "\n  /tenant-b ", "\n  /tenant-b/batch "})
    EXPECT_NE(st.output.find(g), std::string::npos) << g << " in\n" << st.output;
  EXPECT_EQ(srv.stop(SIGTERM), 0);
}

// Two fio jobs, one connection each, read one bfq export sequentially
// under two names; returns (bytes of the weight-100 name, bytes of the
// weight-`w` name). The null device is the bottleneck: 4 hw tags, 2 ms per
// request (about 2000 requests a second, so the server needs little CPU
// even on a loaded machine), against 16 requests offered, with 64 scheduler tags so every
// request waits in bfq and bfq decides who gets the device. low_latency=0:
// weight raising would boost whichever queue bfq takes for interactive, by
// design. (A bandwidth cap (mbps) or too few scheduler tags would not show
// weights: capped requests wait in the dispatch list, and scarce scheduler
// tags are handed out first come, first served, in the kernel as here.)
std::pair<double, double> shares(unsigned w) {
  const std::string sock = temp_socket("weight"), job = testing::TempDir() + "blkmq_weight.fio";
  std::ofstream(job) << "[global]\nioengine=nbd\nrw=read\nbs=64k\niodepth=8\ntime_based=1\nruntime=3\n"
                     << "[low]\nuri=nbd+unix:///a?socket=" << sock << "\n"
                     << "[high]\nuri=nbd+unix:///a-w?socket=" << sock << "\n";
  std::string out;
  EXPECT_EQ(run_cli("--socket " + sock +
                        " --name a --size 1024 --irqmode 2 --completion_nsec 2000000 --hw_queue_depth 4"
                        " --scheduler bfq --attr queue/nr_requests=64 --attr queue/iosched/low_latency=0"
                        " --alias a-w=" + std::to_string(w) + " --run 'fio --output-format=json " + job + " 2>/dev/null'",
                    &out),
            0);
  std::remove(job.c_str());
  const auto j = json_in(out);
  if (!j.is_object()) return {0, 0};
  double low = 0, high = 0;
  for (const auto& jb : j["jobs"]) (jb["jobname"] == "low" ? low : high) = jb["read"]["io_bytes"].get<double>();
  std::printf("weight %u / weight 100: %.2f (%.0f / %.0f MiB)\n", w, high / low, high / (1 << 20), low / (1 << 20));
  return {low, high};
}

// Measured here: equal weights 1.00-1.09; 300 against 100 7.3-9.2 on an
// idle machine and 3.0-3.2 with two CPU hogs beside it. bfq's share
// depends on timing here, not on weight alone (docs/PERFORMANCE.md §9,
// issue 10), so the test asks only that the heavier connection clearly
// wins and that equal weights share alike.
TEST(NbdExports, BfqSharesTheDeviceByConnectionWeight) {
  if (!have("fio")) GTEST_SKIP() << "fio not installed";
  // Under a sanitizer the server, not the device, is the bottleneck (a
  // tenth of the throughput), so nothing waits in bfq: a measure of the
  // release build only.
  if (std::getenv("BLKMQ_STRESS_SCALE") && std::atof(std::getenv("BLKMQ_STRESS_SCALE")) < 1)
    GTEST_SKIP() << "a sanitizer build: the device is not the bottleneck";
  const auto [low1, high1] = shares(100);
  ASSERT_GT(low1, 0);
  EXPECT_GT(high1 / low1, 0.8);
  EXPECT_LT(high1 / low1, 1.25);
  const auto [low3, high3] = shares(300);
  ASSERT_GT(low3, 0);
  EXPECT_GT(high3 / low3, 1.5);
}

}  // namespace
}  // namespace blkmq::test
