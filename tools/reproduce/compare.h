// `blkmq bench ... --compare PATH=A,B [--repeat N]`: the same job run with
// queue attribute PATH at A and at B, interleaved N times (A B A B ...),
// printed side by side with medians, min-max and the B/A ratio, as one row
// of a reproduce table.
#pragma once

namespace repro {

// True if argv holds --compare (then bench_main hands the run to
// compare_main).
bool wants_compare(int argc, char** argv);

// Entry for a bench command line with --compare; argv[0] is "bench".
// Returns 0 when every run succeeded, 1 on a bad option or a failed run.
// --repeat defaults to 3.
int compare_main(int argc, char** argv);

}  // namespace repro
