#include "base/lockstat.h"

#include <cinttypes>
#include <cstdio>

#include "base/clock.h"

namespace blkmq::base {

template <class L>
void StatLock<L>::lock_contended() {
  const uint64_t t0 = now_ns();
  lock_.lock();
  bump(waited_);
  wait_ns_.store(wait_ns_.load(std::memory_order_relaxed) + (now_ns() - t0), std::memory_order_relaxed);
}

template <class L>
void StatLock<L>::hold_begin() { hold_t0_ = now_ns(); }

template <class L>
void StatLock<L>::hold_end() {
  hold_ns_.store(hold_ns_.load(std::memory_order_relaxed) + (now_ns() - hold_t0_), std::memory_order_relaxed);
  bump(hold_samples_);
  hold_t0_ = 0;
}

template <class L>
LockStat StatLock<L>::stat() const {
  LockStat s;
  s.acquired = acquired_.load(std::memory_order_relaxed);
  s.waited = waited_.load(std::memory_order_relaxed);
  s.wait_ns = wait_ns_.load(std::memory_order_relaxed);
  s.try_busy = try_busy_.load(std::memory_order_relaxed);
  s.hold_samples = hold_samples_.load(std::memory_order_relaxed);
  s.hold_ns = hold_ns_.load(std::memory_order_relaxed);
  return s;
}

template <class L>
void StatLock<L>::reset() {
  lock_.lock();
  acquired_.store(0, std::memory_order_relaxed);
  waited_.store(0, std::memory_order_relaxed);
  wait_ns_.store(0, std::memory_order_relaxed);
  try_busy_.store(0, std::memory_order_relaxed);
  hold_samples_.store(0, std::memory_order_relaxed);
  hold_ns_.store(0, std::memory_order_relaxed);
  hold_t0_ = 0;  // reset's own hold is not a sample
  lock_.unlock();
}

template class StatLock<SpinLock>;
template class StatLock<std::mutex>;

std::string LockStat::format() const {
  char buf[224];
  std::snprintf(buf, sizeof buf,
                "acquired=%" PRIu64 " waited=%" PRIu64 " wait_ns=%" PRIu64 " try_busy=%" PRIu64 " hold_samples=%" PRIu64
                " hold_ns=%" PRIu64,
                acquired, waited, wait_ns, try_busy, hold_samples, hold_ns);
  return buf;
}

bool LockStat::parse(const std::string& s, LockStat* out) {
  LockStat v;
  int used = 0;
  if (std::sscanf(s.c_str(),
                  "acquired=%" SCNu64 " waited=%" SCNu64 " wait_ns=%" SCNu64 " try_busy=%" SCNu64
                  " hold_samples=%" SCNu64 " hold_ns=%" SCNu64 "%n",
                  &v.acquired, &v.waited, &v.wait_ns, &v.try_busy, &v.hold_samples, &v.hold_ns, &used) != 6)
    return false;
  if (static_cast<size_t>(used) != s.size() && s[used] != '\n') return false;
  *out = v;
  return true;
}

double LockStat::mean_hold_ns() const {
  return hold_samples ? static_cast<double>(hold_ns) / static_cast<double>(hold_samples) : 0.0;
}

void LockStat::add(const LockStat& o) {
  acquired += o.acquired;
  waited += o.waited;
  wait_ns += o.wait_ns;
  try_busy += o.try_busy;
  hold_samples += o.hold_samples;
  hold_ns += o.hold_ns;
}

double LockStat::contended_pct() const {
  return acquired ? 100.0 * static_cast<double>(waited) / static_cast<double>(acquired) : 0.0;
}

}  // namespace blkmq::base
