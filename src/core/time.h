// Time sources for the core. A queue keeps time by its runtime's clock
// (QueueImpl::clock_ns and coarse_clock_ns in core.h); on real time those
// are the two clocks below. Accounting and deadlines read the precise one
// through blk_time_get_ns, cached in the plug while one is active (as the
// kernel caches plug->cur_ktime); mq-deadline's jiffies decisions read the
// coarse one.
#pragma once

#include <cstdint>

#include "base/clock.h"

namespace blkmq {

// The core's names for base/clock.h's two clocks.
inline uint64_t coarse_now_ns() { return base::coarse_now_ns(); }
inline uint64_t precise_now_ns() { return base::now_ns(); }

class QueueImpl;

// Precise time by q's clock; the real clock is cached in the calling
// thread's plug if it has one (a manual runtime's is read every time).
uint64_t blk_time_get_ns(const QueueImpl* q);

}  // namespace blkmq
