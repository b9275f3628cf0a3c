#include "bench/report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ctime>

namespace bench {
namespace {

std::string sprintf_str(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string sprintf_str(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

uint64_t sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

double per_sec(uint64_t count, uint64_t ns) {
  return ns ? static_cast<double>(count) * 1e9 / static_cast<double>(ns) : 0.0;
}

// Latency unit for display, chosen as fio does: nsec unless values are large.
struct LatUnit {
  const char* name;
  double div;
};
LatUnit lat_unit(uint64_t min, uint64_t max) {
  if (min > 2000000 && max > 99999999) return {"msec", 1e6};
  if (min > 2000 && max > 99999) return {"usec", 1e3};
  return {"nsec", 1.0};
}

std::string lat_line(const char* label, const LatStat& s) {
  LatUnit u = lat_unit(s.min_or_zero(), s.max);
  auto v = [&](double x) { return x / u.div; };
  if (u.div == 1.0) {
    return sprintf_str("    %4s (%s): min=%" PRIu64 ", max=%" PRIu64 ", avg=%.2f, stdev=%.2f\n", label, u.name,
                       s.min_or_zero(), s.max, s.mean(), s.stddev());
  }
  return sprintf_str("    %4s (%s): min=%.0f, max=%.0f, avg=%.2f, stdev=%.2f\n", label, u.name,
                     v(static_cast<double>(s.min_or_zero())), v(static_cast<double>(s.max)), v(s.mean()),
                     v(s.stddev()));
}

std::string percentile_block(const DirStats& d) {
  const auto& pcts = default_percentiles();
  std::vector<uint64_t> vals = d.clat_hist.percentiles(pcts);
  uint64_t maxv = vals.empty() ? 0 : vals.back();
  LatUnit u = maxv > 99999999 ? LatUnit{"msec", 1e6} : maxv > 99999 ? LatUnit{"usec", 1e3} : LatUnit{"nsec", 1.0};
  std::vector<std::string> cells;
  size_t width = 5;
  for (uint64_t v : vals) width = std::max(width, std::to_string(static_cast<uint64_t>(v / u.div)).size());
  for (size_t i = 0; i < vals.size(); ++i)
    cells.push_back(sprintf_str("%5.2fth=[%*" PRIu64 "]", pcts[i], static_cast<int>(width),
                                static_cast<uint64_t>(static_cast<double>(vals[i]) / u.div)));
  std::string out = sprintf_str("    clat percentiles (%s):\n", u.name);
  for (size_t i = 0; i < cells.size(); i += 4) {
    out += "     | ";
    for (size_t k = i; k < std::min(cells.size(), i + 4); ++k) {
      out += cells[k];
      if (k + 1 < cells.size()) out += k + 1 < i + 4 ? ", " : ",";
    }
    out += "\n";
  }
  return out;
}

std::string bw_pair(double bytes_per_sec) {
  return num2str(bytes_per_sec, 1024) + "B/s (" + num2str(bytes_per_sec, 1000) + "B/s)";
}

std::string dir_block(const JobResult& j, unsigned dd) {
  const DirStats& d = j.dir[dd];
  double iops = per_sec(d.ios, j.runtime_ns);
  double bw = per_sec(d.bytes, j.runtime_ns);
  // fio ends a zoned job's write line with its zone resets.
  const std::string resets = j.zbd && dd == kWrite ? sprintf_str("; %" PRIu64 " zone resets", j.zone_resets) : "";
  std::string out = sprintf_str("  %s: IOPS=%s, BW=%s(%sB/%" PRIu64 "msec)%s\n", ddir_name(dd),
                                num2str(iops, 1000).c_str(), bw_pair(bw).c_str(),
                                num2str(static_cast<double>(d.bytes), 1024).c_str(), j.runtime_ns / 1000000,
                                resets.c_str());
  if (j.gtod_reduce || d.clat.n == 0) return out;
  out += lat_line("slat", d.slat);
  out += lat_line("clat", d.clat);
  out += lat_line("lat", d.lat);
  out += percentile_block(d);
  return out;
}

double cpu_pct(uint64_t ns, const JobResult& j) {
  return j.cpu_runtime_ns ? 100.0 * static_cast<double>(ns) / static_cast<double>(j.cpu_runtime_ns) : 0.0;
}

std::string job_block(const JobResult& j, int pid, int64_t ts_ms) {
  time_t t = static_cast<time_t>(ts_ms / 1000);
  char date[64];
  std::strftime(date, sizeof date, "%a %b %e %H:%M:%S %Y", std::localtime(&t));
  std::string out = sprintf_str("%s: (groupid=%u, jobs=%u): err=%2d: pid=%d: %s\n", j.name.c_str(), j.groupid,
                                j.nr_jobs, j.error, pid, date);
  if (!j.error_msg.empty()) out += "  error: " + j.error_msg + "\n";
  for (unsigned d = 0; d < kDdirs; ++d)
    if (j.dir[d].ios) out += dir_block(j, d);
  out += sprintf_str("  cpu          : usr=%.2f%%, sys=%.2f%%, ctx=%" PRIu64 ", majf=%" PRIu64 ", minf=%" PRIu64 "\n",
                     cpu_pct(j.cpu.usr_ns, j), cpu_pct(j.cpu.sys_ns, j), j.cpu.ctx, j.cpu.majf, j.cpu.minf);
  return out;
}

// "Run status group N (all jobs):" with the aggregate and per-job range.
std::string group_status(const RunReport& r, unsigned groupid) {
  static const char* const kUpper[] = {"READ", "WRITE", "TRIM"};
  std::string out = sprintf_str("\nRun status group %u (all jobs):\n", groupid);
  for (unsigned d = 0; d < kDdirs; ++d) {
    uint64_t bytes = 0, rt_max = 0, rt_min = UINT64_MAX;
    double bw_min = INFINITY, bw_max = 0;
    for (const JobResult& j : r.jobs) {
      if (j.groupid != groupid || j.dir[d].ios == 0) continue;
      bytes += j.dir[d].bytes;
      rt_max = std::max(rt_max, j.runtime_ns);
      rt_min = std::min(rt_min, j.runtime_ns);
      double bw = per_sec(j.dir[d].bytes, j.runtime_ns);
      bw_min = std::min(bw_min, bw);
      bw_max = std::max(bw_max, bw);
    }
    if (bytes == 0) continue;
    double bw = per_sec(bytes, rt_max);
    out += sprintf_str("  %5s: bw=%s, %sB/s-%sB/s (%sB/s-%sB/s), io=%sB (%sB), run=%" PRIu64 "-%" PRIu64 "msec\n",
                       kUpper[d], bw_pair(bw).c_str(), num2str(bw_min, 1024).c_str(), num2str(bw_max, 1024).c_str(),
                       num2str(bw_min, 1000).c_str(), num2str(bw_max, 1000).c_str(),
                       num2str(static_cast<double>(bytes), 1024).c_str(),
                       num2str(static_cast<double>(bytes), 1000).c_str(), rt_min / 1000000, rt_max / 1000000);
  }
  return out;
}

std::string threads_block(const RunReport& r) {
  std::string out = "\nblkmq threads (during the run):\n";
  if (r.threads.empty()) return out + "  (none)\n";
  for (const auto& [group, u] : r.threads) {
    double pct = r.run_ns ? 100.0 * static_cast<double>(u.cpu_ns) / static_cast<double>(r.run_ns) : 0.0;
    out += sprintf_str("  %-12s: cpu=%.3fs (%.1f%% of one CPU), threads=%u, vcsw=%" PRIu64 ", ivcsw=%" PRIu64 "\n",
                       group.c_str(), static_cast<double>(u.cpu_ns) / 1e9, pct, u.nr_threads, u.nvcsw, u.nivcsw);
  }
  return out;
}

double disk_util(const RunReport& r, const blkmq::DiskStat& d) {
  if (r.run_ns == 0) return 0.0;
  double u = 100.0 * static_cast<double>(d.io_ticks_ms) * 1e6 / static_cast<double>(r.run_ns);
  return std::min(u, 100.0);
}

std::string disk_block(const RunReport& r) {
  if (r.disks.empty()) return "";
  std::string out = "\nDisk stats (read/write):\n";
  for (const DiskReport& disk : r.disks) {
    const blkmq::DiskStat& d = disk.stat;
    out += sprintf_str("  %s: ios=%" PRIu64 "/%" PRIu64 ", merge=%" PRIu64 "/%" PRIu64 ", ticks=%" PRIu64 "/%" PRIu64
                       ", in_queue=%" PRIu64 ", util=%.2f%%\n",
                       disk.name.c_str(), d.read_ios, d.write_ios, d.read_merges, d.write_merges, d.read_ticks_ms,
                       d.write_ticks_ms, d.time_in_queue_ms, disk_util(r, d));
  }
  return out;
}

std::string cycles_block(const RunReport& r) {
  if (r.cycles.empty()) return "";
  std::string out = "\nAttribute cycles:\n";
  for (const CycleResult& c : r.cycles) {
    out += sprintf_str("  %s: switches=%" PRIu64 ", refused=%" PRIu64 "\n", c.path.c_str(), c.switches, c.refused);
    if (!c.first_error.empty()) out += "    first refusal: " + c.first_error + "\n";
  }
  return out;
}

// --show_attr: each device's attributes as read at the end, a value of
// several lines indented under its path.
std::string attrs_block(const RunReport& r) {
  std::string out;
  for (size_t i = 0; i < r.attrs.size(); i++) {
    for (const auto& [path, value] : r.attrs[i]) {
      if (out.empty()) out = "\nAttributes at the end of the run:\n";
      std::string v = value;
      for (size_t p = v.find('\n'); p != std::string::npos; p = v.find('\n', p + 1)) v.insert(p + 1, "    ");
      const std::string dev = i < r.disks.size() ? r.disks[i].name + ": " : "";
      out += "  " + dev + path + ": " + v + "\n";
    }
  }
  return out;
}

}  // namespace

std::string num2str(double v, unsigned base) {
  static const char* const kDec[] = {"", "k", "M", "G", "T", "P", "E"};
  static const char* const kBin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  const char* const* units = base == 1024 ? kBin : kDec;
  if (!(v >= 0) || std::isinf(v)) v = 0;
  unsigned u = 0;
  while (v >= 9999.5 && u < 6) {
    v /= base;
    ++u;
  }
  if (u == 0 && v == std::floor(v)) return sprintf_str("%.0f%s", v, units[u]);
  // Up to four characters: "1234", "12.3", "1.23".
  int decimals = v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2;
  return sprintf_str("%.*f%s", decimals, v, units[u]);
}

ThreadUsageMap thread_usage_delta(const ThreadUsageMap& before, const ThreadUsageMap& after) {
  ThreadUsageMap out;
  for (const auto& [group, a] : after) {
    blkmq::base::ThreadGroupUsage d = a;
    auto it = before.find(group);
    if (it != before.end()) {
      d.cpu_ns = sub0(a.cpu_ns, it->second.cpu_ns);
      d.nvcsw = sub0(a.nvcsw, it->second.nvcsw);
      d.nivcsw = sub0(a.nivcsw, it->second.nivcsw);
    }
    out[group] = d;
  }
  return out;
}

blkmq::DiskStat disk_stat_delta(const blkmq::DiskStat& b, const blkmq::DiskStat& a) {
  blkmq::DiskStat d{};
  d.read_ios = sub0(a.read_ios, b.read_ios);
  d.read_merges = sub0(a.read_merges, b.read_merges);
  d.read_sectors = sub0(a.read_sectors, b.read_sectors);
  d.read_ticks_ms = sub0(a.read_ticks_ms, b.read_ticks_ms);
  d.write_ios = sub0(a.write_ios, b.write_ios);
  d.write_merges = sub0(a.write_merges, b.write_merges);
  d.write_sectors = sub0(a.write_sectors, b.write_sectors);
  d.write_ticks_ms = sub0(a.write_ticks_ms, b.write_ticks_ms);
  d.in_flight = a.in_flight;  // a gauge, not a counter
  d.io_ticks_ms = sub0(a.io_ticks_ms, b.io_ticks_ms);
  d.time_in_queue_ms = sub0(a.time_in_queue_ms, b.time_in_queue_ms);
  d.discard_ios = sub0(a.discard_ios, b.discard_ios);
  d.discard_merges = sub0(a.discard_merges, b.discard_merges);
  d.discard_sectors = sub0(a.discard_sectors, b.discard_sectors);
  d.discard_ticks_ms = sub0(a.discard_ticks_ms, b.discard_ticks_ms);
  d.flush_ios = sub0(a.flush_ios, b.flush_ios);
  d.flush_ticks_ms = sub0(a.flush_ticks_ms, b.flush_ticks_ms);
  return d;
}

std::vector<JobResult> reported_jobs(const RunReport& r) {
  if (!r.group_reporting) return r.jobs;
  std::map<unsigned, std::vector<const JobResult*>> groups;
  for (const JobResult& j : r.jobs) groups[j.groupid].push_back(&j);
  std::vector<JobResult> out;
  for (auto& [gid, members] : groups) out.push_back(merge_results(members));
  return out;
}

std::string format_normal(const RunReport& r) {
  std::string out;
  std::vector<JobResult> shown = reported_jobs(r);
  for (const JobResult& j : shown) out += job_block(j, r.pid, r.timestamp_ms);
  std::vector<unsigned> gids;
  for (const JobResult& j : r.jobs)
    if (std::find(gids.begin(), gids.end(), j.groupid) == gids.end()) gids.push_back(j.groupid);
  for (unsigned g : gids) out += group_status(r, g);
  out += threads_block(r);
  out += cycles_block(r);
  out += attrs_block(r);
  out += disk_block(r);
  return out;
}

namespace {

using json = nlohmann::ordered_json;

// json+: fio emits the bins where it emits percentiles. fio's histogram
// stops at 1856 buckets (its last one, ~17 s, takes every larger value), so
// ours, which goes further, folds into that bucket's key the same way.
json bins_json(const LatHistogram& hist) {
  constexpr unsigned kFioBuckets = 29 * LatHistogram::kVal;
  const uint64_t fio_last = LatHistogram::value(kFioBuckets - 1);
  json bins = json::object();
  uint64_t overflow = 0;
  hist.for_each_bucket([&](uint64_t value, uint64_t count) {
    if (value >= fio_last) {
      overflow += count;
    } else {
      bins[std::to_string(value)] = count;
    }
  });
  if (overflow != 0) bins[std::to_string(fio_last)] = overflow;
  return bins;
}

json lat_json(const LatStat& s, const LatHistogram* hist, bool plus) {
  json j = {{"min", s.min_or_zero()}, {"max", s.max}, {"mean", s.mean()}, {"stddev", s.stddev()}, {"N", s.n}};
  // fio writes percentiles only when there are samples.
  if (hist != nullptr && hist->total() > 0) {
    const auto& pcts = default_percentiles();
    std::vector<uint64_t> vals = hist->percentiles(pcts);
    json p = json::object();
    for (size_t i = 0; i < pcts.size(); ++i) p[sprintf_str("%f", pcts[i])] = vals[i];
    j["percentile"] = p;
    if (plus) j["bins"] = bins_json(*hist);
  }
  return j;
}

json dir_json(const JobResult& job, unsigned dd, bool plus) {
  const DirStats& d = job.dir[dd];
  uint64_t rt = d.ios ? job.runtime_ns : 0;
  double iops = per_sec(d.ios, rt);
  auto bw_bytes = static_cast<uint64_t>(per_sec(d.bytes, rt));
  // fio samples bandwidth and IOPS periodically; blkmq bench takes one sample,
  // the whole run, so min = max = mean and the deviation is 0.
  uint64_t samples = d.ios ? 1 : 0;
  return {{"io_bytes", d.bytes},
          {"io_kbytes", d.bytes / 1024},
          {"bw_bytes", bw_bytes},
          {"bw", bw_bytes / 1024},
          {"iops", iops},
          {"runtime", rt / 1000000},
          {"total_ios", d.ios},
          {"short_ios", d.short_ios},
          {"drop_ios", d.drop_ios},
          {"slat_ns", lat_json(d.slat, nullptr, plus)},
          {"clat_ns", lat_json(d.clat, &d.clat_hist, plus)},
          {"lat_ns", lat_json(d.lat, nullptr, plus)},
          {"bw_min", bw_bytes / 1024},
          {"bw_max", bw_bytes / 1024},
          {"bw_agg", d.ios ? 100.0 : 0.0},
          {"bw_mean", static_cast<double>(bw_bytes / 1024)},
          {"bw_dev", 0.0},
          {"bw_samples", samples},
          {"iops_min", static_cast<uint64_t>(iops)},
          {"iops_max", static_cast<uint64_t>(iops)},
          {"iops_mean", iops},
          {"iops_stddev", 0.0},
          {"iops_samples", samples}};
}

json job_json(const JobResult& j, bool plus) {
  json opts = json::object();
  for (const auto& [k, v] : j.options) opts[k] = v;
  json out = {{"jobname", j.name},
              {"groupid", j.groupid},
              {"error", j.error},
              {"eta", 0},
              {"elapsed", j.runtime_ns / 1000000000},
              {"job options", opts}};
  if (!j.error_msg.empty()) out["error_msg"] = j.error_msg;
  for (unsigned d = 0; d < kDdirs; ++d) out[ddir_name(d)] = dir_json(j, d, plus);
  out["job_runtime"] = j.runtime_ns / 1000000;
  out["usr_cpu"] = cpu_pct(j.cpu.usr_ns, j);
  out["sys_cpu"] = cpu_pct(j.cpu.sys_ns, j);
  out["ctx"] = j.cpu.ctx;
  out["majf"] = j.cpu.majf;
  out["minf"] = j.cpu.minf;
  if (j.zbd) out["zone_resets"] = j.zone_resets;
  return out;
}

json disk_json(const RunReport& r) {
  json arr = json::array();
  for (const DiskReport& disk : r.disks) {
    const blkmq::DiskStat& d = disk.stat;
    arr.push_back({{"name", disk.name},
                   {"read_ios", d.read_ios},
                   {"write_ios", d.write_ios},
                   {"read_merges", d.read_merges},
                   {"write_merges", d.write_merges},
                   {"read_ticks", d.read_ticks_ms},
                   {"write_ticks", d.write_ticks_ms},
                   {"in_queue", d.time_in_queue_ms},
                   {"util", disk_util(r, d)}});
  }
  return arr;
}

json blkmq_json(const RunReport& r) {
  json threads = json::object();
  for (const auto& [group, u] : r.threads)
    threads[group] = {{"cpu_ns", u.cpu_ns}, {"nr_threads", u.nr_threads}, {"nvcsw", u.nvcsw}, {"nivcsw", u.nivcsw}};
  json devices = json::array();
  for (const DiskReport& d : r.disks) devices.push_back(d.name);
  json out = {{"driver", r.driver}, {"devices", devices}, {"run_ns", r.run_ns}, {"threads", threads},
              {"process", {{"usr_ns", r.process.usr_ns}, {"sys_ns", r.process.sys_ns}, {"ctx", r.process.ctx}}}};
  json groups = json::array();
  for (const GroupSpan& g : r.groups)
    groups.push_back({{"groupid", g.groupid}, {"start_ns", g.start_ns}, {"end_ns", g.end_ns}});
  if (!r.groups.empty()) out["groups"] = groups;
  if (r.cycles.empty()) return out;
  json cycles = json::array();
  for (const CycleResult& c : r.cycles) {
    json one = {{"path", c.path}, {"switches", c.switches}, {"refused", c.refused}};
    if (!c.first_error.empty()) one["first_error"] = c.first_error;
    cycles.push_back(one);
  }
  out["cycles"] = cycles;
  return out;
}

}  // namespace

nlohmann::ordered_json to_json(const RunReport& r, bool plus) {
  time_t t = static_cast<time_t>(r.timestamp_ms / 1000);
  char date[64];
  std::strftime(date, sizeof date, "%a %b %e %H:%M:%S %Y", std::localtime(&t));
  json jobs = json::array();
  for (const JobResult& j : reported_jobs(r)) jobs.push_back(job_json(j, plus));
  return {{"fio version", "blkmq-0.1"},
          {"timestamp", r.timestamp_ms / 1000},
          {"timestamp_ms", r.timestamp_ms},
          {"time", date},
          {"jobs", jobs},
          {"disk_util", disk_json(r)},
          {"blkmq", blkmq_json(r)}};
}

std::string format_json(const RunReport& r, bool plus) { return to_json(r, plus).dump(2) + "\n"; }

}  // namespace bench
