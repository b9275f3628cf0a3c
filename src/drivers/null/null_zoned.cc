#include "drivers/null/null_zoned.h"

#include <algorithm>
#include <bit>

namespace blkmq::nullb {
namespace {

bool is_open(ZoneCond c) { return c == ZoneCond::imp_open || c == ZoneCond::exp_open; }

}  // namespace

Result<std::unique_ptr<ZoneTable>> ZoneTable::create(const ZonedConfig& in, std::vector<std::string>* notes) {
  ZonedConfig c = in;
  if (c.zone_size_sectors == 0 || !std::has_single_bit(c.zone_size_sectors))
    return Status::invalid("null: zone_size must be a power of two");
  if (c.zone_size_sectors > c.capacity_sectors)
    return Status::invalid("null: zone_size is larger than the device's capacity");
  if (c.zone_capacity_sectors == 0) c.zone_capacity_sectors = c.zone_size_sectors;
  if (c.zone_capacity_sectors > c.zone_size_sectors)
    return Status::invalid("null: zone_capacity is larger than zone_size");
  // null_blk refuses this pair: no real device has it.
  if (c.zone_capacity_sectors != c.zone_size_sectors && c.capacity_sectors % c.zone_size_sectors)
    return Status::invalid("null: a smaller last zone is not allowed with zone_capacity smaller than zone_size");
  const uint64_t nr = (c.capacity_sectors + c.zone_size_sectors - 1) / c.zone_size_sectors;
  if (nr > (uint64_t{1} << 31)) return Status::invalid("null: too many zones (make zone_size larger)");
  auto note = [&](std::string s) {
    if (notes) notes->push_back(std::move(s));
  };
  if (c.nr_conv >= nr) {
    c.nr_conv = static_cast<unsigned>(nr - 1);
    note("zone_nr_conv changed to " + std::to_string(c.nr_conv));
  }
  const unsigned seq = static_cast<unsigned>(nr) - c.nr_conv;
  // A limit at or above the sequential zones could never be reached.
  if (c.max_active >= seq) {
    if (c.max_active) note("zone_max_active disabled: not below the " + std::to_string(seq) + " sequential zones");
    c.max_active = 0;
  }
  if (c.max_active && c.max_open > c.max_active) {
    c.max_open = c.max_active;
    note("zone_max_open changed to zone_max_active, " + std::to_string(c.max_open));
  } else if (c.max_open >= seq) {
    if (c.max_open) note("zone_max_open disabled: not below the " + std::to_string(seq) + " sequential zones");
    c.max_open = 0;
  }
  auto t = std::unique_ptr<ZoneTable>(new ZoneTable(c));
  t->nr_zones_ = static_cast<unsigned>(nr);
  t->zones_ = std::make_unique<Slot[]>(nr);
  t->imp_close_next_ = c.nr_conv;
  uint64_t sector = 0;
  for (unsigned i = 0; i < nr; i++, sector += c.zone_size_sectors) {
    Zone& z = t->zones_[i].z;
    z.start = sector;
    z.len = std::min(c.zone_size_sectors, c.capacity_sectors - sector);
    if (i < c.nr_conv) {
      z.capacity = z.len;
      z.wp = z.start + z.len;
      z.type = ZoneType::conventional;
      z.cond = ZoneCond::not_wp;
      continue;
    }
    z.capacity = std::min(z.len, c.zone_capacity_sectors);
    z.type = ZoneType::seq_write_req;
    z.cond = c.full ? ZoneCond::full : ZoneCond::empty;
    z.wp = c.full ? z.start + z.capacity : z.start;
  }
  return t;
}

ZoneTable::ZoneTable(const ZonedConfig& cfg)
    : cfg_(cfg), zone_shift_(static_cast<unsigned>(std::countr_zero(cfg.zone_size_sectors))) {}

BlkStatus ZoneTable::check_active() const {
  if (!cfg_.max_active || nr_exp_open_ + nr_imp_open_ + nr_closed_ < cfg_.max_active) return BlkStatus::ok;
  return BlkStatus::zone_active_resource;
}

// At the open limit an implicitly open zone makes room, if closing it
// would not break the active limit (it stays active, as CLOSED).
BlkStatus ZoneTable::check_open() {
  if (!cfg_.max_open || nr_exp_open_ + nr_imp_open_ < cfg_.max_open) return BlkStatus::ok;
  if (nr_imp_open_ && check_active() == BlkStatus::ok) {
    close_one_imp_open();
    return BlkStatus::ok;
  }
  return BlkStatus::zone_open_resource;
}

// Whether an EMPTY or CLOSED zone may open: an EMPTY one also becomes
// active, a CLOSED one already is.
BlkStatus ZoneTable::check_resources(const Zone& z) {
  if (z.cond == ZoneCond::empty)
    if (BlkStatus st = check_active(); st != BlkStatus::ok) return st;
  return check_open();
}

// Round-robin from where the last one stopped, as null_blk, so that one
// zone is not closed again and again.
void ZoneTable::close_one_imp_open() {
  unsigned zno = imp_close_next_ >= nr_zones_ ? cfg_.nr_conv : imp_close_next_;
  for (unsigned i = cfg_.nr_conv; i < nr_zones_; i++) {
    Zone& z = zones_[zno].z;
    if (++zno >= nr_zones_) zno = cfg_.nr_conv;
    if (z.cond == ZoneCond::imp_open) {
      close_zone(z);
      imp_close_next_ = zno;
      return;
    }
  }
}

// Takes an open or closed zone out of the counts.
void ZoneTable::uncount(const Zone& z) {
  if (z.cond == ZoneCond::imp_open) nr_imp_open_--;
  if (z.cond == ZoneCond::exp_open) nr_exp_open_--;
  if (z.cond == ZoneCond::closed) nr_closed_--;
}

BlkStatus ZoneTable::close_zone(Zone& z) {
  if (z.cond == ZoneCond::closed) return BlkStatus::ok;
  if (!is_open(z.cond)) return BlkStatus::ioerr;
  uncount(z);
  if (z.wp == z.start) {
    z.cond = ZoneCond::empty;
  } else {
    z.cond = ZoneCond::closed;
    nr_closed_++;
  }
  return BlkStatus::ok;
}

// Whether an open or a finish may take the zone: from EMPTY or CLOSED it
// needs the resources, from an open zone nothing; *noop when the zone is
// already where the operation leads (`target`), which is no error.
BlkStatus ZoneTable::may_transition(const Zone& z, ZoneCond target, bool* noop) {
  *noop = z.cond == target;
  switch (z.cond) {
    case ZoneCond::empty:
    case ZoneCond::closed:
      return check_resources(z);
    case ZoneCond::imp_open:
    case ZoneCond::exp_open:
      return BlkStatus::ok;
    default:
      return *noop ? BlkStatus::ok : BlkStatus::ioerr;
  }
}

BlkStatus ZoneTable::open_zone(Zone& z) {
  bool noop;
  if (BlkStatus st = may_transition(z, ZoneCond::exp_open, &noop); st != BlkStatus::ok || noop) return st;
  uncount(z);
  z.cond = ZoneCond::exp_open;
  nr_exp_open_++;
  return BlkStatus::ok;
}

BlkStatus ZoneTable::finish_zone(Zone& z) {
  bool noop;
  if (BlkStatus st = may_transition(z, ZoneCond::full, &noop); st != BlkStatus::ok || noop) return st;
  uncount(z);
  z.cond = ZoneCond::full;
  z.wp = z.start + z.len;
  return BlkStatus::ok;
}

// True when the zone was reset (its data is to be discarded).
bool ZoneTable::reset_zone(Zone& z) {
  if (z.cond == ZoneCond::empty) return false;
  uncount(z);
  z.cond = ZoneCond::empty;
  z.wp = z.start;
  return true;
}

// The checks of a write to a sequential zone, and its implicit open.
// *sector becomes the write pointer for an append.
BlkStatus ZoneTable::start_write(Zone& z, uint64_t* sector, uint64_t nr_sectors, bool append) {
  if (z.cond == ZoneCond::full || z.cond == ZoneCond::readonly || z.cond == ZoneCond::offline)
    return BlkStatus::ioerr;
  if (append)
    *sector = z.wp;
  else if (*sector != z.wp)
    return BlkStatus::ioerr;
  if (z.wp + nr_sectors > z.start + z.capacity) return BlkStatus::ioerr;
  if (z.cond == ZoneCond::empty || z.cond == ZoneCond::closed) {
    if (BlkStatus st = check_resources(z); st != BlkStatus::ok) return st;
    uncount(z);
    z.cond = ZoneCond::imp_open;
    nr_imp_open_++;
  }
  return BlkStatus::ok;
}

BlkStatus ZoneTable::write(uint64_t sector, uint64_t nr_sectors, bool append, const Transfer& xfer,
                           uint64_t* written_at) {
  const unsigned zno = zone_no(sector);
  if (zno >= nr_zones_ || nr_sectors == 0) return BlkStatus::inval;
  Slot& s = zones_[zno];
  std::lock_guard io(s.io_mu);
  bool conventional;
  {
    std::lock_guard lk(mu_);
    conventional = s.z.type == ZoneType::conventional;
    if (conventional && append) return BlkStatus::ioerr;
    // The core splits I/O at zone boundaries (chunk_sectors).
    if (!append && sector + nr_sectors > s.z.start + s.z.len) return BlkStatus::ioerr;
    if (!conventional)
      if (BlkStatus st = start_write(s.z, &sector, nr_sectors, append); st != BlkStatus::ok) return st;
  }
  const BlkStatus st = xfer(sector, nr_sectors);
  if (written_at) *written_at = sector;
  if (conventional || st != BlkStatus::ok) return st;
  std::lock_guard lk(mu_);
  Zone& z = s.z;
  z.wp += nr_sectors;
  // Another write's implicit close may have made it CLOSED meanwhile.
  if (z.wp == z.start + z.capacity) {
    uncount(z);
    z.cond = ZoneCond::full;
  }
  return st;
}

BlkStatus ZoneTable::read(uint64_t sector, uint64_t nr_sectors, const Transfer& xfer, uint64_t* valid_sectors) {
  const unsigned zno = zone_no(sector);
  if (zno >= nr_zones_) return BlkStatus::inval;
  Slot& s = zones_[zno];
  std::lock_guard io(s.io_mu);
  uint64_t valid = nr_sectors;
  {
    std::lock_guard lk(mu_);
    const Zone& z = s.z;
    if (z.cond == ZoneCond::offline) return BlkStatus::ioerr;
    if (sector + nr_sectors > z.start + z.len) return BlkStatus::ioerr;
    // A read-only zone's pointer is kZoneInvalidWp: all of it is read.
    if (z.type != ZoneType::conventional && sector + nr_sectors > z.wp) valid = sector > z.wp ? 0 : z.wp - sector;
  }
  *valid_sectors = valid;
  return valid ? xfer(sector, valid) : BlkStatus::ok;
}

BlkStatus ZoneTable::manage(ZoneOp op, uint64_t sector, const Discard& discard) {
  if (op == ZoneOp::reset_all) {
    for (unsigned i = cfg_.nr_conv; i < nr_zones_; i++) {
      Slot& s = zones_[i];
      std::lock_guard io(s.io_mu);
      bool reset = false;
      {
        std::lock_guard lk(mu_);
        if (s.z.cond != ZoneCond::readonly && s.z.cond != ZoneCond::offline) reset = reset_zone(s.z);
      }
      if (reset && discard) discard(s.z.start, s.z.len);
    }
    return BlkStatus::ok;
  }
  const unsigned zno = zone_no(sector);
  if (zno >= nr_zones_) return BlkStatus::inval;
  Slot& s = zones_[zno];
  std::lock_guard io(s.io_mu);
  BlkStatus st = BlkStatus::ok;
  bool reset = false;
  {
    std::lock_guard lk(mu_);
    Zone& z = s.z;
    if (z.type == ZoneType::conventional || z.cond == ZoneCond::readonly || z.cond == ZoneCond::offline)
      return BlkStatus::ioerr;
    switch (op) {
      case ZoneOp::reset: reset = reset_zone(z); break;
      case ZoneOp::open: st = open_zone(z); break;
      case ZoneOp::close: st = close_zone(z); break;
      case ZoneOp::finish: st = finish_zone(z); break;
      case ZoneOp::reset_all: break;
    }
  }
  if (reset && discard) discard(s.z.start, s.z.len);
  return st;
}

// null_blk finishes the zone first to free its resources; a finish the
// limits refuse would leave it counted, so this drops it from the counts
// directly (the condition replaces FULL at once anyway).
Status ZoneTable::set_condition(uint64_t sector, ZoneCond cond, const Discard& discard) {
  if (cond != ZoneCond::readonly && cond != ZoneCond::offline)
    return Status::invalid("null: a zone can be made read-only or offline only");
  const unsigned zno = zone_no(sector);
  if (zno >= nr_zones_) return Status::invalid("null: sector " + std::to_string(sector) + " is out of range");
  Slot& s = zones_[zno];
  std::lock_guard io(s.io_mu);
  bool cleared = false;
  {
    std::lock_guard lk(mu_);
    Zone& z = s.z;
    if (z.type == ZoneType::conventional)
      return Status::invalid("null: the condition of a conventional zone cannot change");
    if (z.cond == cond) {
      z.cond = ZoneCond::empty;
      z.wp = z.start;
      cleared = true;
    } else {
      uncount(z);
      z.cond = cond;
      z.wp = kZoneInvalidWp;
    }
  }
  if (cleared && discard) discard(s.z.start, s.z.len);
  return Status::OK();
}

std::vector<Zone> ZoneTable::report(uint64_t sector, unsigned max) const {
  std::vector<Zone> out;
  const unsigned first = zone_no(sector);
  if (first >= nr_zones_) return out;
  const unsigned n = std::min(max, nr_zones_ - first);
  out.reserve(n);
  std::lock_guard lk(mu_);
  for (unsigned i = 0; i < n; i++) out.push_back(zones_[first + i].z);
  return out;
}

unsigned ZoneTable::nr_open() const {
  std::lock_guard lk(mu_);
  return nr_imp_open_ + nr_exp_open_;
}

unsigned ZoneTable::nr_active() const {
  std::lock_guard lk(mu_);
  return nr_imp_open_ + nr_exp_open_ + nr_closed_;
}

}  // namespace blkmq::nullb
