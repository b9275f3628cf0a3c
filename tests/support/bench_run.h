// Runs `blkmq bench` in process, as the command line would. The report
// (hundreds of lines a run) is kept out of the test log: only when the run
// fails are its error lines printed, so a failure stays readable in CI.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
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

// A path in the test temp folder, unique per process: PREFIX_PID_STEM.
inline std::string temp_path(const std::string& prefix, const std::string& stem) {
  return ::testing::TempDir() + prefix + "_" + std::to_string(getpid()) + "_" + stem;
}

// A bench JSON report written with --output (a parse error fails the test).
inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return nlohmann::json::parse(s.str());
}

// Runs `blkmq bench ARGS`; its exit code. *err (if given): what it printed
// on stderr.
inline int run_bench(std::vector<std::string> args, std::string* err = nullptr) {
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
  const std::string errors = ::testing::internal::GetCapturedStderr();
  const std::string out = ::testing::internal::GetCapturedStdout();
  if (rc != 0) std::printf("%s\n  exit %d:\n%s", cmd.c_str(), rc, bench_error_lines(errors + out).c_str());
  if (err) *err = errors;
  return rc;
}

}  // namespace bench
