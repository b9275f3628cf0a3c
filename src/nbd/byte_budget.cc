#include "nbd/byte_budget.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "nbd/protocol.h"

namespace blkmq::nbd {

ByteBudget::ByteBudget(uint64_t max) : max_(std::max<uint64_t>(max, kMaxPayload)) {}

uint64_t ByteBudget::default_max() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const uint64_t mem = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
  return std::max<uint64_t>(mem / 8, 256ull << 20);
}

bool ByteBudget::try_take(uint64_t n) {
  std::lock_guard g(mu_);
  if (used_ + n > max_) return false;
  used_ += n;
  return true;
}

void ByteBudget::give(uint64_t n) {
  if (n == 0) return;
  {
    std::lock_guard g(mu_);
    used_ -= n;
  }
  cv_.notify_all();
}

bool ByteBudget::take(uint64_t n, const std::function<bool()>& give_up) {
  std::unique_lock l(mu_);
  for (;;) {
    if (used_ + n <= max_) {
      used_ += n;
      return true;
    }
    if (give_up()) return false;
    // The timed wait covers a give_up that turns true without a give().
    cv_.wait_for(l, std::chrono::milliseconds(100));
  }
}

uint64_t ByteBudget::used() const {
  std::lock_guard g(mu_);
  return used_;
}

}  // namespace blkmq::nbd
