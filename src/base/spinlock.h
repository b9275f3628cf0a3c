// A small spinlock for short critical sections on the I/O path (the
// kernel's spinlock_t). Spins with a pause, then yields so that a preempted
// holder can run (user space has no preempt_disable).
#pragma once

#include <atomic>

namespace blkmq::base {

class SpinLock {
 public:
  void lock() {
    if (!flag_.exchange(true, std::memory_order_acquire)) return;
    lock_slow();
  }
  bool try_lock() {
    return !flag_.load(std::memory_order_relaxed) &&
           !flag_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { flag_.store(false, std::memory_order_release); }
  bool is_locked() const { return flag_.load(std::memory_order_relaxed); }

 private:
  void lock_slow();
  std::atomic<bool> flag_{false};
};

}  // namespace blkmq::base
