// fio's zonemode=zbd for `blkmq bench` (fio's zbd.c): writes go at the
// write pointer of their zone, within an open-zone limit; a full zone is
// reset and written again (counted: fio's "N zone resets"); reads stay
// below the write pointer unless read_beyond_wp. The zones are the
// device's (Queue::report_zones) or, on a device without zones, emulated
// from zonesize and zonecapacity as fio emulates them on a regular file.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "blkmq/queue.h"
#include "bench/randmap.h"

namespace bench {

using blkmq::Status;

// The options, as fio's.
struct ZbdOptions {
  bool enabled = false;            // zonemode=zbd (none: false)
  uint64_t zone_size = 0;          // zonesize, bytes; 0: the device's
  uint64_t zone_capacity = 0;      // zonecapacity, bytes (emulated zones only); 0: the zone size
  uint64_t zone_range = 0;         // zonerange: must equal the zone size under zbd
  bool read_beyond_wp = false;
  unsigned max_open_zones = 0;     // 0: the device's limit
  unsigned job_max_open_zones = 0; // 0: none per job
  bool ignore_zone_limits = false;
  double reset_threshold = 1.0;    // zone_reset_threshold, 0..1
  double reset_frequency = 0.0;    // zone_reset_frequency, 0..1; 0: off
};

// The zones of one device, shared by every zbd job on it (fio's
// zoned_block_device_info): the write pointers as the jobs submit, the set
// of zones being written, and the written bytes. Any job thread; one lock.
class ZbdDevice {
 public:
  // The state of `q`, made on first use and shared while a job holds it.
  // Control thread (Job::prepare).
  static blkmq::Result<std::shared_ptr<ZbdDevice>> get(blkmq::Queue& q, const ZbdOptions& o);

  struct Zone {
    uint64_t start = 0, len = 0, capacity = 0;  // bytes
    uint64_t wp = 0;                            // bytes, as submitted
    bool conventional = false;
    int writer = -1;  // the job that opened it for writing (job_max_open_zones), -1: none
  };

  blkmq::Queue& queue() const { return q_; }
  uint64_t zone_size() const { return zone_size_; }
  bool emulated() const { return emulated_; }
  unsigned max_open() const { return max_open_; }

 private:
  friend class ZbdJob;
  explicit ZbdDevice(blkmq::Queue& q) : q_(q) {}
  Status load(const ZbdOptions& o);
  // The open-zone rules (zbd_open_zone), with mu held.
  bool open_zone(unsigned z, int job, unsigned job_limit);
  void close_zone(unsigned z);

  blkmq::Queue& q_;
  bool emulated_ = false;
  uint64_t zone_size_ = 0;
  unsigned max_open_ = 0;
  std::mutex mu;
  // Held by a writing job from the moment its writes take their places at
  // the write pointers until they are submitted, so that no job's write
  // reaches a zone ahead of another's that took an earlier place (fio
  // keeps the zone locked from zbd_adjust_block until the I/O is queued).
  std::mutex submit_mu;
  std::vector<Zone> zones;
  std::vector<unsigned> open;  // zones being written
  uint64_t data_bytes = 0;     // below the write pointers of the sequential zones
};

// One job's side (fio's zbd_adjust_block and zbd_queue_io).
class ZbdJob {
 public:
  // base and size: the job's region in bytes, aligned to zones here as fio
  // does (offset rounded up, size down), with *notes saying so.
  // random: the job's offsets are random (a sequential read past the
  // pointer moves to the next zone with data; a random one stays in its
  // zone's data).
  static blkmq::Result<std::unique_ptr<ZbdJob>> create(std::shared_ptr<ZbdDevice> dev, const ZbdOptions& o,
                                                      int job, uint64_t* base, uint64_t* size, uint32_t bs,
                                                      bool random, uint64_t seed, std::string* notes);

  enum class Adjust : uint8_t { ok, reset_first, eof };
  // The I/O the generator chose at *offset, of *len bytes: moved to the
  // zone's write pointer (a write) or below it (a read), *len shortened to
  // the zone's end. reset_first: the zone must be reset before the write
  // (full, or the reset threshold's turn); quiesce, call reset(*zone),
  // then ask again. eof: no zone can take the I/O; the job is done.
  Adjust adjust(bool write, uint64_t* offset, uint32_t* len, unsigned* zone);
  // Resets zone z (a zone command on a zoned device; the emulation only
  // moves its pointer) and counts it. Job thread, with nothing in flight.
  Status reset(unsigned z);
  uint64_t zone_resets() const { return resets_; }
  // The device's submission order lock (ZbdDevice::submit_mu), for a job
  // about to place and submit writes. Job thread.
  std::unique_lock<std::mutex> order_writes() { return std::unique_lock<std::mutex>(dev_->submit_mu); }

 private:
  ZbdJob(std::shared_ptr<ZbdDevice> dev, const ZbdOptions& o, int job, uint32_t bs, bool random, uint64_t seed)
      : dev_(std::move(dev)), o_(o), job_(job), bs_(bs), random_(random), rng_(seed) {}
  Adjust adjust_write(uint64_t* offset, uint32_t* len, unsigned* zone);
  Adjust adjust_read(uint64_t* offset, uint32_t* len);
  unsigned zone_of(uint64_t off) const { return static_cast<unsigned>(off / dev_->zone_size_); }

  std::shared_ptr<ZbdDevice> dev_;
  ZbdOptions o_;
  int job_;
  uint32_t bs_;
  bool random_;
  unsigned first_ = 0, end_ = 0;  // the job's zones [first_, end_)
  uint64_t range_bytes_ = 0;
  uint64_t resets_ = 0;
  uint64_t write_cnt_ = 0;        // writes until the next threshold reset
  bool retry_ = false;            // the next write is the one a reset was for
  Xoshiro256 rng_;
};

}  // namespace bench
