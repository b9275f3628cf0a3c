// `blkmq bench`: creates the device, runs the jobs, prints the report.
#pragma once

#include "blkmq/status.h"
#include "bench/options.h"
#include "bench/report.h"

namespace bench {

// Entry of the subcommand; argv[0] is "bench". Returns the process exit
// code: 0 on success, 1 on a bad option, a device error or an I/O error.
int bench_main(int argc, char** argv);

// Runs a parsed configuration in this process: creates cfg.ndevices devices,
// runs every job group, destroys the devices and returns the report (I/O
// errors are in the report's jobs, not in the status). An error status means
// a device or a job could not be set up; no I/O was issued then. Control
// thread only; takes as long as the jobs run. Used by bench_main and by
// `blkmq reproduce`, which runs many configurations in one process.
blkmq::Result<RunReport> run_bench(const BenchConfig& cfg);

// The exit code bench_main gives a finished run: 1 if a job had an I/O error
// or a --cycle value was refused, else 0.
int bench_exit_code(const RunReport& rep);

}  // namespace bench
