// Run reports: fio's normal text layout and fio's JSON field names, so tools
// that read fio output read ours. Pure functions of a RunReport: no device,
// no clock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "blkmq/queue.h"
#include "base/thread.h"
#include "bench/cycle.h"
#include "bench/stats.h"

namespace bench {

using ThreadUsageMap = std::map<std::string, blkmq::base::ThreadGroupUsage>;

// When a group of jobs ran, in ns from the start of the first group.
struct GroupSpan {
  unsigned groupid = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

// One device's disk stat ("Disk stats" / disk_util).
struct DiskReport {
  std::string name;
  blkmq::DiskStat stat{};
};

struct RunReport {
  std::vector<JobResult> jobs;    // one per job thread, in start order
  bool group_reporting = false;   // report each group of jobs as one
  uint64_t run_ns = 0;            // wall time of the measured part of the run
  int64_t timestamp_ms = 0;       // wall clock at the end, ms since the epoch
  int pid = 0;
  std::string driver;
  std::vector<DiskReport> disks;  // one per device, deltas over the run
  ThreadUsageMap threads;         // delta over the run
  CpuUsage process;               // the whole process's CPU and context switches over the run
  std::vector<CycleResult> cycles;  // --cycle switches, one per attribute
  std::vector<GroupSpan> groups;  // in run order
  // BenchConfig::sample_attrs as read at the end of the run, one map per
  // device (path -> value; a path the device lacks is left out).
  std::vector<std::map<std::string, std::string>> attrs;
  // Why a sampled path could not be read, "DEVICE: PATH: reason", one per
  // device and path (blkmq bench fails the run on any; reproduce samples
  // lock_stat where a scheduler may lack it, and ignores them).
  std::vector<std::string> attr_errors;
};

// Per-group deltas of blkmq::base::thread_usage() snapshots. nr_threads is the
// after value; counters that went down (threads exited) count as 0.
ThreadUsageMap thread_usage_delta(const ThreadUsageMap& before, const ThreadUsageMap& after);
blkmq::DiskStat disk_stat_delta(const blkmq::DiskStat& before, const blkmq::DiskStat& after);

// The jobs as reported: merged per group with group_reporting, else as is.
std::vector<JobResult> reported_jobs(const RunReport& r);

std::string format_normal(const RunReport& r);
// fio's JSON. plus: fio's json+, which adds to each direction's clat_ns a
// "bins" object, {"<bucket value in ns>": count} for every non-empty
// histogram bucket, keyed by the values fio's plat_idx_to_val gives.
nlohmann::ordered_json to_json(const RunReport& r, bool plus = false);
// to_json, pretty-printed, newline-terminated.
std::string format_json(const RunReport& r, bool plus = false);

// fio's num2str: at most 4 significant characters, then a unit prefix
// (k/M/G for base 1000, Ki/Mi/Gi for base 1024). num2str(9.87e9, 1024) is
// "9414Mi"; the caller appends "B" or "B/s".
std::string num2str(double v, unsigned base);

}  // namespace bench
