// The ublk driver ("ublk"): user-space targets behind a blk-mq queue. The
// public API is include/blkmq/ublk.h; this header only exists so that the
// core can force the driver into a static link (see null.h).
#pragma once

namespace blkmq {

// Makes sure the "ublk" driver is registered. Idempotent and thread-safe.
void ublk_driver_link();

}  // namespace blkmq
