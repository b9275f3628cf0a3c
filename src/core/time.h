// Time sources for the core. Request deadlines and io_ticks use the coarse
// clock (the jiffies analogue: a vDSO read without rdtsc); accounting uses
// the precise clock, cached in the plug while one is active (as the kernel
// caches plug->cur_ktime).
#pragma once

#include <time.h>

#include <cstdint>

namespace blkmq {

inline uint64_t coarse_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t precise_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

class QueueImpl;

// Precise time by q's clock; the real clock is cached in the calling
// thread's plug if it has one (a manual runtime's is read every time).
uint64_t blk_time_get_ns(const QueueImpl* q);

}  // namespace blkmq
