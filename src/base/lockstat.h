// A lock that counts its own contention, for the scheduler locks that seed
// 003 is about and the core's shared locks (the kernel's numbers come from
// lock_stat / perf lock). StatSpinLock wraps a SpinLock; StatMutex wraps the
// std::mutex of the tags' wait queues. The counters are kept by whoever holds the
// lock, so the uncontended path adds two plain stores to a line the lock
// already owns; only a contended acquisition reads the clock (twice) to
// time its wait. Hold times are sampled: one acquisition in
// kHoldSampleEvery reads the clock at acquire and at release.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "base/spinlock.h"

namespace blkmq::base {

// A snapshot of a StatSpinLock's counters since creation or the last reset.
struct LockStat {
  uint64_t acquired = 0;  // lock() and successful try_lock() calls
  uint64_t waited = 0;    // lock() calls that found the lock held and spun
  uint64_t wait_ns = 0;   // time those calls spent waiting
  uint64_t try_busy = 0;  // try_lock() calls that found the lock held
  uint64_t hold_samples = 0;  // acquisitions whose hold was timed
  uint64_t hold_ns = 0;       // their total time held

  // "acquired=N waited=N wait_ns=N try_busy=N hold_samples=N hold_ns=N": the
  // attribute format, parsed back by parse(). parse returns false (and
  // leaves *out alone) on anything else.
  std::string format() const;
  static bool parse(const std::string& s, LockStat* out);
  // waited / acquired in percent (0 when never acquired).
  double contended_pct() const;
  // Mean hold time of the sampled acquisitions, ns (0 without samples).
  double mean_hold_ns() const;
  // Adds o's counts to these (several locks of one kind, e.g. per ctx).
  void add(const LockStat& o);
};

// One acquisition in this many has its hold timed: two clock reads per 64
// acquisitions keep the sampled path under one instruction per acquisition
// on average.
inline constexpr uint64_t kHoldSampleEvery = 64;

// L: a lock with lock(), try_lock() and unlock() (SpinLock, std::mutex).
template <class L>
class StatLock {
 public:
  // Any context that may wait (spin, or sleep for a mutex). Costs L::lock()
  // plus two relaxed stores when free; when held, also two clock reads.
  void lock() {
    if (!lock_.try_lock()) lock_contended();
    acquired_locked();
  }
  // Never waits. A busy lock is counted in try_busy.
  bool try_lock() {
    if (lock_.try_lock()) {
      acquired_locked();
      return true;
    }
    try_busy_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  void unlock() {
    if (hold_t0_) hold_end();
    lock_.unlock();
  }
  // A member template, so that the explicit instantiation for std::mutex
  // does not instantiate it (clang 14 does, constraint or not).
  template <typename M = L>
  bool is_locked() const
    requires requires(const M& l) { l.is_locked(); }
  {
    return lock_.is_locked();
  }

  // Any thread, any time: the counters may be a few increments apart from
  // each other while the lock is busy.
  LockStat stat() const;
  // Zeroes the counters (the kernel's `echo 0 > /proc/lock_stat`). Takes the
  // lock, so not from a context that holds it.
  void reset();

 private:
  // Written only by the holder: a load and a store, no read-modify-write.
  static void bump(std::atomic<uint64_t>& c) { c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  void acquired_locked() {
    const uint64_t n = acquired_.load(std::memory_order_relaxed) + 1;
    acquired_.store(n, std::memory_order_relaxed);
    if (n % kHoldSampleEvery == 0) hold_begin();
  }
  void lock_contended();
  void hold_begin();  // out of line: a clock read
  void hold_end();

  L lock_;
  std::atomic<uint64_t> acquired_{0};
  std::atomic<uint64_t> waited_{0};
  std::atomic<uint64_t> wait_ns_{0};
  std::atomic<uint64_t> try_busy_{0};  // no lock held: a real atomic add
  std::atomic<uint64_t> hold_samples_{0};
  std::atomic<uint64_t> hold_ns_{0};
  uint64_t hold_t0_ = 0;  // the sampled acquisition's start; only the holder touches it
};

// Both are instantiated once, in lockstat.cc.
extern template class StatLock<SpinLock>;
extern template class StatLock<std::mutex>;
using StatSpinLock = StatLock<SpinLock>;
using StatMutex = StatLock<std::mutex>;

}  // namespace blkmq::base
