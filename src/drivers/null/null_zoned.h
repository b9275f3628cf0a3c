// null_blk's zoned mode: the zones of a host-managed device and null_blk's
// rules for them (drivers/block/null_blk/zoned.c): writes only at the
// write pointer and within the zone's capacity, implicit open on the first
// write, the open and active limits with an implicitly open zone closed
// round-robin to make room, explicit open, close, finish and reset, reads
// past the write pointer, conventional zones, and read-only or offline
// zones for fault injection. The data itself is the caller's: the table
// runs the caller's transfer under the zone's lock and moves the write
// pointer only when it succeeds.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "blkmq/status.h"
#include "blkmq/zoned.h"

namespace blkmq::nullb {

// The zoned parameters, in 512-byte sectors; null_blk's are MiB.
struct ZonedConfig {
  uint64_t capacity_sectors = 0;
  uint64_t zone_size_sectors = 0;      // power of two
  uint64_t zone_capacity_sectors = 0;  // 0: the zone size
  unsigned nr_conv = 0;                // conventional zones at the start
  unsigned max_open = 0;               // 0: no limit
  unsigned max_active = 0;             // 0: no limit
  bool full = false;                   // sequential zones start FULL (zone_full)
};

class ZoneTable {
 public:
  // Checks the parameters as null_init_zoned_dev does and applies its
  // clamps: conventional zones to nr_zones - 1, a limit at or above the
  // number of sequential zones disabled, max_open to max_active. Each
  // clamp is described in *notes (as null_blk's pr_info). Control context.
  static Result<std::unique_ptr<ZoneTable>> create(const ZonedConfig& cfg, std::vector<std::string>* notes);

  // The parameters after the clamps.
  const ZonedConfig& config() const { return cfg_; }
  unsigned nr_zones() const { return nr_zones_; }
  unsigned zone_no(uint64_t sector) const { return static_cast<unsigned>(sector >> zone_shift_); }

  // The transfer of a write or read, run under the zone's lock: gets the
  // sector and length to move (a read may be cut at the write pointer).
  using Transfer = std::function<BlkStatus(uint64_t sector, uint64_t nr_sectors)>;
  // A discard of the zone's data (reset, and a fault cleared).
  using Discard = std::function<void(uint64_t sector, uint64_t nr_sectors)>;

  // A write of nr_sectors at `sector`, or an append to the zone holding
  // `sector` (written at its write pointer, which *written_at returns).
  // Fails with ioerr off the write pointer, past the capacity, on a full,
  // read-only or offline zone or an append to a conventional one; with a
  // zone resource status where the limits refuse the implicit open. The
  // write must lie in one zone. Any thread; takes the zone's lock.
  BlkStatus write(uint64_t sector, uint64_t nr_sectors, bool append, const Transfer& xfer,
                  uint64_t* written_at = nullptr);
  // A read: offline zones fail; the part past the write pointer of a
  // sequential zone is not transferred (`xfer` gets the part below it,
  // possibly none, and the caller fills the rest with zeroes, as null_blk
  // does). Returns ioerr or what xfer returned. Any thread.
  BlkStatus read(uint64_t sector, uint64_t nr_sectors, const Transfer& xfer, uint64_t* valid_sectors);
  // reset, open, close, finish of the zone holding `sector`; reset_all
  // resets every written sequential zone. Any thread.
  BlkStatus manage(ZoneOp op, uint64_t sector, const Discard& discard);
  // Fault injection (null_blk's zone_readonly / zone_offline): makes the
  // zone holding `sector` read-only or offline, finishing it first; asked
  // for the condition it already has, it comes back EMPTY instead.
  // Conventional zones and sectors past the device are refused. Any thread.
  Status set_condition(uint64_t sector, ZoneCond cond, const Discard& discard);

  // Up to `max` zones from the one holding `sector`: a snapshot of each.
  std::vector<Zone> report(uint64_t sector, unsigned max) const;
  // Open (explicit + implicit) and active (open + closed) zone counts.
  unsigned nr_open() const;
  unsigned nr_active() const;

 private:
  struct Slot {
    std::mutex io_mu;  // held across a transfer: one write or read of the zone at a time
    Zone z;            // under mu_
  };
  explicit ZoneTable(const ZonedConfig& cfg);

  // With mu_ held. The resource rules (null_check_zone_resources).
  BlkStatus check_active() const;
  BlkStatus check_open();
  BlkStatus check_resources(const Zone& z);
  void close_one_imp_open();
  void uncount(const Zone& z);
  BlkStatus start_write(Zone& z, uint64_t* sector, uint64_t nr_sectors, bool append);
  BlkStatus close_zone(Zone& z);
  BlkStatus may_transition(const Zone& z, ZoneCond target, bool* noop);
  BlkStatus open_zone(Zone& z);
  BlkStatus finish_zone(Zone& z);
  bool reset_zone(Zone& z);

  ZonedConfig cfg_;
  unsigned zone_shift_ = 0;
  unsigned nr_zones_ = 0;
  std::unique_ptr<Slot[]> zones_;
  // Every zone's fields, the counts by condition and the round-robin
  // cursor of implicit close. One lock where null_blk has a lock per zone
  // and one for the counts: an implicit close changes another zone than
  // the one written, which a per-zone lock alone would not cover. Taken
  // inside a zone's io_mu, never across a transfer.
  mutable std::mutex mu_;
  unsigned nr_imp_open_ = 0;
  unsigned nr_exp_open_ = 0;
  unsigned nr_closed_ = 0;
  unsigned imp_close_next_ = 0;
};

}  // namespace blkmq::nullb
