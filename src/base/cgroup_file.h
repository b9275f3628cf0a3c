// The syntax the kernel's cgroup v2 block files share: a leading "MAJ:MIN"
// naming the device, and the weight files' "N", "default N", "MAJ:MIN N"
// and "MAJ:MIN default" (io.weight, io.bfq.weight). One parser for every
// policy's file, so they read alike and say the same in their errors.
#pragma once

#include <string>
#include <string_view>

#include "blkmq/status.h"

namespace blkmq::base {

// Whether s is "MAJ:MIN": digits on both sides of one colon. Pure.
bool is_dev_number(std::string_view s);

// s without leading blanks and trailing blanks or newlines. Pure.
std::string_view trim_blanks(std::string_view s);

// A weight file's write: the group's weight on every device, this
// device's own, or this device's cleared (back to the group's).
struct WeightWrite {
  enum Kind { kGroup, kDevice, kDeviceClear } kind = kGroup;
  unsigned weight = 0;  // 0 for kDeviceClear
};

// Parses a weight file's value for file `name` (used in the error): "N"
// or "default N" (kGroup), "MAJ:MIN N" (kDevice), "MAJ:MIN default"
// (kDeviceClear); N in [lo, hi]. EINVAL with the file's name otherwise.
// Pure.
Result<WeightWrite> parse_weight_write(const std::string& name, std::string_view v, unsigned lo, unsigned hi);

}  // namespace blkmq::base
