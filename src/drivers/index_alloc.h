// Device-name indexes: the lowest free one, as the kernel's ida hands out
// nullb0, ublkb0, sda... Thread-safe; each driver keeps one allocator.
#pragma once

#include <mutex>
#include <set>

namespace blkmq {

class IndexAllocator {
 public:
  int alloc() {
    std::lock_guard lk(mu_);
    int i = 0;
    while (used_.count(i)) i++;
    used_.insert(i);
    return i;
  }
  void free(int i) {
    std::lock_guard lk(mu_);
    used_.erase(i);
  }

 private:
  std::mutex mu_;
  std::set<int> used_;
};

}  // namespace blkmq
