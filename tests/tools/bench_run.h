// Runs `blkmq bench` in process, as the command line would.
#pragma once

#include <string>
#include <vector>

#include "bench/bench.h"

namespace bench {

inline int run_bench(std::vector<std::string> args) {
  args.insert(args.begin(), "bench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return bench_main(static_cast<int>(args.size()), argv.data());
}

}  // namespace bench
