// Parsing helpers for queue/iosched/ tunables, shared by the schedulers.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "blkmq/status.h"

namespace blkmq {

// A decimal integer in lo..hi for tunable `name`; a clear error naming the
// tunable otherwise.
inline Result<int64_t> parse_iosched_int(std::string_view name, std::string_view v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size())
    return Status::invalid("queue/iosched/" + std::string(name) + ": '" + std::string(v) + "' is not an integer");
  if (x < lo || x > hi)
    return Status::invalid("queue/iosched/" + std::string(name) + ": " + std::string(v) + " is outside " +
                           std::to_string(lo) + ".." + std::to_string(hi));
  return x;
}

}  // namespace blkmq
