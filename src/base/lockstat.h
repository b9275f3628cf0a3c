// A SpinLock that counts its own contention, for the scheduler locks that
// seed 003 is about (the kernel's numbers come from lock_stat / perf lock).
// The counters are kept by whoever holds the lock, so the uncontended path
// adds two plain stores to a line the lock already owns; only a contended
// acquisition reads the clock (twice) to time its wait.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "base/spinlock.h"

namespace blkmq::base {

// A snapshot of a StatSpinLock's counters since creation or the last reset.
struct LockStat {
  uint64_t acquired = 0;  // lock() and successful try_lock() calls
  uint64_t waited = 0;    // lock() calls that found the lock held and spun
  uint64_t wait_ns = 0;   // time those calls spent waiting
  uint64_t try_busy = 0;  // try_lock() calls that found the lock held

  // "acquired=N waited=N wait_ns=N try_busy=N": the attribute format, parsed
  // back by parse(). parse returns false (and leaves *out alone) on anything
  // else.
  std::string format() const;
  static bool parse(const std::string& s, LockStat* out);
  // waited / acquired in percent (0 when never acquired).
  double contended_pct() const;
};

class StatSpinLock {
 public:
  // Any context that may spin. Costs SpinLock::lock() plus two relaxed
  // stores when free; when held, also two clock reads.
  void lock() {
    if (!lock_.try_lock()) lock_contended();
    bump(acquired_);
  }
  // Never waits. A busy lock is counted in try_busy.
  bool try_lock() {
    if (lock_.try_lock()) {
      bump(acquired_);
      return true;
    }
    try_busy_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  void unlock() { lock_.unlock(); }
  bool is_locked() const { return lock_.is_locked(); }

  // Any thread, any time: the counters may be a few increments apart from
  // each other while the lock is busy.
  LockStat stat() const;
  // Zeroes the counters (the kernel's `echo 0 > /proc/lock_stat`). Takes the
  // lock, so not from a context that holds it.
  void reset();

 private:
  // Written only by the holder: a load and a store, no read-modify-write.
  static void bump(std::atomic<uint64_t>& c) { c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  void lock_contended();

  SpinLock lock_;
  std::atomic<uint64_t> acquired_{0};
  std::atomic<uint64_t> waited_{0};
  std::atomic<uint64_t> wait_ns_{0};
  std::atomic<uint64_t> try_busy_{0};  // no lock held: a real atomic add
};

}  // namespace blkmq::base
