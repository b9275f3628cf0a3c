#include "bench/iolog.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>

namespace bench {

void IoLog::init(const LogOptions& o, uint32_t bs, bool rt_prio) {
  enabled_ = o.any();
  if (!enabled_) return;
  opt_ = o;
  bs_ = bs;
  prio_ = rt_prio ? 1 : 0;
  avg_ns_ = o.avg_msec * 1000000;
  if (avg_ns_ == 0) new_chunk();
  // Windows are few (one per direction per log_avg_msec): reserve a minute's.
  if (avg_ns_ != 0) windows_.reserve(2 * (60000 / o.avg_msec + 1));
}

void IoLog::reset(uint64_t epoch_ns) {
  epoch_ns_ = epoch_ns;
  if (!chunks_.empty()) chunks_.resize(1);
  used_ = 0;
  win_[0] = win_[1] = Window{};
  windows_.clear();
  window_start_ms_ = 0;
  window_end_ns_ = epoch_ns + avg_ns_;
}

void IoLog::new_chunk() {
  chunks_.push_back(std::make_unique<IoRecord[]>(kChunk));
  used_ = 0;
}

void IoLog::close_window(uint64_t now, bool lat_only) {
  const uint64_t elapsed_ms = (now - epoch_ns_) / 1000000;
  const uint64_t spent_ms = elapsed_ms > window_start_ms_ ? elapsed_ms - window_start_ms_ : 0;
  for (unsigned d = 0; d < 2; ++d) {
    if (win_[d].ios == 0) continue;  // as fio: no line for a direction without I/O
    windows_.push_back({elapsed_ms, spent_ms, win_[d], d, lat_only});
    win_[d] = Window{};
  }
  // The next window starts on a multiple of log_avg_msec, as fio's do.
  window_start_ms_ = elapsed_ms - elapsed_ms % opt_.avg_msec;
  window_end_ns_ = epoch_ns_ + (window_start_ms_ + opt_.avg_msec) * 1000000;
}

void IoLog::finish(uint64_t now) {
  if (enabled_ && avg_ns_ != 0) close_window(now, true);
}

size_t IoLog::samples() const {
  if (avg_ns_ != 0) return windows_.size();
  return chunks_.empty() ? 0 : (chunks_.size() - 1) * kChunk + used_;
}

namespace {

std::string columns(uint64_t time_ms, uint64_t value, unsigned ddir, uint64_t bs, const uint64_t* offset,
                    unsigned prio) {
  char buf[160];
  if (offset == nullptr) {
    std::snprintf(buf, sizeof buf, "%" PRIu64 ", %" PRIu64 ", %u, %" PRIu64 ", %u\n", time_ms, value, ddir, bs,
                  prio);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRIu64 ", %" PRIu64 ", %u, %" PRIu64 ", %" PRIu64 ", %u\n", time_ms, value,
                  ddir, bs, *offset, prio);
  }
  return buf;
}

uint64_t mean_rounded(uint64_t sum, uint64_t n) { return n ? (sum + n / 2) / n : 0; }

}  // namespace

std::string IoLog::line(Kind k, const IoRecord& r) const {
  uint64_t v = 0;
  switch (k) {
    case Kind::bw: v = r.clat ? uint64_t{bs_} * 1000000 / r.clat : 0; break;
    case Kind::iops: v = 1; break;
    case Kind::lat: v = r.lat; break;
    case Kind::clat: v = r.clat; break;
    case Kind::slat: v = r.slat; break;
  }
  return columns(r.time_ms, v, r.ddir, bs_, opt_.offset ? &r.offset : nullptr, prio_);
}

std::string IoLog::line(Kind k, const WindowRecord& r) const {
  const uint64_t zero = 0;
  const uint64_t spent = r.spent_ms;
  uint64_t v = 0;
  switch (k) {
    case Kind::bw: v = spent ? r.sums.ios * bs_ * 1000 / spent / 1024 : 0; break;
    case Kind::iops: v = spent ? r.sums.ios * 1000 / spent : 0; break;
    case Kind::lat: v = mean_rounded(r.sums.lat, r.sums.ios); break;
    case Kind::clat: v = mean_rounded(r.sums.clat, r.sums.ios); break;
    case Kind::slat: v = mean_rounded(r.sums.slat, r.sums.ios); break;
  }
  return columns(r.time_ms, v, r.ddir, 0, opt_.offset ? &zero : nullptr, prio_);
}

Status IoLog::write_kind(const std::string& path, Kind k) const {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return Status::error(errno, "cannot write log " + path);
  const bool per_window = avg_ns_ != 0;
  if (per_window) {
    for (const WindowRecord& r : windows_) {
      if (r.lat_only && (k == Kind::bw || k == Kind::iops)) continue;
      const std::string s = line(k, r);
      std::fwrite(s.data(), 1, s.size(), f);
    }
  } else {
    for (size_t c = 0; c < chunks_.size(); ++c) {
      const size_t n = c + 1 == chunks_.size() ? used_ : kChunk;
      for (size_t i = 0; i < n; ++i) {
        const std::string s = line(k, chunks_[c][i]);
        std::fwrite(s.data(), 1, s.size(), f);
      }
    }
  }
  const bool bad = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || bad) return Status::error(EIO, "cannot write log " + path);
  return Status::OK();
}

Status IoLog::write(unsigned number) const {
  if (!enabled_) return Status::OK();
  const std::string n = "." + std::to_string(number) + ".log";
  struct File {
    const std::string* prefix;
    const char* suffix;
    Kind kind;
  };
  const File files[] = {{&opt_.bw_prefix, "_bw", Kind::bw},       {&opt_.iops_prefix, "_iops", Kind::iops},
                        {&opt_.lat_prefix, "_lat", Kind::lat},    {&opt_.lat_prefix, "_clat", Kind::clat},
                        {&opt_.lat_prefix, "_slat", Kind::slat}};
  Status first = Status::OK();
  for (const File& f : files) {
    if (f.prefix->empty()) continue;
    Status st = write_kind(*f.prefix + f.suffix + n, f.kind);
    if (!st && first) first = st;
  }
  return first;
}

}  // namespace bench
