// `blkmq bench --zonemode=zbd`: fio's own zoned tests (t/zbd/test-zbd-support)
// that apply to one device, as bench runs on a zoned null device (and on
// emulated zones): option checks (test 2), reads of empty zones and past
// the write pointer (3, 4), sequential and random writes with verify (5,
// 8, 31), the open-zone limits of the device and the jobs (12, 29), jobs
// sharing zones (24, 28), zone resets on wrap and by threshold (33), and
// emulated zones with a capacity (on a device without zones).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/bench_run.h"

namespace bench {
namespace {

using nlohmann::json;

std::string temp_json(const std::string& stem) { return bench::temp_path("blkmq_zbd", stem + ".json"); }

// A zoned null device: 512 MiB in 16 MiB zones (32), two conventional.
std::vector<std::string> zoned(std::vector<std::string> extra) {
  std::vector<std::string> a = {"--driver=null",  "--zoned=1",       "--null.size=512", "--zone_size=16",
                                "--zone_nr_conv=2", "--memory_backed=1", "--zonemode=zbd"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

json run_json(std::vector<std::string> args, const std::string& stem) {
  const std::string out = temp_json(stem);
  args.push_back("--output-format=json");
  args.push_back("--output=" + out);
  EXPECT_EQ(run_bench(args), 0);
  return read_json(out);
}

TEST(BenchZbd, InvalidZoneOptionsAreRefused) {
  std::string err;
  EXPECT_NE(run_bench(zoned({"--name=x", "--rw=write", "--zonesize=8m"}), &err), 0);
  EXPECT_NE(err.find("differs from the device's zone size"), std::string::npos) << err;
  EXPECT_NE(run_bench(zoned({"--name=x", "--rw=write", "--zonerange=8m"}), &err), 0);
  EXPECT_NE(run_bench(zoned({"--name=x", "--rw=write", "--zonecapacity=8m"}), &err), 0);
  EXPECT_NE(run_bench(zoned({"--name=x", "--rw=write", "--zonemode=strided"}), &err), 0);
  EXPECT_NE(run_bench(zoned({"--name=x", "--rw=write", "--bs=32m"}), &err), 0);
  EXPECT_NE(run_bench(zoned({"--name=x", "--rw=write", "--direct=0"}), &err), 0);
  EXPECT_NE(err.find("direct=1"), std::string::npos) << err;
  // The device's open limit, and the job's within it.
  EXPECT_NE(run_bench(zoned({"--zone_max_open=4", "--name=x", "--rw=randwrite", "--max_open_zones=8"}), &err), 0);
  EXPECT_NE(err.find("ignore_zone_limits"), std::string::npos) << err;
  EXPECT_NE(run_bench(zoned({"--name=x", "--rw=randwrite", "--max_open_zones=4", "--job_max_open_zones=8"}), &err),
            0);
  // A device without zones needs zonesize.
  EXPECT_NE(run_bench({"--driver=null", "--null.size=64", "--zonemode=zbd", "--name=x", "--rw=write"}, &err), 0);
  EXPECT_NE(err.find("zonesize"), std::string::npos) << err;
}

// test 3 and 4: nothing written, nothing to read below the pointers; with
// read_beyond_wp the reads go.
TEST(BenchZbd, ReadsOfEmptyZonesReadNothingUnlessBeyondTheWritePointer) {
  json j = run_json(zoned({"--name=r", "--rw=randread", "--offset=32m", "--size=64m"}), "empty");
  EXPECT_EQ(j["jobs"][0]["error"], 0);
  EXPECT_EQ(j["jobs"][0]["read"]["io_bytes"], 0u);
  j = run_json(zoned({"--name=r", "--rw=randread", "--offset=32m", "--size=64m", "--read_beyond_wp=1"}), "beyond");
  EXPECT_EQ(j["jobs"][0]["read"]["io_bytes"], 64u << 20);
}

// test 5 and 31: sequential writes fill every sequential zone of the
// region in order, and read back verified.
TEST(BenchZbd, SequentialWritesFillTheZonesAndVerify) {
  json j = run_json(zoned({"--name=w", "--rw=write", "--bs=64k", "--iodepth=16", "--offset=32m", "--size=128m",
                           "--verify=crc32c"}),
                    "seq");
  EXPECT_EQ(j["jobs"][0]["error"], 0) << j["jobs"][0].value("error_msg", "");
  EXPECT_EQ(j["jobs"][0]["write"]["io_bytes"], 128u << 20);
  EXPECT_EQ(j["jobs"][0]["read"]["io_bytes"], 128u << 20);
  EXPECT_EQ(j["jobs"][0]["zone_resets"], 0u);
}

// test 8: random writes land at the pointers of random zones; verified.
TEST(BenchZbd, RandomWritesGoAtTheWritePointersAndVerify) {
  json j = run_json(zoned({"--name=w", "--rw=randwrite", "--bs=16k", "--iodepth=8", "--offset=32m", "--size=64m",
                           "--verify=crc32c"}),
                    "rand");
  EXPECT_EQ(j["jobs"][0]["error"], 0) << j["jobs"][0].value("error_msg", "");
  EXPECT_EQ(j["jobs"][0]["read"]["io_bytes"], j["jobs"][0]["write"]["io_bytes"]);
}

// test 12 and 29: with the device's open and active limits at 4, random
// writes across the device stay within them (no zone resource error),
// and so do two jobs of at most 2 open zones each.
TEST(BenchZbd, RandomWritesKeepTheOpenZoneLimits) {
  json j = run_json(zoned({"--zone_max_open=4", "--zone_max_active=4", "--name=w", "--rw=randwrite", "--bs=4k",
                           "--iodepth=16", "--runtime=1", "--time_based"}),
                    "limits");
  EXPECT_EQ(j["jobs"][0]["error"], 0) << j["jobs"][0].value("error_msg", "");
  EXPECT_GT(j["jobs"][0]["write"]["io_bytes"], 0u);
  j = run_json(zoned({"--zone_max_open=4", "--zone_max_active=4", "--name=w", "--rw=randwrite", "--bs=4k",
                      "--iodepth=8", "--numjobs=2", "--job_max_open_zones=2", "--runtime=1", "--time_based"}),
               "job_limits");
  ASSERT_EQ(j["jobs"].size(), 2u);
  for (const json& job : j["jobs"]) EXPECT_EQ(job["error"], 0) << job.value("error_msg", "");
}

// test 24 and 28: jobs writing the same zones at once, sequential and
// random, share the pointers.
TEST(BenchZbd, JobsShareTheZones) {
  json j = run_json(zoned({"--name=w", "--rw=randwrite", "--bs=8k", "--iodepth=8", "--numjobs=3", "--offset=64m",
                           "--size=128m", "--runtime=1", "--time_based"}),
                    "shared");
  ASSERT_EQ(j["jobs"].size(), 3u);
  for (const json& job : j["jobs"]) EXPECT_EQ(job["error"], 0) << job.value("error_msg", "");
}

// A sequential writer that wraps resets each zone before writing it again;
// test 33: past the threshold, every (1 / frequency)th write resets first.
TEST(BenchZbd, ZoneResetsAreCounted) {
  json j = run_json(zoned({"--name=w", "--rw=write", "--bs=1m", "--offset=32m", "--size=64m", "--runtime=1",
                           "--time_based"}),
                    "wrap");
  const uint64_t written = j["jobs"][0]["write"]["io_bytes"];
  // Every 16 MiB after the first 64 MiB was a reset.
  EXPECT_EQ(j["jobs"][0]["zone_resets"].get<uint64_t>(), (written - 1) / (16u << 20) + 1 - 4);
  j = run_json(zoned({"--name=w", "--rw=randwrite", "--bs=4k", "--offset=32m", "--size=32m", "--zone_reset_threshold=0",
                      "--zone_reset_frequency=0.5"}),
               "freq");
  EXPECT_EQ(j["jobs"][0]["error"], 0);
  // Every other write resets its zone first, unless the zone is empty
  // (two zones: often the other one, reset by the write before).
  const uint64_t writes = j["jobs"][0]["write"]["total_ios"];
  const uint64_t resets = j["jobs"][0]["zone_resets"];
  EXPECT_GT(resets, writes / 4) << writes;
  EXPECT_LE(resets, writes / 2) << writes;
}

// On a device without zones the zones are fio's emulation: zonecapacity
// of each zonesize written, then reset.
TEST(BenchZbd, EmulatedZonesWithACapacity) {
  json j = run_json({"--driver=null", "--null.size=64", "--zonemode=zbd", "--zonesize=16m", "--zonecapacity=8m",
                     "--name=w", "--rw=write", "--bs=1m", "--size=64m"},
                    "emulated");
  EXPECT_EQ(j["jobs"][0]["error"], 0);
  // Four zones of which 8 MiB each take writes: 64 writes of 1 MiB fill
  // them all, wrap, reset each, and fill them again.
  EXPECT_EQ(j["jobs"][0]["write"]["io_bytes"], 64u << 20);
  EXPECT_EQ(j["jobs"][0]["zone_resets"], 4u);
}

}  // namespace
}  // namespace bench
