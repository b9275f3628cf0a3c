// Latency bookkeeping of `blkmq bench` end to end: completions are stamped
// when the job reaps them (as fio does), so a bio completed inline during
// submission still has clat > 0 and lat = slat + clat.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/bench_run.h"

namespace bench {
namespace {

std::string temp_path(const std::string& stem) { return bench::temp_path("blkmq_lat", stem); }

// irqmode=0 completes every bio inside submit_bio, before submit_batch has
// stamped the batch: the case where clat used to be 0 and lat < slat.
TEST(BenchLatency, InlineCompletionsHaveClatAndLatIsSlatPlusClat) {
  const std::string out = temp_path("inline.json");
  ASSERT_EQ(run_bench({"--driver=null", "--irqmode=0", "--name=x", "--rw=randread", "--bs=4k", "--size=8m",
                       "--iodepth=8", "--iodepth_batch_submit=4", "--iodepth_batch_complete=4",
                       "--output-format=json", "--output=" + out}),
            0);
  const nlohmann::json rd = read_json(out)["jobs"][0]["read"];
  const double slat = rd["slat_ns"]["mean"].get<double>();
  const double clat = rd["clat_ns"]["mean"].get<double>();
  const double lat = rd["lat_ns"]["mean"].get<double>();
  EXPECT_EQ(rd["clat_ns"]["N"].get<uint64_t>(), 2048u);
  EXPECT_GT(clat, 0.0);
  EXPECT_GE(lat, slat);
  EXPECT_GE(rd["lat_ns"]["min"].get<uint64_t>(), rd["slat_ns"]["min"].get<uint64_t>());
  // Per I/O lat = slat + clat exactly, so the means add up to rounding.
  EXPECT_NEAR(lat, slat + clat, 1e-6 * lat + 0.01);
  std::remove(out.c_str());
}

}  // namespace
}  // namespace bench
