// fio's bandwidth, latency and IOPS logs (write_bw_log, write_lat_log,
// write_iops_log, log_avg_msec, log_offset), in fio 3.33's file names and
// line format, so fio_generate_plots, fio2gnuplot and scripts made for fio
// read them.
//
// Files: PREFIX_bw.N.log, PREFIX_lat.N.log, PREFIX_clat.N.log,
// PREFIX_slat.N.log, PREFIX_iops.N.log, N the job's number in the run
// (1-based, clones counted, as fio's). One line per sample:
//   time_ms, value, ddir, bs, prio                  (log_offset=0)
//   time_ms, value, ddir, bs, offset, prio          (log_offset=1)
// time_ms since the start of measurement (after the ramp); ddir 0 read,
// 1 write; prio 1 for a real-time class job, else 0 (fio's log_prio=0).
// Latencies are in ns. Without log_avg_msec every I/O is a sample: its
// latencies, bw = bytes * 10^6 / clat_ns and iops = 1. With it, each
// window of that many ms gives per direction the mean latencies, bw in
// KiB/s and IOPS, with bs and offset 0.
//
// The job thread is the only writer and the files are written after it
// ended: nothing is locked, and samples go to fixed-size chunks, so an I/O
// costs a store into a preallocated record and one allocation every
// kChunk I/Os. A per-I/O log takes 48 bytes an I/O, as much as fio's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/options.h"

namespace bench {

class IoLog {
 public:
  // Sets up the logs of `o` (none if !o.any()) for a job of block size bs;
  // allocates the first chunk. Control thread, before the job runs.
  void init(const LogOptions& o, uint32_t bs, bool rt_prio);
  bool enabled() const { return enabled_; }

  // Job thread: measurement starts at epoch_ns; drops what was logged before.
  void reset(uint64_t epoch_ns);
  // Job thread: one completed I/O, stamped `now` (its reap time).
  void add(uint64_t now, unsigned ddir, uint64_t offset, uint64_t slat, uint64_t clat, uint64_t lat) {
    if (avg_ns_ == 0) {
      append_io(now, ddir, offset, slat, clat, lat);
      return;
    }
    Window& w = win_[ddir & 1];
    w.ios++;
    w.slat += slat;
    w.clat += clat;
    w.lat += lat;
  }
  // Job thread, once per reaped batch: closes the averaging window if it is
  // over. A window ends at the first reap after its length, as fio's
  // latency windows end at the first sample after it.
  void tick(uint64_t now) {
    if (avg_ns_ != 0 && now >= window_end_ns_) close_window(now, false);
  }
  // Job thread, at the end: fio logs the last, partial latency window (not
  // the bandwidth and IOPS ones).
  void finish(uint64_t now);

  // Writes the files of job number `number`. After the job thread ended.
  // Returns the first file that could not be written.
  Status write(unsigned number) const;

  // Samples so far: per I/O, or windows times directions. For tests.
  size_t samples() const;

 private:
  static constexpr size_t kChunk = 8192;
  struct IoRecord {
    uint64_t time_ms;
    uint64_t offset;
    uint64_t slat, clat, lat;
    uint32_t ddir;
  };
  struct Window {  // sums over the open window, one per direction
    uint64_t ios = 0, slat = 0, clat = 0, lat = 0;
  };
  struct WindowRecord {
    uint64_t time_ms;
    uint64_t spent_ms;  // what the rates divide by
    Window sums;
    uint32_t ddir;
    bool lat_only;      // the final window: no bw or iops line
  };
  enum class Kind { bw, iops, lat, clat, slat };

  void append_io(uint64_t now, unsigned ddir, uint64_t offset, uint64_t slat, uint64_t clat, uint64_t lat) {
    if (used_ == kChunk) new_chunk();
    chunks_.back()[used_++] = {(now - epoch_ns_) / 1000000, offset, slat, clat, lat, ddir};
  }
  void new_chunk();
  void close_window(uint64_t now, bool lat_only);
  Status write_kind(const std::string& path, Kind k) const;
  std::string line(Kind k, const IoRecord& r) const;
  std::string line(Kind k, const WindowRecord& r) const;

  bool enabled_ = false;
  LogOptions opt_;
  uint32_t bs_ = 0;
  unsigned prio_ = 0;
  uint64_t avg_ns_ = 0;
  uint64_t epoch_ns_ = 0;
  std::vector<std::unique_ptr<IoRecord[]>> chunks_;
  size_t used_ = 0;  // records in chunks_.back()
  Window win_[2];
  uint64_t window_start_ms_ = 0;
  uint64_t window_end_ns_ = 0;
  std::vector<WindowRecord> windows_;
};

}  // namespace bench
