// A small spinlock for short critical sections on the I/O path (the
// kernel's spinlock_t). Spins with a pause, then yields so that a preempted
// holder can run (user space has no preempt_disable).
#pragma once

#include <atomic>

namespace blkmq::base {

// Tells the CPU this is a spin-wait loop (frees pipeline resources for the
// sibling hyper-thread and avoids a memory-order mis-speculation on exit).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

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
