// fio's live status line: the formatting (a pure function of the progress
// numbers), when it is shown, and that it stays out of non-terminal output.
#include "bench/status_line.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench.h"

namespace bench {
namespace {

TEST(StatusLine, CondensesJobStates) {
  EXPECT_EQ(condense_run_chars("r"), "r(1)");
  EXPECT_EQ(condense_run_chars("rr_"), "r(2),_(1)");
  EXPECT_EQ(condense_run_chars("w_w"), "w(1),_(1),w(1)");
  EXPECT_EQ(condense_run_chars(""), "");
}

TEST(StatusLine, EtaAsFio) {
  EXPECT_EQ(format_eta(0), "00m:00s");
  EXPECT_EQ(format_eta(3), "00m:03s");
  EXPECT_EQ(format_eta(3723), "01h:02m:03s");
  EXPECT_EQ(format_eta(90061), "01d:01h:01m:01s");
  EXPECT_EQ(format_eta(-1), "--");
}

StatusProgress one_reader() {
  StatusProgress p;
  p.run_chars = "r";
  p.running = 1;
  p.percent = 45.0;
  p.dir[0] = true;
  p.bytes_per_sec[0] = 1000.0 * 1024 * 1024;
  p.iops[0] = 256000;
  p.eta_sec = 3;
  return p;
}

TEST(StatusLine, FormatsLikeFio) {
  EXPECT_EQ(format_status_line(one_reader()), "Jobs: 1 (f=1): [r(1)][45.0%][r=1000MiB/s][r=256k IOPS][eta 00m:03s]");
  // A line real fio 3.33 printed, from its numbers.
  StatusProgress w;
  w.run_chars = "w_";
  w.running = 1;
  w.percent = 75;
  w.dir[1] = true;
  w.bytes_per_sec[1] = 4912.0 * 1024 * 1024;
  w.iops[1] = 1258000;
  w.eta_sec = 1;
  EXPECT_EQ(format_status_line(w), "Jobs: 1 (f=1): [w(1),_(1)][75.0%][w=4912MiB/s][w=1258k IOPS][eta 00m:01s]");
  // Both directions, nothing known yet, small rates in whole KiB/s.
  StatusProgress m;
  m.run_chars = "mm";
  m.running = 2;
  m.dir[0] = m.dir[1] = true;
  m.bytes_per_sec[1] = 5000.0 * 1024 + 100;
  m.iops[1] = 1250.7;
  EXPECT_EQ(format_status_line(m), "Jobs: 2 (f=2): [m(2)][-.-%][r=0KiB/s,w=5000KiB/s][r=0,w=1250 IOPS][eta --]");
  StatusProgress none;
  EXPECT_EQ(format_status_line(none), "Jobs: 0 (f=0)");
}

TEST(StatusLine, WhenShown) {
  EXPECT_TRUE(status_line_wanted(EtaMode::auto_, true, false));
  EXPECT_FALSE(status_line_wanted(EtaMode::auto_, false, false));
  EXPECT_TRUE(status_line_wanted(EtaMode::always, false, false));
  EXPECT_FALSE(status_line_wanted(EtaMode::never, true, false));
  // fio keeps a JSON report on stdout clean, even with --eta=always.
  EXPECT_FALSE(status_line_wanted(EtaMode::always, true, true));
}

TEST(StatusLine, OverwritesAndClears) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  StatusLine s(f);
  StatusProgress p = one_reader();
  s.show(p);
  p.eta_sec = -1;  // a shorter line: padded over the longer one
  s.show(p);
  s.clear();
  std::rewind(f);
  std::string got;
  for (int c; (c = std::fgetc(f)) != EOF;) got += static_cast<char>(c);
  std::fclose(f);
  const std::string first = format_status_line(one_reader());
  const std::string second = format_status_line(p);
  ASSERT_LT(second.size(), first.size());
  EXPECT_EQ(got, first + "\r" + second + std::string(first.size() - second.size(), ' ') + "\r" +
                     std::string(second.size(), ' ') + "\r");
}

// Runs the bench in process and returns what it printed on stdout.
std::string bench_stdout(std::vector<std::string> args, int* rc) {
  args.insert(args.begin(), "bench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::testing::internal::CaptureStdout();
  *rc = bench_main(static_cast<int>(args.size()), argv.data());
  std::fflush(stdout);
  return ::testing::internal::GetCapturedStdout();
}

// The captured stdout is a file, not a terminal: --eta=auto shows nothing,
// --eta=always shows the line and blanks it before the report.
TEST(StatusLine, OnlyOnATerminalUnlessAlways) {
  const std::vector<std::string> job = {"--name=x", "--rw=randread", "--bs=4k", "--size=64m", "--time_based",
                                        "--runtime=1300ms"};
  int rc = 0;
  std::vector<std::string> args = job;
  std::string out = bench_stdout(args, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out.find("Jobs:"), std::string::npos);
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.rfind("x: (groupid=0", 0), 0u);

  args.push_back("--eta=always");
  out = bench_stdout(args, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out.rfind("Jobs: 1 (f=1): [r(1)][", 0), 0u) << out.substr(0, 200);
  const size_t report = out.find("x: (groupid=0");
  ASSERT_NE(report, std::string::npos);
  EXPECT_EQ(out[report - 1], '\r');  // the blanked line ends just before it
  EXPECT_EQ(out.find("Jobs:", report), std::string::npos);

  args.push_back("--output-format=json");
  out = bench_stdout(args, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out.find("Jobs:"), std::string::npos);
  EXPECT_NO_THROW(nlohmann::json::parse(out));
  bench_stdout({"--eta=sometimes", "--name=x", "--size=64k"}, &rc);
  EXPECT_EQ(rc, 1);
}

}  // namespace
}  // namespace bench
