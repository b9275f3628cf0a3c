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
  uint64_t u = used_.load(std::memory_order_relaxed);
  do {
    if (u + n > max_) return false;
    // seq_cst: take()'s retry, after its waiters_ increment, against
    // give(); see there.
  } while (!used_.compare_exchange_weak(u, u + n, std::memory_order_seq_cst, std::memory_order_relaxed));
  return true;
}

void ByteBudget::give(uint64_t n) {
  if (n == 0) return;
  // seq_cst on both sides pairs with byte_budget.cc:ByteBudget::take: its
  // waiters_ increment comes before its try_take, so either that sees
  // these bytes back or this sees the waiter. (try_take's first read is
  // relaxed, which the C++ model does not order after the increment; x86's
  // locked increment does, and take's 100 ms timed wait bounds a miss.)
  used_.fetch_sub(n, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) == 0) return;
  // Under the lock: a waiter between its check and its sleep holds it.
  std::lock_guard g(mu_);
  cv_.notify_all();
}

bool ByteBudget::take(uint64_t n, const std::function<bool()>& give_up) {
  if (try_take(n)) return true;
  std::unique_lock l(mu_);
  waiters_.fetch_add(1, std::memory_order_seq_cst);  // pairs with give()
  bool got;
  for (;;) {
    if ((got = try_take(n)) || give_up()) break;
    // The timed wait covers a give_up that turns true without a give().
    cv_.wait_for(l, std::chrono::milliseconds(100));
  }
  waiters_.fetch_sub(1, std::memory_order_relaxed);
  return got;
}

}  // namespace blkmq::nbd
