// Zoned block devices: the zone descriptor a report returns, its types and
// conditions, and the zone management operations, with the values and
// meanings of linux/blkzoned.h (struct blk_zone, enum blk_zone_cond) so
// that a report reads as the kernel's BLKREPORTZONE does.
#pragma once

#include <cstdint>

namespace blkmq {

// blk_zone_type.
enum class ZoneType : uint8_t {
  conventional = 1,    // written anywhere, no write pointer
  seq_write_req = 2,   // host-managed: writes at the write pointer only
  seq_write_pref = 3,  // host-aware: prefers them there
};

// blk_zone_cond, with the kernel's values.
enum class ZoneCond : uint8_t {
  not_wp = 0x0,    // conventional: no write pointer
  empty = 0x1,     // write pointer at the start
  imp_open = 0x2,  // opened by a write
  exp_open = 0x3,  // opened by a zone open
  closed = 0x4,    // written, then closed: counts as active, not open
  readonly = 0xd,  // no writes (a fault: the device made it so)
  full = 0xe,      // written to its capacity, or finished
  offline = 0xf,   // neither reads nor writes
};

// One zone, in 512-byte sectors, as struct blk_zone. A read-only or
// offline zone has no valid write pointer: wp is kZoneInvalidWp then.
struct Zone {
  uint64_t start = 0;
  uint64_t len = 0;       // the zone size; the last zone may be shorter
  uint64_t wp = 0;        // write pointer
  uint64_t capacity = 0;  // writable sectors from start (<= len)
  ZoneType type = ZoneType::seq_write_req;
  ZoneCond cond = ZoneCond::empty;

  // Field by field (the public headers stay C++17: no defaulted ==).
  bool operator==(const Zone& o) const {
    return start == o.start && len == o.len && wp == o.wp && capacity == o.capacity && type == o.type &&
           cond == o.cond;
  }
};
constexpr uint64_t kZoneInvalidWp = ~uint64_t{0};

// Zone management operations (REQ_OP_ZONE_*; append is a write).
enum class ZoneOp : uint8_t { reset, reset_all, open, close, finish };

// Names as util-linux's blkzone prints them: "em", "oi", "oe", "cl", "ro",
// "fu", "of", "nw"; and the type's "CONVENTIONAL", "SEQ_WRITE_REQUIRED",
// "SEQ_WRITE_PREFERRED". Any context; static strings.
const char* zone_cond_short_name(ZoneCond c);
const char* zone_type_name(ZoneType t);
// "reset", "reset_all", "open", "close", "finish". Any context.
const char* zone_op_name(ZoneOp op);

}  // namespace blkmq
