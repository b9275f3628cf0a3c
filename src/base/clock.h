// Clocks: the one place the project reads the monotonic clock. Both are
// vDSO reads (no system call). Any context.
#pragma once

#include <time.h>

#include <cstdint>

namespace blkmq::base {

constexpr uint64_t kNsPerUs = 1000;
constexpr uint64_t kNsPerMs = 1000 * 1000;
constexpr uint64_t kNsPerSec = 1000 * 1000 * 1000;

// Any clock (a thread's CPU clock too), 0 if it cannot be read (a thread
// that has exited).
inline uint64_t clock_ns(clockid_t id) {
  timespec ts;
  if (clock_gettime(id, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * kNsPerSec + static_cast<uint64_t>(ts.tv_nsec);
}

// CLOCK_MONOTONIC, in ns (ktime_get).
inline uint64_t now_ns() { return clock_ns(CLOCK_MONOTONIC); }
// CLOCK_MONOTONIC_COARSE: the jiffies analogue, a read without the TSC that
// moves once a timer tick (a few ms).
inline uint64_t coarse_now_ns() { return clock_ns(CLOCK_MONOTONIC_COARSE); }

}  // namespace blkmq::base
