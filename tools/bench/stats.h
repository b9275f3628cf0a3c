// Per-job statistics: latency summaries, fio-style log-linear histograms,
// per-direction counters and thread CPU usage. Each job owns its own and is
// the only writer (no locks, no atomics); results are merged after the run.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bench {

// Log-linear histogram as fio's: values below 2^(kBits+1) get their own
// bucket; above, each power of two is cut into 2^kBits buckets, so a bucket
// is never wider than 1/64 of its value (1.6% error).
class LatHistogram {
 public:
  static constexpr unsigned kBits = 6;
  static constexpr unsigned kVal = 1u << kBits;
  static constexpr unsigned kBuckets = (64 - kBits + 1) * kVal;  // up to 2^64 - 1

  static unsigned index(uint64_t v) {
    if (v < 2 * kVal) return static_cast<unsigned>(v);
    unsigned msb = 63u - static_cast<unsigned>(__builtin_clzll(v));
    unsigned err = msb - kBits;
    return (err + 1) * kVal + static_cast<unsigned>((v >> err) & (kVal - 1));
  }
  // The value a bucket stands for: its middle, as fio reports.
  static uint64_t value(unsigned idx);

  void add(uint64_t v) { buckets_[index(v)]++; total_++; }
  void merge(const LatHistogram& o);
  void clear();
  uint64_t total() const { return total_; }
  // Calls f(value(idx), count) for every non-empty bucket, ascending.
  template <typename F>
  void for_each_bucket(F&& f) const {
    for (unsigned i = 0; i < kBuckets; ++i)
      if (buckets_[i] != 0) f(value(i), buckets_[i]);
  }
  // The value below which `pct` percent of the samples lie (0 if empty).
  uint64_t percentile(double pct) const;
  // Several percentiles in one pass; `pcts` ascending.
  std::vector<uint64_t> percentiles(const std::vector<double>& pcts) const;

 private:
  uint64_t buckets_[kBuckets] = {};
  uint64_t total_ = 0;
};

// fio's default percentile list.
const std::vector<double>& default_percentiles();

// Running min/max/mean/stddev without storing samples.
struct LatStat {
  uint64_t n = 0;
  uint64_t min = UINT64_MAX;
  uint64_t max = 0;
  uint64_t sum = 0;
  double sumsq = 0;

  void add(uint64_t v) {
    n++;
    sum += v;
    sumsq += static_cast<double>(v) * static_cast<double>(v);
    if (v < min) min = v;
    if (v > max) max = v;
  }
  void merge(const LatStat& o);
  double mean() const { return n ? static_cast<double>(sum) / static_cast<double>(n) : 0.0; }
  double stddev() const;
  uint64_t min_or_zero() const { return n ? min : 0; }
};

enum Ddir : unsigned { kRead = 0, kWrite = 1, kTrim = 2, kDdirs = 3 };
const char* ddir_name(unsigned d);  // "read", "write", "trim"

struct DirStats {
  uint64_t ios = 0;
  uint64_t bytes = 0;
  uint64_t short_ios = 0;
  uint64_t drop_ios = 0;
  LatStat slat, clat, lat;
  LatHistogram clat_hist;

  void merge(const DirStats& o);
  void clear() { *this = DirStats(); }
};

// CPU use of one thread (getrusage RUSAGE_THREAD).
struct CpuUsage {
  uint64_t usr_ns = 0;
  uint64_t sys_ns = 0;
  uint64_t ctx = 0;   // voluntary + involuntary context switches
  uint64_t majf = 0;
  uint64_t minf = 0;

  static CpuUsage thread_now();
  // The whole process (every thread, living and exited, io_uring's io-wq
  // workers included).
  static CpuUsage process_now();
  CpuUsage operator-(const CpuUsage& o) const;
  CpuUsage& operator+=(const CpuUsage& o);
};

// What a job (or a group of jobs merged) reports.
struct JobResult {
  std::string name;
  unsigned groupid = 0;
  unsigned nr_jobs = 1;
  int error = 0;                  // errno of the first failed I/O, fio's err=
  std::string error_msg;          // why, e.g. the verify mismatch
  uint64_t errors = 0;            // failed I/Os
  uint64_t runtime_ns = 0;        // measured time (after ramp), longest job
  uint64_t cpu_runtime_ns = 0;    // sum of job runtimes, the base of usr/sys %
  DirStats dir[kDdirs];
  CpuUsage cpu;
  bool gtod_reduce = false;
  // zonemode=zbd: its zone resets, which the write line ("; N zone resets")
  // and the JSON ("zone_resets") report, as fio's.
  bool zbd = false;
  uint64_t zone_resets = 0;
  std::vector<std::pair<std::string, std::string>> options;

  void merge(const JobResult& o);
};

// Merges jobs into one group result (group_reporting): counts add, runtime
// is the longest, CPU percentages become the average over the jobs.
JobResult merge_results(const std::vector<const JobResult*>& jobs);

}  // namespace bench
