#include "reproduce/metrics.h"

#include <cmath>
#include <cstdio>

#include "base/lockstat.h"

namespace repro {
namespace {

struct Totals {
  double ios = 0, bytes = 0;
  double job_usr_ns = 0, job_sys_ns = 0, job_runtime_ns = 0, job_ctx = 0;
  double thr_cpu_ns = 0, thr_ctx = 0;
  bench::LatStat slat, clat, lat;
};

Totals add_up(const bench::RunReport& rep) {
  Totals t;
  for (const bench::JobResult& j : rep.jobs) {
    for (const bench::DirStats& d : j.dir) {
      t.ios += static_cast<double>(d.ios);
      t.bytes += static_cast<double>(d.bytes);
      t.slat.merge(d.slat);
      t.clat.merge(d.clat);
      t.lat.merge(d.lat);
    }
    t.job_usr_ns += static_cast<double>(j.cpu.usr_ns);
    t.job_sys_ns += static_cast<double>(j.cpu.sys_ns);
    t.job_ctx += static_cast<double>(j.cpu.ctx);
    t.job_runtime_ns += static_cast<double>(j.cpu_runtime_ns ? j.cpu_runtime_ns : j.runtime_ns);
  }
  for (const auto& [group, u] : rep.threads) {
    t.thr_cpu_ns += static_cast<double>(u.cpu_ns);
    t.thr_ctx += static_cast<double>(u.nvcsw + u.nivcsw);
  }
  return t;
}

void add_lock_stats(const bench::RunReport& rep, double ios, Sample* s) {
  blkmq::base::LockStat sum;
  bool any = false;
  for (const auto& attrs : rep.attrs) {
    auto it = attrs.find(kLockStatAttr);
    blkmq::base::LockStat ls;
    if (it == attrs.end() || !blkmq::base::LockStat::parse(it->second, &ls)) continue;
    any = true;
    sum.add(ls);
  }
  if (!any) return;
  (*s)[key::kLockPct] = sum.contended_pct();
  if (ios > 0) (*s)[key::kLockWaitNsPerIo] = static_cast<double>(sum.wait_ns) / ios;
}

void add_merges(const bench::RunReport& rep, Sample* s) {
  double merges = 0, ios = 0;
  for (const bench::DiskReport& d : rep.disks) {
    merges += static_cast<double>(d.stat.write_merges);
    ios += static_cast<double>(d.stat.write_ios);
  }
  if (ios + merges > 0) (*s)[key::kWriteMergePct] = 100.0 * merges / (ios + merges);
}

}  // namespace

Sample sample_from_report(const bench::RunReport& rep, unsigned ncpus) {
  Sample s;
  const Totals t = add_up(rep);
  const double run_s = static_cast<double>(rep.run_ns) / 1e9;
  if (run_s <= 0) return s;
  s[key::kIops] = t.ios / run_s;
  s[key::kBwMib] = t.bytes / run_s / (1024.0 * 1024.0);
  if (t.job_runtime_ns > 0) {
    s[key::kUsrPct] = 100.0 * t.job_usr_ns / t.job_runtime_ns;
    s[key::kSysPct] = 100.0 * t.job_sys_ns / t.job_runtime_ns;
  }
  // The process's own account covers every thread, io_uring's io-wq workers
  // too; the per-thread sum is the fallback for a report without it.
  const double proc_ns = static_cast<double>(rep.process.usr_ns + rep.process.sys_ns);
  const double cpu_ns = proc_ns > 0 ? proc_ns : t.job_usr_ns + t.job_sys_ns + t.thr_cpu_ns;
  const double ctx = rep.process.ctx > 0 ? static_cast<double>(rep.process.ctx) : t.job_ctx + t.thr_ctx;
  s[key::kCpuPct] = 100.0 * cpu_ns / static_cast<double>(rep.run_ns) / (ncpus ? ncpus : 1);
  if (t.ios > 0) {
    s[key::kCpuUsPerIo] = cpu_ns / t.ios / 1000.0;
    s[key::kCtxPerIo] = ctx / t.ios;
  }
  if (t.lat.n > 0) {
    s[key::kSlatUs] = t.slat.mean() / 1000.0;
    s[key::kClatUs] = t.clat.mean() / 1000.0;
    s[key::kLatUs] = t.lat.mean() / 1000.0;
  }
  add_merges(rep, &s);
  add_lock_stats(rep, t.ios, &s);
  return s;
}

MetricInfo metric_info(const std::string& k) {
  static const MetricInfo kInfo[] = {
      {key::kIops, "IOPS", true, 0},
      {key::kBwMib, "BW (MiB/s)", false, 0},
      {key::kSlatUs, "slat (µs)", false, 2},
      {key::kClatUs, "clat (µs)", false, 2},
      {key::kLatUs, "lat (µs)", false, 2},
      {key::kUsrPct, "usr %", false, 2},
      {key::kSysPct, "sys %", false, 2},
      {key::kCpuPct, "CPU % (machine)", false, 1},
      {key::kCpuUsPerIo, "CPU µs/IO", false, 2},
      {key::kCtxPerIo, "ctx/IO", false, 3},
      {key::kWriteMergePct, "write bios merged %", false, 1},
      {key::kLockPct, "lock contention %", false, 2},
      {key::kLockWaitNsPerIo, "lock wait ns/IO", false, 1},
  };
  for (const MetricInfo& m : kInfo)
    if (k == m.key) return m;
  return {nullptr, nullptr, false, 2};
}

std::string format_value(const std::string& k, double v) {
  const MetricInfo m = metric_info(k);
  char buf[32];
  if (!std::isfinite(v)) return "-";
  if (m.scaled) {
    if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
    else if (v >= 1e4) std::snprintf(buf, sizeof buf, "%.0fk", v / 1e3);
    else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
    else std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.*f", m.decimals, v);
  }
  return buf;
}

std::string format_seed_value(const std::string& k, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  const char* unit = "";
  if (metric_info(k).scaled && v >= 1e6) {
    v /= 1e6;
    unit = "M";
  } else if (metric_info(k).scaled && v >= 1e3) {
    v /= 1e3;
    unit = "k";
  }
  // %.6g keeps the digits the seed wrote and drops trailing zeros.
  std::snprintf(buf, sizeof buf, "%.6g%s", v, unit);
  return buf;
}

}  // namespace repro
