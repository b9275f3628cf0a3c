// Helpers that keep the base tests bounded: iteration counts scaled by
// BLKMQ_STRESS_SCALE (sanitizer runs use < 1) and wall-clock limits.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace blkmq::test {

// BLKMQ_STRESS_SCALE scales durations and counts down under sanitizers.
inline double stress_scale() {
  const char* s = std::getenv("BLKMQ_STRESS_SCALE");
  double v = s ? std::atof(s) : 1.0;
  return v > 0 ? v : 1.0;
}

inline unsigned scaled(unsigned n) {
  return std::max(1u, static_cast<unsigned>(n * stress_scale()));
}

class TimeLimit {
 public:
  explicit TimeLimit(std::chrono::milliseconds d) : end_(std::chrono::steady_clock::now() + d) {}
  bool passed() const { return std::chrono::steady_clock::now() >= end_; }

 private:
  std::chrono::steady_clock::time_point end_;
};

}  // namespace blkmq::test
