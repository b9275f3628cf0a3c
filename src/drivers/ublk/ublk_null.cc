// The built-in null target: every I/O completes at once, from the server
// thread, moving no data. What `blkmq bench --driver=ublk` measures by
// default: the cost of the hand-off and the completion path alone. Zoned
// (zoned=1), it keeps null_blk's zone rules (nullb::ZoneTable) and
// answers zone management, appends and reports, as a ublk zoned target.
#include "drivers/null/null_zoned.h"
#include "drivers/ublk/ublk_targets.h"

namespace blkmq::ublkd {
namespace {

class NullTarget final : public UblkTarget {
 public:
  void handle(UblkIo& io) override { io.complete(BlkStatus::ok); }
};


class ZonedNullTarget final : public UblkTarget {
 public:
  explicit ZonedNullTarget(std::unique_ptr<nullb::ZoneTable> t) : zones_(std::move(t)) {}

  // No data moves: only the write pointers and the zone conditions.
  void handle(UblkIo& io) override {
    const uint64_t sector = io.offset() >> kSectorShift;
    const uint64_t nr = io.length() >> kSectorShift;
    auto none = [](uint64_t, uint64_t) { return BlkStatus::ok; };
    switch (io.op()) {
      case ReqOp::read: {
        uint64_t valid = 0;
        io.complete(zones_->read(sector, nr, none, &valid));
        return;
      }
      case ReqOp::write:
      case ReqOp::zone_append: {
        uint64_t at = sector;
        const BlkStatus st = zones_->write(sector, nr, io.op() == ReqOp::zone_append, none, &at);
        if (st == BlkStatus::ok) io.set_zone_append_offset(at << kSectorShift);
        io.complete(st);
        return;
      }
      case ReqOp::zone_reset:
      case ReqOp::zone_reset_all:
      case ReqOp::zone_open:
      case ReqOp::zone_close:
      case ReqOp::zone_finish:
        io.complete(zones_->manage(zone_op_of(io.op()), sector, [](uint64_t, uint64_t) {}));
        return;
      default:  // flush: nothing is cached
        io.complete(BlkStatus::ok);
        return;
    }
  }

  Result<std::vector<Zone>> report_zones(uint64_t sector, unsigned max) override {
    if (sector >= zones_->config().capacity_sectors) return Status::invalid("ublk null: report past the end");
    return zones_->report(sector, max);
  }

 private:
  std::unique_ptr<nullb::ZoneTable> zones_;
};

}  // namespace

std::unique_ptr<UblkTarget> make_null_target() { return std::make_unique<NullTarget>(); }

Result<std::unique_ptr<UblkTarget>> make_zoned_null_target(UblkOptions* opts) {
  nullb::ZonedConfig c;
  c.capacity_sectors = opts->size >> kSectorShift;
  c.zone_size_sectors = opts->zone_sectors;
  c.max_open = opts->max_open_zones;
  c.max_active = opts->max_active_zones;
  auto t = nullb::ZoneTable::create(c, nullptr);
  if (!t) return Status::invalid("ublk: " + t.status().message());
  // The table's clamps are the device's limits.
  opts->max_open_zones = (*t)->config().max_open;
  opts->max_active_zones = (*t)->config().max_active;
  return std::unique_ptr<UblkTarget>(std::make_unique<ZonedNullTarget>(std::move(*t)));
}

}  // namespace blkmq::ublkd
