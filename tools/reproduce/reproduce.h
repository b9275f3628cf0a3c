// `blkmq reproduce [000|001|002|003 ...] [--quick] [--rounds N] [--out DIR]`:
// the four seed experiments, run interleaved in this process, printed as
// tables beside the seeds' own numbers, and saved as results.json, one PNG
// chart per seed and REPORT.md in a results folder.
// `blkmq reproduce kernel ...` runs the kernel comparison (kernel.h).
#pragma once

namespace repro {

// Entry of the subcommand; argv[0] is "reproduce". Returns 0 when every row
// ran, 1 on a bad option or when any row failed (its error is in the table
// and the report; the other rows still run). Takes about 3 minutes with
// --quick on 2 CPUs, about 12 without.
int reproduce_main(int argc, char** argv);

}  // namespace repro
