// `blkmq bench`: creates the device, runs the jobs, prints the report.
#pragma once

namespace bench {

// Entry of the subcommand; argv[0] is "bench". Returns the process exit
// code: 0 on success, 1 on a bad option, a device error or an I/O error.
int bench_main(int argc, char** argv);

}  // namespace bench
