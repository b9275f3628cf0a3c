// fio's live status line, refreshed about once a second while jobs run:
//   Jobs: 1 (f=1): [r(1)][45.0%][r=1000MiB/s][r=256k IOPS][eta 00m:03s]
// Shown on stdout as fio shows it: when stdout is a terminal (--eta=auto),
// always (--eta=always) or never (--eta=never), and never when the JSON
// report goes to stdout. Each line overwrites the last (\r, padded with
// spaces); the line is cleared before the report is printed.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "bench/options.h"

namespace bench {

class Job;

// What one status line shows; format_status_line is a pure function of it.
struct StatusProgress {
  std::string run_chars;         // one per job, fio's: R/r read, W/w write, M/m mixed
                                 // (upper case sequential), '/' in the ramp, '_' done
  unsigned running = 0;          // jobs not yet done (each has one file open)
  double percent = -1;           // done, 0..100; < 0: not known yet ("-.-%")
  bool dir[2] = {false, false};  // read, write: the directions the running jobs do
  double bytes_per_sec[2] = {0, 0};
  double iops[2] = {0, 0};
  int64_t eta_sec = -1;          // < 0: not known
};

// "rr_" -> "r(2),_(1)": fio's condensed job states.
std::string condense_run_chars(std::string_view chars);
// fio's ETA: "00m:03s", "01h:02m:03s", "01d:00h:00m:00s"; "--" if < 0.
std::string format_eta(int64_t sec);
// The status line, without the \r: e.g.
// "Jobs: 1 (f=1): [r(1)][45.0%][r=1000MiB/s][r=256k IOPS][eta 00m:03s]".
std::string format_status_line(const StatusProgress& p);

// fio's rule for showing the line. json_to_stdout: the report is JSON (or
// json+) and goes to stdout, which fio keeps clean.
bool status_line_wanted(EtaMode mode, bool stdout_is_tty, bool json_to_stdout);

// Samples the jobs of one group for a status line: rates are over the time
// since the previous sample. Control thread; reads only the jobs' atomics.
class ProgressSampler {
 public:
  using Clock = std::chrono::steady_clock;
  ProgressSampler(const std::vector<Job*>& jobs, Clock::time_point start);
  StatusProgress sample(Clock::time_point now);

 private:
  double job_eta(const Job& j, double elapsed_s, uint64_t bytes) const;

  const std::vector<Job*>& jobs_;
  const Clock::time_point start_;
  Clock::time_point last_;
  std::vector<uint64_t> last_ios_, last_bytes_;  // per job and direction
};

// Writes status lines to `out`, each over the previous one.
class StatusLine {
 public:
  explicit StatusLine(std::FILE* out) : out_(out) {}
  // Prints `p`'s line, padded to cover the previous one, ending with \r.
  void show(const StatusProgress& p);
  // Blanks the line (if one was shown), so the report starts clean.
  void clear();

 private:
  std::FILE* out_;
  size_t last_len_ = 0;
};

}  // namespace bench
