// The numbers `blkmq reproduce` reads off one bench run: pure functions of a
// bench::RunReport, so the tables can be built and tested without a device.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bench/report.h"

namespace repro {

// Metric keys, as used in experiments, results.json and the tables.
// Job-thread CPU (usr_pct, sys_pct) is fio's "cpu" line: percent of the
// jobs' run time. cpu_pct, cpu_us_per_io and ctx_per_io count the whole
// process: the jobs, blkmq's own threads (kblockd, ksoftirqd, driver
// threads) and io_uring's io-wq workers. Latencies are means in µs; lock_* read the scheduler's
// queue/iosched/lock_stat (absent without a scheduler lock).
namespace key {
inline constexpr const char* kIops = "iops";
inline constexpr const char* kBwMib = "bw_mib";
inline constexpr const char* kSlatUs = "slat_us";
inline constexpr const char* kClatUs = "clat_us";
inline constexpr const char* kLatUs = "lat_us";
inline constexpr const char* kUsrPct = "usr_pct";
inline constexpr const char* kSysPct = "sys_pct";
inline constexpr const char* kCpuPct = "cpu_pct";
inline constexpr const char* kCpuUsPerIo = "cpu_us_per_io";
inline constexpr const char* kCtxPerIo = "ctx_per_io";
inline constexpr const char* kWriteMergePct = "write_merge_pct";
inline constexpr const char* kLockPct = "lock_contention_pct";
inline constexpr const char* kLockWaitNsPerIo = "lock_wait_ns_per_io";
}  // namespace key

// The attribute run_bench must sample for the lock_* metrics.
inline constexpr const char* kLockStatAttr = "queue/iosched/lock_stat";

// One run's numbers by key. A key is absent when the run cannot give it
// (latencies under gtod_reduce, lock statistics without a scheduler).
using Sample = std::map<std::string, double>;

// Reads every metric off a report. `ncpus` is the machine's CPU count (the
// base of cpu_pct). Any thread; no system calls.
Sample sample_from_report(const bench::RunReport& rep, unsigned ncpus);

// How a metric is printed: its label, unit and number format.
struct MetricInfo {
  const char* key;
  const char* label;  // "IOPS", "slat (µs)"
  bool scaled;        // print with k/M suffixes (IOPS) rather than fixed decimals
  int decimals;
};
// The info of `key`; a key not in the list is shown as itself, 2 decimals.
MetricInfo metric_info(const std::string& key);
// The value as the tables print it: "297k", "2.15M", "14.1", "0.52".
std::string format_value(const std::string& key, double v);
// A figure a seed published, with every digit it gave (15.7e3 is "15.7k",
// 498.89 stays 498.89): format_value rounds to our own precision, which
// made seed 002's 15.7k and 16.8k read 16k and 17k (issue 27).
std::string format_seed_value(const std::string& key, double v);

}  // namespace repro
