// Names of zone conditions, types and operations (include/blkmq/zoned.h).
#include "blkmq/zoned.h"

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
