// fio's json+ output: the clat histogram bins, keyed as fio keys them, so
// fio's own tools (fio_jsonplus_clat2csv) read our output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/options.h"
#include "bench/report.h"
#include "bench/stats.h"
#include "support/bench_run.h"

namespace bench {
namespace {

std::string temp_path(const std::string& stem) { return bench::temp_path("blkmq_jsonplus", stem); }

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// fio's plat_idx_to_val, written from its definition (the middle of the
// bucket, computed in double and truncated), to check ours against.
uint64_t fio_plat_idx_to_val(unsigned idx) {
  constexpr unsigned kBits = 6, kVal = 64;
  if (idx < (kVal << 1)) return idx;
  const unsigned error_bits = (idx >> kBits) - 1;
  const uint64_t base = uint64_t{1} << (error_bits + kBits);
  const unsigned k = idx % kVal;
  return base + static_cast<uint64_t>((k + 0.5) * static_cast<double>(uint64_t{1} << error_bits));
}

TEST(JsonPlus, BucketValuesAreFiosPlatValues) {
  for (unsigned idx = 0; idx < 29 * 64; ++idx) {
    ASSERT_EQ(LatHistogram::value(idx), fio_plat_idx_to_val(idx)) << idx;
    ASSERT_EQ(LatHistogram::index(LatHistogram::value(idx)), idx) << idx;
  }
  // Keys real fio 3.33 runs emitted: each is one of our bucket values.
  for (uint64_t v : {10ull, 20ull, 2544ull, 12096ull, 168960ull, 214016ull, 329728ull, 1003520ull, 1089536ull})
    EXPECT_EQ(LatHistogram::value(LatHistogram::index(v)), v) << v;
}

TEST(JsonPlus, BinsOnlyWithPlusAndOnlyWithSamples) {
  RunReport r;
  JobResult j;
  j.name = "x";
  j.runtime_ns = 1000000000;
  DirStats& d = j.dir[kRead];
  for (uint64_t v : {5ull, 5ull, 100ull, 1000ull, 1000000ull}) {
    d.ios++;
    d.bytes += 4096;
    d.clat.add(v);
    d.clat_hist.add(v);
  }
  r.jobs = {j};
  const auto plain = to_json(r);
  EXPECT_FALSE(plain["jobs"][0]["read"]["clat_ns"].contains("bins"));
  const auto plus = to_json(r, true);
  const auto& bins = plus["jobs"][0]["read"]["clat_ns"]["bins"];
  uint64_t total = 0;
  for (const auto& [key, count] : bins.items()) {
    const uint64_t v = std::stoull(key);
    EXPECT_EQ(LatHistogram::value(LatHistogram::index(v)), v) << key;
    total += count.get<uint64_t>();
  }
  EXPECT_EQ(total, 5u);
  EXPECT_EQ(bins["5"], 2u);
  EXPECT_FALSE(plus["jobs"][0]["read"]["slat_ns"].contains("bins"));
  EXPECT_FALSE(plus["jobs"][0]["write"]["clat_ns"].contains("bins"));  // no writes
}

TEST(JsonPlus, OutputFormatTakesFiosNamesAndLists) {
  BenchConfig cfg;
  JobSpec job;
  ASSERT_TRUE(apply_option(cfg, job, "output-format", "json+"));
  EXPECT_EQ(cfg.output_format, OutputFormat::json_plus);
  ASSERT_TRUE(apply_option(cfg, job, "output-format", "normal,json"));
  EXPECT_TRUE(has_format(cfg.output_format, OutputFormat::normal));
  EXPECT_TRUE(has_format(cfg.output_format, OutputFormat::json));
  EXPECT_FALSE(has_format(cfg.output_format, OutputFormat::json_plus));
  EXPECT_FALSE(apply_option(cfg, job, "output-format", "xml"));
  EXPECT_FALSE(apply_option(cfg, job, "output-format", "json,"));
}

// Every CSV row: nsec, then count/cumulative/percentile for each of the nine
// direction x latency columns (empty where that column has no bin).
struct CsvRow {
  uint64_t nsec = 0;
  std::vector<std::string> cells;
};

std::vector<CsvRow> read_csv(const std::string& path, std::string* header) {
  std::ifstream f(path);
  std::vector<CsvRow> rows;
  std::string line;
  if (!std::getline(f, *header)) return rows;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    CsvRow row;
    std::stringstream ss(line);
    std::string cell;
    std::getline(ss, cell, ',');
    row.nsec = std::stoull(cell);
    while (std::getline(ss, cell, ',')) row.cells.push_back(cell);
    rows.push_back(row);
  }
  return rows;
}

TEST(JsonPlus, FioJsonplusClat2csvReadsOurOutput) {
  const char* tool = "/usr/bin/fio_jsonplus_clat2csv";
  if (access(tool, X_OK) != 0) GTEST_SKIP() << tool << " not installed (Debian package fio)";
  const std::string out = temp_path("run.json");
  ASSERT_EQ(run_bench({"--name=x", "--rw=randrw", "--bs=4k", "--size=4m", "--iodepth=4",
                       "--output-format=json+", "--output=" + out}),
            0);
  const nlohmann::json j = nlohmann::json::parse(read_text(out));
  const std::string csv = temp_path("clat.csv");
  const std::string csv0 = temp_path("clat_job0.csv");
  const std::string cmd = std::string(tool) + " " + out + " " + csv + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ASSERT_EQ(std::system((cmd + " --validate").c_str()), 0) << "validate";
  std::string header;
  std::vector<CsvRow> rows = read_csv(csv0, &header);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(header.rfind("nsec, read_slat_ns_count", 0), 0u) << header;
  // Rows ascend in nsec; the clat columns end at N reads/writes, 100 %.
  const uint64_t n_read = j["jobs"][0]["read"]["clat_ns"]["N"], n_write = j["jobs"][0]["write"]["clat_ns"]["N"];
  uint64_t last_read = 0, last_write = 0;
  double last_pct = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(rows[i].nsec, rows[i - 1].nsec);
    }
    ASSERT_GE(rows[i].cells.size(), 27u);
    // read_clat is columns 3..5 of the nine triples, write_clat 12..14.
    if (rows[i].cells[4].find_first_not_of(' ') != std::string::npos) {
      last_read = std::stoull(rows[i].cells[4]);
      last_pct = std::stod(rows[i].cells[5]);
    }
    if (rows[i].cells[13].find_first_not_of(' ') != std::string::npos) last_write = std::stoull(rows[i].cells[13]);
  }
  EXPECT_EQ(last_read, n_read);
  EXPECT_EQ(last_write, n_write);
  EXPECT_DOUBLE_EQ(last_pct, 1.0);
  std::remove(out.c_str());
  std::remove(csv0.c_str());
}

}  // namespace
}  // namespace bench
