// Zoned queues: the names of zone conditions, types and operations
// (include/blkmq/zoned.h), the zoned limits' checks, and the Queue's zone
// report and management.
#include "blkmq/zoned.h"

#include <algorithm>
#include <cerrno>

#include "core/core.h"

namespace blkmq {

const char* zone_cond_short_name(ZoneCond c) {
  switch (c) {
    case ZoneCond::not_wp: return "nw";
    case ZoneCond::empty: return "em";
    case ZoneCond::imp_open: return "oi";
    case ZoneCond::exp_open: return "oe";
    case ZoneCond::closed: return "cl";
    case ZoneCond::readonly: return "ro";
    case ZoneCond::full: return "fu";
    case ZoneCond::offline: return "of";
  }
  return "??";
}

const char* zone_type_name(ZoneType t) {
  switch (t) {
    case ZoneType::conventional: return "CONVENTIONAL";
    case ZoneType::seq_write_req: return "SEQ_WRITE_REQUIRED";
    case ZoneType::seq_write_pref: return "SEQ_WRITE_PREFERRED";
  }
  return "UNKNOWN";
}

const char* zone_op_name(ZoneOp op) {
  switch (op) {
    case ZoneOp::reset: return "reset";
    case ZoneOp::reset_all: return "reset_all";
    case ZoneOp::open: return "open";
    case ZoneOp::close: return "close";
    case ZoneOp::finish: return "finish";
  }
  return "unknown";
}

}  // namespace blkmq

// ------------------------------------------------- the queue's zoned side -

namespace blkmq {

namespace {

Status check_chunk(const QueueLimits& l) {
  const uint32_t c = l.chunk_sectors;
  if (c && ((c & (c - 1)) || (uint64_t{c} << kSectorShift) < l.logical_block_size))
    return Status::invalid("chunk_sectors must be a power of two of at least one logical block, got " +
                           std::to_string(c));
  return Status::OK();
}

}  // namespace

Status QueueImpl::init_zoned() {
  QueueLimits& l = limits_;
  if (Status st = check_chunk(l); !st) return st;
  if (!l.zoned) {
    l.max_zone_append_sectors = l.zone_write_granularity = 0;
    l.max_open_zones = l.max_active_zones = 0;
    return Status::OK();
  }
  if (!l.chunk_sectors) return Status::invalid("a zoned queue needs its zone size in chunk_sectors");
  if (!cfg_.report_zones) return Status::invalid("a zoned queue needs its driver's report_zones");
  if (l.zone_write_granularity == 0 || l.zone_write_granularity < l.logical_block_size)
    l.zone_write_granularity = l.logical_block_size;
  // The emulation takes what one request takes; a native limit is capped
  // at it too (blk_validate_zoned_limits).
  l.max_zone_append_sectors = std::min(l.max_zone_append_sectors, l.max_hw_sectors);
  if (l.max_active_zones && l.max_open_zones > l.max_active_zones) l.max_open_zones = l.max_active_zones;
  auto z = ZoneWplugs::create(this, &l.max_open_zones);
  if (!z) return Status::invalid(cfg_.name + ": zones: " + z.status().message());
  zwp_ = std::move(*z);
  return Status::OK();
}

Result<std::vector<Zone>> Queue::report_zones(uint64_t sector, unsigned max) const {
  const QueueImpl* q = to_impl(this);
  if (!q->limits_.zoned) return Status::error(EOPNOTSUPP, q->cfg_.name + ": not a zoned device");
  if (sector >= q->limits_.capacity_sectors)
    return Status::error(EINVAL, q->cfg_.name + ": sector " + std::to_string(sector) + " is past the end");
  auto r = q->cfg_.report_zones(sector, max);
  if (r) q->zwp_->sync_from_report(*r);
  return r;
}

BlkStatus Queue::zone_mgmt_sync(ZoneOp op, uint64_t sector) {
  Bio bio;
  bio.op = zone_req_op(op);
  bio.sector = sector;
  return submit_bio_wait(this, &bio);
}

unsigned Queue::nr_zones() const {
  const QueueImpl* q = to_impl(this);
  return q->zwp_ ? q->zwp_->nr_zones() : 0;
}

}  // namespace blkmq
