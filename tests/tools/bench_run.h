// Runs `blkmq bench` in process, as the command line would. The report
// (hundreds of lines a run) is kept out of the test log: only when the run
// fails are its error lines printed, so a failure stays readable in CI.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench.h"

namespace bench {

// The lines of a bench log that say what went wrong.
inline std::string bench_error_lines(const std::string& log) {
  std::istringstream in(log);
  std::string line, out;
  while (std::getline(in, line))
    if (line.find("blkmq bench") != std::string::npos || line.find("error") != std::string::npos ||
        line.find("err=") != std::string::npos)
      out += line + "\n";
  return out;
}

inline int run_bench(std::vector<std::string> args) {
  std::string cmd = "blkmq bench";
  for (const std::string& a : args) cmd += " " + a;
  args.insert(args.begin(), "bench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int rc = bench_main(static_cast<int>(args.size()), argv.data());
  std::fflush(stdout);
  std::fflush(stderr);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string out = ::testing::internal::GetCapturedStdout();
  if (rc != 0) std::printf("%s\n  exit %d:\n%s", cmd.c_str(), rc, bench_error_lines(err + out).c_str());
  return rc;
}

}  // namespace bench
