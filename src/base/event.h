// Futex-based wait/wake primitives (the kernel's wait_event/wake_up for one
// sleeper, and completion).
#pragma once

#include <atomic>
#include <cstdint>

namespace blkmq::base {

// Sleeps while *addr == expected, up to timeout_ns (0 = forever). Returns
// false on timeout. Spurious wake-ups are possible: callers loop.
bool futex_wait(std::atomic<uint32_t>* addr, uint32_t expected, uint64_t timeout_ns = 0);
void futex_wake(std::atomic<uint32_t>* addr, int nr);

// A single-sleeper event with a pending flag: notify() before wait() is not
// lost. wait() consumes the notification. One waiter thread, many notifiers.
class Event {
 public:
  // Returns true if notified, false on timeout (timeout_ns 0 = forever).
  bool wait(uint64_t timeout_ns = 0);
  // Cheap when the waiter is awake: one atomic exchange, and a futex wake
  // only if the waiter is asleep.
  void notify();
  bool pending() const { return state_.load(std::memory_order_acquire) == kPending; }

 private:
  static constexpr uint32_t kIdle = 0, kPending = 1, kSleeping = 2;
  std::atomic<uint32_t> state_{kIdle};
};

// A one-shot completion: wait() returns once complete() was called.
class Completion {
 public:
  void complete();
  void wait();
  // Waits up to timeout_ns (0: just checks); true if complete.
  bool wait_for(uint64_t timeout_ns);
  bool done() const { return done_.load(std::memory_order_acquire) != 0; }
  void reinit() { done_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> done_{0};
};

}  // namespace blkmq::base
