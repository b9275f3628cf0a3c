// Clocks. now_ns() is CLOCK_MONOTONIC through the vDSO (no system call).
#pragma once

#include <cstdint>

namespace blkmq::base {

uint64_t now_ns();
constexpr uint64_t kNsPerUs = 1000;
constexpr uint64_t kNsPerMs = 1000 * 1000;
constexpr uint64_t kNsPerSec = 1000 * 1000 * 1000;

}  // namespace blkmq::base
