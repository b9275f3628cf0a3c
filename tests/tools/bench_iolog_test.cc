// fio's bw/lat/iops logs: file names, line format, averaging windows, and
// that fio's own plotting tools (fio_generate_plots, fio2gnuplot) take them.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/iolog.h"
#include "support/bench_run.h"

namespace bench {
namespace {

// A fresh directory per test: the tools glob for *_bw.*.log and so on.
std::string temp_dir(const std::string& stem) {
  std::string d = ::testing::TempDir() + "blkmq_iolog_" + std::to_string(getpid()) + "_" + stem;
  std::system(("rm -rf '" + d + "'").c_str());
  mkdir(d.c_str(), 0755);
  return d;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A log line's columns, or empty if it is not "int, int, ...".
std::vector<uint64_t> parse_line(const std::string& line) {
  std::vector<uint64_t> cols;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) {
    size_t pos = 0;
    try {
      cols.push_back(std::stoull(cell, &pos));
    } catch (...) {
      return {};
    }
  }
  return cols;
}

std::vector<std::vector<uint64_t>> read_log(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::vector<uint64_t>> lines;
  std::string line;
  while (std::getline(f, line)) lines.push_back(parse_line(line));
  return lines;
}

bool have(const char* path) { return access(path, X_OK) == 0; }

// Without log_avg_msec every I/O is a line in every log, the same I/O on the
// same line number, so lat = slat + clat line by line.
TEST(IoLog, EveryIoIsALine) {
  const std::string dir = temp_dir("per_io");
  const std::string p = dir + "/x";
  ASSERT_EQ(run_bench({"--name=x", "--rw=randrw", "--bs=4k", "--size=1m", "--iodepth=4", "--log_offset=1",
                       "--write_lat_log=" + p, "--write_bw_log=" + p, "--write_iops_log=" + p, "--output=/dev/null"}),
            0);
  auto lat = read_log(p + "_lat.1.log"), clat = read_log(p + "_clat.1.log"), slat = read_log(p + "_slat.1.log");
  auto bw = read_log(p + "_bw.1.log"), iops = read_log(p + "_iops.1.log");
  ASSERT_EQ(lat.size(), 256u);
  ASSERT_EQ(clat.size(), 256u);
  ASSERT_EQ(slat.size(), 256u);
  ASSERT_EQ(bw.size(), 256u);
  ASSERT_EQ(iops.size(), 256u);
  for (size_t i = 0; i < lat.size(); ++i) {
    ASSERT_EQ(lat[i].size(), 6u) << "line " << i;  // time, value, ddir, bs, offset, prio
    EXPECT_LE(lat[i][2], 1u);
    EXPECT_EQ(lat[i][3], 4096u);
    EXPECT_EQ(lat[i][4] % 4096, 0u);
    EXPECT_LT(lat[i][4], 1u << 20);
    EXPECT_EQ(lat[i][1], slat[i][1] + clat[i][1]) << "line " << i;
    EXPECT_GT(clat[i][1], 0u);
    EXPECT_EQ(iops[i][1], 1u);
    EXPECT_EQ(bw[i][1], 4096ull * 1000000 / clat[i][1]);
    EXPECT_EQ(bw[i][4], lat[i][4]);
  }
}

// The window arithmetic on a fake clock: a window closes at the first reap
// after its end, the next starts on a multiple of log_avg_msec, the last
// partial one is logged for the latencies only.
TEST(IoLog, AveragedWindows) {
  const std::string dir = temp_dir("windows");
  LogOptions o;
  o.bw_prefix = o.lat_prefix = o.iops_prefix = dir + "/w";
  o.avg_msec = 100;
  IoLog log;
  log.init(o, 4096, false);
  const uint64_t ms = 1000000, t0 = 5000 * ms;
  log.reset(t0);
  for (int i = 0; i < 50; ++i) log.add(t0 + 2 * i * ms, 0, 0, 10, 90, 100);  // reads, first 100 ms
  log.add(t0 + 99 * ms, 1, 0, 20, 180, 200);                                // one write
  log.tick(t0 + 99 * ms);                                                   // window not over
  EXPECT_EQ(log.samples(), 0u);
  log.tick(t0 + 104 * ms);  // closes [0, 104): a read and a write line
  EXPECT_EQ(log.samples(), 2u);
  for (int i = 0; i < 10; ++i) log.add(t0 + 150 * ms, 0, 0, 30, 70, 100);
  log.tick(t0 + 180 * ms);  // the window is [100, 200)
  EXPECT_EQ(log.samples(), 2u);
  log.finish(t0 + 250 * ms);
  ASSERT_TRUE(log.write(7));
  auto iops = read_log(dir + "/w_iops.7.log");
  ASSERT_EQ(iops.size(), 2u);  // no line for the final partial window
  EXPECT_EQ(iops[0], (std::vector<uint64_t>{104, 50 * 1000 / 104, 0, 0, 0}));
  EXPECT_EQ(iops[1], (std::vector<uint64_t>{104, 1000 / 104, 1, 0, 0}));
  auto bw = read_log(dir + "/w_bw.7.log");
  EXPECT_EQ(bw[0][1], 50ull * 4096 * 1000 / 104 / 1024);  // KiB/s
  auto clat = read_log(dir + "/w_clat.7.log");
  ASSERT_EQ(clat.size(), 3u);
  EXPECT_EQ(clat[0], (std::vector<uint64_t>{104, 90, 0, 0, 0}));
  EXPECT_EQ(clat[1], (std::vector<uint64_t>{104, 180, 1, 0, 0}));
  EXPECT_EQ(clat[2], (std::vector<uint64_t>{250, 70, 0, 0, 0}));
  EXPECT_EQ(read_log(dir + "/w_slat.7.log")[2][1], 30u);
}

// A timed run logged in 100 ms windows: the IOPS log averages to the
// report's IOPS, and fio's plotting tools take the files.
TEST(IoLog, AveragedLogsMatchTheReportAndFioToolsReadThem) {
  const std::string dir = temp_dir("avg");
  const std::string p = dir + "/job";
  const std::string json = dir + "/out.json";
  ASSERT_EQ(run_bench({"--name=x", "--rw=randread", "--bs=4k", "--size=64m", "--time_based", "--runtime=1",
                       "--log_avg_msec=100", "--write_lat_log=" + p, "--write_bw_log=" + p,
                       "--write_iops_log=" + p, "--output-format=json", "--output=" + json}),
            0);
  const double report_iops = nlohmann::json::parse(read_text(json))["jobs"][0]["read"]["iops"].get<double>();
  auto iops = read_log(p + "_iops.1.log");
  ASSERT_GE(iops.size(), 5u);
  double sum = 0;
  for (const auto& l : iops) {
    ASSERT_EQ(l.size(), 5u);
    EXPECT_EQ(l[2], 0u);
    sum += static_cast<double>(l[1]);
  }
  const double avg = sum / static_cast<double>(iops.size());
  EXPECT_NEAR(avg, report_iops, 0.2 * report_iops);

  if (have("/usr/bin/fio2gnuplot")) {
    const std::string out = dir + "/gp";
    mkdir(out.c_str(), 0755);
    ASSERT_EQ(std::system(("cd '" + dir + "' && fio2gnuplot -p 'job_iops.*.log' -t x -d '" + out +
                           "' > /dev/null 2>&1").c_str()),
              0);
    // fio2gnuplot's own summary of the file: its average is ours.
    const std::string global = read_text(out + "/job_iops..global");
    const size_t at = global.find("avg=");
    ASSERT_NE(at, std::string::npos) << global;
    EXPECT_NEAR(std::stod(global.substr(at + 4)), avg, 0.01 * avg + 1);
  }
  if (have("/usr/bin/fio_generate_plots") && have("/usr/bin/gnuplot")) {
    ASSERT_EQ(std::system(("cd '" + dir + "' && fio_generate_plots t > /dev/null 2>&1").c_str()), 0);
    for (const char* kind : {"lat", "clat", "slat", "bw", "iops"}) {
      struct stat st {};
      EXPECT_EQ(stat((dir + "/t-" + kind + ".svg").c_str(), &st), 0) << kind;
      EXPECT_GT(st.st_size, 1000) << kind;
    }
  } else {
    std::printf("fio_generate_plots or gnuplot missing: plots not checked\n");
  }
}

// fio numbers the files by job across the run, clones counted.
TEST(IoLog, FilesAreNumberedPerJob) {
  const std::string dir = temp_dir("numbers");
  ASSERT_EQ(run_bench({"--bs=4k", "--size=64k", "--write_iops_log=" + dir + "/n", "--name=a", "--numjobs=2",
                       "--name=b", "--stonewall", "--rw=write", "--output=/dev/null"}),
            0);
  for (int n = 1; n <= 3; ++n) EXPECT_EQ(read_log(dir + "/n_iops." + std::to_string(n) + ".log").size(), 16u) << n;
  EXPECT_EQ(read_log(dir + "/n_iops.3.log")[0][2], 1u);  // job b writes
  EXPECT_NE(run_bench({"--name=a", "--size=64k", "--write_bw_log="}), 0);
}

}  // namespace
}  // namespace bench
