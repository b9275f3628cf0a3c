#include "base/lockstat.h"

#include <cinttypes>
#include <cstdio>

#include "base/clock.h"

namespace blkmq::base {

void StatSpinLock::lock_contended() {
  const uint64_t t0 = now_ns();
  lock_.lock();
  bump(waited_);
  wait_ns_.store(wait_ns_.load(std::memory_order_relaxed) + (now_ns() - t0), std::memory_order_relaxed);
}

LockStat StatSpinLock::stat() const {
  LockStat s;
  s.acquired = acquired_.load(std::memory_order_relaxed);
  s.waited = waited_.load(std::memory_order_relaxed);
  s.wait_ns = wait_ns_.load(std::memory_order_relaxed);
  s.try_busy = try_busy_.load(std::memory_order_relaxed);
  return s;
}

void StatSpinLock::reset() {
  lock_.lock();
  acquired_.store(0, std::memory_order_relaxed);
  waited_.store(0, std::memory_order_relaxed);
  wait_ns_.store(0, std::memory_order_relaxed);
  try_busy_.store(0, std::memory_order_relaxed);
  lock_.unlock();
}

std::string LockStat::format() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "acquired=%" PRIu64 " waited=%" PRIu64 " wait_ns=%" PRIu64 " try_busy=%" PRIu64,
                acquired, waited, wait_ns, try_busy);
  return buf;
}

bool LockStat::parse(const std::string& s, LockStat* out) {
  LockStat v;
  int used = 0;
  if (std::sscanf(s.c_str(), "acquired=%" SCNu64 " waited=%" SCNu64 " wait_ns=%" SCNu64 " try_busy=%" SCNu64 "%n",
                  &v.acquired, &v.waited, &v.wait_ns, &v.try_busy, &used) != 4)
    return false;
  if (static_cast<size_t>(used) != s.size() && s[used] != '\n') return false;
  *out = v;
  return true;
}

double LockStat::contended_pct() const {
  return acquired ? 100.0 * static_cast<double>(waited) / static_cast<double>(acquired) : 0.0;
}

}  // namespace blkmq::base
