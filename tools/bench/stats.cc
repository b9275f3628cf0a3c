#include "bench/stats.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>

namespace bench {

uint64_t LatHistogram::value(unsigned idx) {
  if (idx < 2 * kVal) return idx;
  unsigned err = idx / kVal - 1;
  uint64_t base = uint64_t{1} << (err + kBits);
  uint64_t lo = base + (static_cast<uint64_t>(idx % kVal) << err);
  return lo + ((uint64_t{1} << err) >> 1);
}

void LatHistogram::merge(const LatHistogram& o) {
  for (unsigned i = 0; i < kBuckets; ++i) buckets_[i] += o.buckets_[i];
  total_ += o.total_;
}

void LatHistogram::clear() {
  std::fill(std::begin(buckets_), std::end(buckets_), 0);
  total_ = 0;
}

uint64_t LatHistogram::percentile(double pct) const {
  return percentiles({pct})[0];
}

std::vector<uint64_t> LatHistogram::percentiles(const std::vector<double>& pcts) const {
  std::vector<uint64_t> out(pcts.size(), 0);
  if (total_ == 0) return out;
  uint64_t seen = 0;
  size_t j = 0;
  for (unsigned i = 0; i < kBuckets && j < pcts.size(); ++i) {
    seen += buckets_[i];
    // The first bucket whose cumulative count reaches pct% of the samples.
    while (j < pcts.size() && static_cast<double>(seen) >= pcts[j] / 100.0 * static_cast<double>(total_) &&
           seen > 0) {
      out[j++] = value(i);
    }
  }
  return out;
}

const std::vector<double>& default_percentiles() {
  static const std::vector<double> kList = {1,  5,  10, 20, 30, 40,   50,   60,    70,
                                            80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99};
  return kList;
}

void LatStat::merge(const LatStat& o) {
  n += o.n;
  sum += o.sum;
  sumsq += o.sumsq;
  min = std::min(min, o.min);
  max = std::max(max, o.max);
}

double LatStat::stddev() const {
  if (n < 2) return 0.0;
  double m = mean();
  double var = (sumsq - static_cast<double>(n) * m * m) / static_cast<double>(n - 1);
  return var > 0 ? std::sqrt(var) : 0.0;
}

const char* ddir_name(unsigned d) {
  static const char* const kNames[] = {"read", "write", "trim"};
  return d < kDdirs ? kNames[d] : "?";
}

void DirStats::merge(const DirStats& o) {
  ios += o.ios;
  bytes += o.bytes;
  short_ios += o.short_ios;
  drop_ios += o.drop_ios;
  slat.merge(o.slat);
  clat.merge(o.clat);
  lat.merge(o.lat);
  clat_hist.merge(o.clat_hist);
}

namespace {
uint64_t tv_ns(const timeval& tv) {
  return static_cast<uint64_t>(tv.tv_sec) * 1000000000ull + static_cast<uint64_t>(tv.tv_usec) * 1000ull;
}
uint64_t sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }
}  // namespace

namespace {

CpuUsage usage_now(int who) {
  rusage ru{};
  getrusage(who, &ru);
  CpuUsage c;
  c.usr_ns = tv_ns(ru.ru_utime);
  c.sys_ns = tv_ns(ru.ru_stime);
  c.ctx = static_cast<uint64_t>(ru.ru_nvcsw + ru.ru_nivcsw);
  c.majf = static_cast<uint64_t>(ru.ru_majflt);
  c.minf = static_cast<uint64_t>(ru.ru_minflt);
  return c;
}

}  // namespace

CpuUsage CpuUsage::thread_now() { return usage_now(RUSAGE_THREAD); }
CpuUsage CpuUsage::process_now() { return usage_now(RUSAGE_SELF); }

CpuUsage CpuUsage::operator-(const CpuUsage& o) const {
  return {sub0(usr_ns, o.usr_ns), sub0(sys_ns, o.sys_ns), sub0(ctx, o.ctx), sub0(majf, o.majf),
          sub0(minf, o.minf)};
}

CpuUsage& CpuUsage::operator+=(const CpuUsage& o) {
  usr_ns += o.usr_ns;
  sys_ns += o.sys_ns;
  ctx += o.ctx;
  majf += o.majf;
  minf += o.minf;
  return *this;
}

void JobResult::merge(const JobResult& o) {
  nr_jobs += o.nr_jobs;
  if (error == 0 && o.error != 0) {
    error = o.error;
    error_msg = o.error_msg;
  }
  errors += o.errors;
  zbd = zbd || o.zbd;
  zone_resets += o.zone_resets;
  runtime_ns = std::max(runtime_ns, o.runtime_ns);
  cpu_runtime_ns += o.cpu_runtime_ns;
  for (unsigned d = 0; d < kDdirs; ++d) dir[d].merge(o.dir[d]);
  cpu += o.cpu;
}

JobResult merge_results(const std::vector<const JobResult*>& jobs) {
  JobResult r;
  if (jobs.empty()) return r;
  r = *jobs[0];
  for (size_t i = 1; i < jobs.size(); ++i) r.merge(*jobs[i]);
  return r;
}

}  // namespace bench
