// Running the real blkparse and btt (Debian's blktrace package) on a trace
// a test recorded, and reading their output.
#pragma once

#include <string>
#include <vector>

namespace blkmq::test {

// Whether blkparse and btt can be run (the Makefile installs them).
bool have_blktrace_tools();

// One event line of blkparse's default output, split at blanks:
// dev cpu seq time pid action rwbs rest...
using BlkparseLine = std::vector<std::string>;
// blkparse -q -i <prefix>: its event lines, in blkparse's (time) order.
std::vector<BlkparseLine> blkparse(const std::string& prefix);
// The events whose action field is `action` ("Q", "D", ...).
std::vector<BlkparseLine> events(const std::vector<BlkparseLine>& lines, const std::string& action);
// The sector of an I/O event line (the field after rwbs), or -1.
long long event_sector(const BlkparseLine& l);

// blkparse -d (the binary dump btt reads) then btt -i on it; btt's whole
// report, or "" if either failed.
std::string btt_report(const std::string& prefix);
// From btt's "ALL" summary table: the row `row` (Q2C, D2C, Q2D...), its
// average in seconds and its N; false if absent.
bool btt_row(const std::string& report, const std::string& row, double* avg_s, long long* n);

// From btt's "Device Merge Information" table, the first device's #Q,
// #D and their ratio; false if absent.
bool btt_merges(const std::string& report, long long* q, long long* d, double* ratio);

}  // namespace blkmq::test
