#include "bench/status_line.h"

#include <algorithm>
#include <cmath>

#include "bench/job.h"
#include "bench/report.h"

namespace bench {
namespace {

// fio shows a rate in whole KiB/s up to 9999, then with 4 significant
// characters and a binary prefix: "0KiB/s", "5000KiB/s", "19.5MiB/s".
std::string rate_str(double bytes_per_sec) {
  const double kib = std::floor(bytes_per_sec / 1024);
  if (kib < 9999.5) return std::to_string(static_cast<uint64_t>(kib)) + "KiB/s";
  return num2str(kib * 1024, 1024) + "B/s";
}

std::string iops_str(double iops) { return num2str(std::floor(iops), 1000); }

// "[r=X,w=Y" + suffix + "]" over the directions shown.
std::string dir_block(const StatusProgress& p, const std::string (&vals)[2], const char* suffix) {
  static const char kNames[2] = {'r', 'w'};
  std::string out = "[";
  for (unsigned d = 0; d < 2; ++d) {
    if (!p.dir[d]) continue;
    if (out.size() > 1) out += ",";
    out += std::string(1, kNames[d]) + "=" + vals[d];
  }
  return out + suffix + "]";
}

char run_char(const JobSpec& s) {
  switch (s.rw) {
    case RwMode::read: return 'R';
    case RwMode::randread: return 'r';
    case RwMode::write: return 'W';
    case RwMode::randwrite: return 'w';
    case RwMode::rw: return 'M';
    case RwMode::randrw: return 'm';
  }
  return '?';
}

}  // namespace

std::string condense_run_chars(std::string_view chars) {
  std::string out;
  for (size_t i = 0; i < chars.size();) {
    size_t j = i;
    while (j < chars.size() && chars[j] == chars[i]) ++j;
    if (!out.empty()) out += ",";
    out += std::string(1, chars[i]) + "(" + std::to_string(j - i) + ")";
    i = j;
  }
  return out;
}

std::string format_eta(int64_t sec) {
  if (sec < 0) return "--";
  const int64_t s = sec % 60, m = sec / 60 % 60, h = sec / 3600 % 24, d = sec / 86400;
  char buf[64];
  if (d > 0) {
    std::snprintf(buf, sizeof buf, "%02lldd:%02lldh:%02lldm:%02llds", static_cast<long long>(d),
                  static_cast<long long>(h), static_cast<long long>(m), static_cast<long long>(s));
  } else if (h > 0) {
    std::snprintf(buf, sizeof buf, "%02lldh:%02lldm:%02llds", static_cast<long long>(h), static_cast<long long>(m),
                  static_cast<long long>(s));
  } else {
    std::snprintf(buf, sizeof buf, "%02lldm:%02llds", static_cast<long long>(m), static_cast<long long>(s));
  }
  return buf;
}

std::string format_status_line(const StatusProgress& p) {
  std::string out = "Jobs: " + std::to_string(p.running) + " (f=" + std::to_string(p.running) + ")";
  if (p.running == 0) return out;
  char pct[32];
  if (p.percent < 0) {
    std::snprintf(pct, sizeof pct, "-.-%%");
  } else {
    std::snprintf(pct, sizeof pct, "%3.1f%%", std::min(p.percent, 100.0));
  }
  out += ": [" + condense_run_chars(p.run_chars) + "][" + pct + "]";
  if (p.dir[0] || p.dir[1]) {
    const std::string rates[2] = {rate_str(p.bytes_per_sec[0]), rate_str(p.bytes_per_sec[1])};
    const std::string iops[2] = {iops_str(p.iops[0]), iops_str(p.iops[1])};
    out += dir_block(p, rates, "") + dir_block(p, iops, " IOPS");
  }
  return out + "[eta " + format_eta(p.eta_sec) + "]";
}

bool status_line_wanted(EtaMode mode, bool stdout_is_tty, bool json_to_stdout) {
  if (mode == EtaMode::never || json_to_stdout) return false;
  return mode == EtaMode::always || stdout_is_tty;
}

ProgressSampler::ProgressSampler(const std::vector<Job*>& jobs, Clock::time_point start)
    : jobs_(jobs), start_(start), last_(start), last_ios_(2 * jobs.size(), 0), last_bytes_(2 * jobs.size(), 0) {}

// Seconds left for one job: the sooner of its time limit and, for a job
// with a size, the time its remaining bytes take at its average rate so far.
// < 0 when neither is known yet.
double ProgressSampler::job_eta(const Job& j, double elapsed_s, uint64_t bytes) const {
  const JobSpec& s = j.spec();
  double eta = -1;
  if (s.runtime_ns != 0) eta = std::max(0.0, static_cast<double>(s.ramp_ns + s.runtime_ns) / 1e9 - elapsed_s);
  const uint64_t planned = j.planned_bytes();
  if (planned != 0 && bytes != 0) {
    const double left = static_cast<double>(planned > bytes ? planned - bytes : 0);
    const double by_size = elapsed_s * left / static_cast<double>(bytes);
    eta = eta < 0 ? by_size : std::min(eta, by_size);
  }
  return eta;
}

StatusProgress ProgressSampler::sample(Clock::time_point now) {
  StatusProgress p;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double dt = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  double eta = -1;
  for (size_t k = 0; k < jobs_.size(); ++k) {
    const Job& j = *jobs_[k];
    const bool done = j.finished();
    uint64_t bytes = 0;
    for (unsigned d = 0; d < 2; ++d) {
      const uint64_t ios = j.done_ios(d);
      const uint64_t b = ios * j.spec().bs;
      if (dt > 0) {
        p.iops[d] += static_cast<double>(ios - last_ios_[2 * k + d]) / dt;
        p.bytes_per_sec[d] += static_cast<double>(b - last_bytes_[2 * k + d]) / dt;
      }
      last_ios_[2 * k + d] = ios;
      last_bytes_[2 * k + d] = b;
      bytes += b;
    }
    p.run_chars += done ? '_' : j.in_ramp() ? '/' : run_char(j.spec());
    if (done) continue;
    p.running++;
    p.dir[0] = p.dir[0] || rw_has_reads(j.spec().rw);
    p.dir[1] = p.dir[1] || rw_has_writes(j.spec().rw);
    eta = std::max(eta, job_eta(j, elapsed, bytes));
  }
  if (eta >= 0) {
    p.eta_sec = static_cast<int64_t>(eta + 0.5);
    p.percent = elapsed + eta > 0 ? 100.0 * elapsed / (elapsed + eta) : 0;
  }
  return p;
}

void StatusLine::show(const StatusProgress& p) {
  std::string line = format_status_line(p);
  const size_t len = line.size();
  if (len < last_len_) line.append(last_len_ - len, ' ');
  line += '\r';
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
  last_len_ = len;
}

void StatusLine::clear() {
  if (last_len_ == 0) return;
  std::string blank(last_len_, ' ');
  blank += '\r';
  std::fwrite(blank.data(), 1, blank.size(), out_);
  std::fflush(out_);
  last_len_ = 0;
}

}  // namespace bench
