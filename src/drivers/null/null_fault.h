// Fault injection for the null driver with the kernel's fault_attr
// semantics, configured by null_blk's "<interval>,<probability>,<space>,<times>"
// strings (module parameters timeout=, requeue=, init_hctx=).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "blkmq/status.h"

namespace blkmq::nullb {

// A parsed fault string. Default: not configured (never fails).
struct FaultConfig {
  bool configured = false;
  uint64_t interval = 1;     // fail at most every Nth eligible call (0 and 1: every call)
  unsigned probability = 0;  // percent, 0..100
  uint64_t space = 0;        // bytes let through before failures start (0: none)
  int64_t times = 0;         // failures left; -1: unlimited

  bool operator==(const FaultConfig&) const = default;
};

// Parses "<interval>,<probability>,<space>,<times>" (all four required, as the
// kernel's setup_fault_attr). An empty string means "not configured". Errors
// name `param` and the accepted ranges.
Result<FaultConfig> parse_fault_config(std::string_view param, std::string_view value);
// The string form parse_fault_config accepts ("" when not configured).
std::string format_fault_config(const FaultConfig& cfg);

// Runtime state of one fault point (struct fault_attr). should_fail() is
// thread-safe; configure() must not race with it (call it before I/O starts).
class FaultAttr {
 public:
  FaultAttr() = default;
  FaultAttr(const FaultAttr&) = delete;
  FaultAttr& operator=(const FaultAttr&) = delete;

  void configure(const FaultConfig& cfg);
  // False when this fault point can never fire; callers test it first so a
  // disabled point costs one predictable branch.
  bool enabled() const { return enabled_; }
  // The kernel's should_fail(attr, size): no failure while `times` is 0;
  // while space > size, consume size from space and pass; with interval > 1
  // only every interval-th call may fail; then fail with `probability` %.
  // A failure decrements times unless it is -1.
  bool should_fail(uint64_t size);
  int64_t times_left() const { return times_.load(std::memory_order_relaxed); }

 private:
  bool enabled_ = false;
  unsigned probability_ = 0;
  uint64_t interval_ = 1;
  std::atomic<int64_t> times_{0};
  std::atomic<int64_t> space_{0};
  std::atomic<uint64_t> count_{0};
};

}  // namespace blkmq::nullb
