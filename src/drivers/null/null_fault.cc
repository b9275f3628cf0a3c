#include "drivers/null/null_fault.h"

#include <cstdint>
#include <cstdio>
#include <thread>

#include "base/parse.h"

namespace blkmq::nullb {
namespace {

constexpr const char* kFaultSyntax =
    "\"<interval>,<probability>,<space>,<times>\": four integers, interval >= 0, "
    "probability 0..100 (percent), space >= 0 (bytes), times >= -1 (-1 = unlimited)";

// A cheap per-thread generator: fault decisions need no cryptographic
// quality, only independence between threads and no shared state.
uint32_t fault_random() {
  thread_local uint64_t state = [] {
    uint64_t seed = std::hash<std::thread::id>()(std::this_thread::get_id());
    return seed * 0x9E3779B97F4A7C15ull | 1;
  }();
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return static_cast<uint32_t>(state >> 32);
}

}  // namespace

Result<FaultConfig> parse_fault_config(std::string_view param, std::string_view value) {
  FaultConfig cfg;
  if (value.empty()) return cfg;
  const std::string label = "null: parameter '" + std::string(param) + "'";
  std::string_view parts[4];
  std::string_view rest = value;
  for (int i = 0; i < 4; i++) {
    size_t comma = rest.find(',');
    if ((i < 3) != (comma != std::string_view::npos))
      return base::invalid_value(label, value, "is not a fault spec", kFaultSyntax);
    parts[i] = i < 3 ? rest.substr(0, comma) : rest;
    if (i < 3) rest.remove_prefix(comma + 1);
  }
  auto interval = base::parse_uint(label + ", interval", parts[0]);
  if (!interval) return interval.status();
  auto probability = base::parse_uint(label + ", probability", parts[1], 0, 100, "percent");
  if (!probability) return probability.status();
  auto space = base::parse_uint(label + ", space", parts[2], 0, INT64_MAX, "bytes");
  if (!space) return space.status();
  auto times = base::parse_int(label + ", times", parts[3], -1, INT64_MAX, "-1 = unlimited");
  if (!times) return times.status();
  cfg.interval = *interval;
  cfg.probability = static_cast<unsigned>(*probability);
  cfg.space = *space;
  cfg.times = *times;
  cfg.configured = true;
  return cfg;
}

std::string format_fault_config(const FaultConfig& cfg) {
  if (!cfg.configured) return "";
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%llu,%u,%llu,%lld",
                static_cast<unsigned long long>(cfg.interval), cfg.probability,
                static_cast<unsigned long long>(cfg.space), static_cast<long long>(cfg.times));
  return buf;
}

void FaultAttr::configure(const FaultConfig& cfg) {
  probability_ = cfg.probability;
  interval_ = cfg.interval;
  times_.store(cfg.times, std::memory_order_relaxed);
  space_.store(static_cast<int64_t>(cfg.space), std::memory_order_relaxed);
  count_.store(0, std::memory_order_relaxed);
  // probability 0 or times 0 can never fail: keep the I/O path's test false.
  enabled_ = cfg.configured && cfg.probability > 0 && cfg.times != 0;
}

bool FaultAttr::should_fail(uint64_t size) {
  if (probability_ == 0) return false;
  if (times_.load(std::memory_order_relaxed) == 0) return false;
  const auto ssize = static_cast<int64_t>(size);
  if (space_.load(std::memory_order_relaxed) > ssize) {
    space_.fetch_sub(ssize, std::memory_order_relaxed);
    return false;
  }
  if (interval_ > 1) {
    uint64_t n = count_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (n % interval_) return false;
  }
  if (probability_ <= fault_random() % 100) return false;
  // Decrement unless unlimited or already used up by a racing caller.
  int64_t t = times_.load(std::memory_order_relaxed);
  while (t > 0 && !times_.compare_exchange_weak(t, t - 1, std::memory_order_relaxed)) {
  }
  return true;
}

}  // namespace blkmq::nullb
