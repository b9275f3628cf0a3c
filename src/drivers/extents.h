// Building an allocation map (Device::allocation) piece by piece: adjacent
// pieces with equal flags become one extent, and the map stops growing at
// its extent limit. Shared by the drivers that report allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "blkmq/device.h"

namespace blkmq {

class ExtentBuilder {
 public:
  explicit ExtentBuilder(size_t max_extents) : max_(max_extents ? max_extents : 1) {}

  // Appends `len` bytes with `flags`. False once the map is full: a piece
  // that would start a new extent past the limit is dropped, and the caller
  // stops (the map then covers a prefix of the range, as allowed).
  bool add(uint64_t len, uint32_t flags) {
    if (len == 0) return true;
    if (!v_.empty() && v_.back().flags == flags) {
      v_.back().length += len;
      return true;
    }
    if (v_.size() >= max_) return false;
    v_.push_back({len, flags});
    return true;
  }
  std::vector<Extent> take() { return std::move(v_); }

 private:
  size_t max_;
  std::vector<Extent> v_;
};

}  // namespace blkmq
