// Runs a seed experiment: every row with the seed's attribute at its
// "before" and "after" value, interleaved (before, after, before, after...)
// so a noisy machine's drift falls on both alike.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "blkmq/status.h"
#include "reproduce/experiment.h"
#include "reproduce/metrics.h"

namespace repro {

// Runs one bench command line (argv[0] "bench") and returns its numbers, or
// why it could not run or an I/O failed. bench_runner() is the real one;
// tests pass a fake.
using RunFn = std::function<blkmq::Result<Sample>(const std::vector<std::string>& args)>;
// Told one line per finished run ("000 row 1/5 round 2/3 after: 297k IOPS").
using ProgressFn = std::function<void(const std::string& line)>;

struct RowResult {
  std::vector<Sample> before, after;  // one per round, in run order
  std::vector<std::string> order;     // the values as they ran: "async", "sync", "async", ...
  std::string error;                  // non-empty: the row stopped at its first failed run
};

struct ExperimentResult {
  Experiment exp;
  std::vector<RowResult> rows;  // one per exp.rows
};

// Runs `rounds` rounds of every row (a round = the before run, then the
// after run). A failed run ends its row with the error and goes on with the
// next row. Control thread; takes rows x rounds x 2 runs.
ExperimentResult run_experiment(const Experiment& e, unsigned rounds, double runtime_s, const RunFn& run,
                                const ProgressFn& progress);

// The real RunFn: parses the arguments as `blkmq bench` does, samples the
// scheduler lock statistics, runs the jobs in this process (bench::run_bench)
// and reads the report's numbers. An I/O error in any job is an error.
RunFn bench_runner(unsigned ncpus);

}  // namespace repro
