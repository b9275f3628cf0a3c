#include "base/event.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "base/clock.h"

namespace blkmq::base {

namespace {

// Time left until an absolute monotonic deadline (0 = none; *left = 0 means
// "no limit"), or false once it has passed.
bool time_left(uint64_t deadline, uint64_t* left) {
  *left = 0;
  if (!deadline) return true;
  uint64_t now = now_ns();
  if (now >= deadline) return false;
  *left = deadline - now;
  return true;
}

uint64_t deadline_after(uint64_t timeout_ns) { return timeout_ns ? now_ns() + timeout_ns : 0; }

}  // namespace

bool futex_wait(std::atomic<uint32_t>* addr, uint32_t expected, uint64_t timeout_ns) {
  timespec ts;
  timespec* tsp = nullptr;
  if (timeout_ns) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / kNsPerSec);
    ts.tv_nsec = static_cast<long>(timeout_ns % kNsPerSec);
    tsp = &ts;
  }
  long r = syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected,
                   tsp, nullptr, 0);
  return !(r < 0 && errno == ETIMEDOUT);
}

void futex_wake(std::atomic<uint32_t>* addr, int nr) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE_PRIVATE, nr, nullptr, nullptr,
          0);
}

// The waiter alone moves kIdle -> kSleeping and consumes kPending; notifiers
// only ever store kPending. So a notifier needs a futex wake only when the
// value it replaced was kSleeping.
bool Event::wait(uint64_t timeout_ns) {
  uint32_t s = kIdle;
  if (!state_.compare_exchange_strong(s, kSleeping, std::memory_order_acquire)) {
    state_.exchange(kIdle, std::memory_order_acquire);  // was kPending
    return true;
  }
  uint64_t deadline = deadline_after(timeout_ns);
  for (;;) {
    uint64_t left;
    if (!time_left(deadline, &left)) {
      uint32_t e = kSleeping;
      if (state_.compare_exchange_strong(e, kIdle, std::memory_order_acquire)) return false;
      state_.exchange(kIdle, std::memory_order_acquire);  // notified meanwhile
      return true;
    }
    futex_wait(&state_, kSleeping, left);
    if (state_.load(std::memory_order_acquire) == kPending) {
      state_.exchange(kIdle, std::memory_order_acquire);
      return true;
    }
  }
}

void Event::notify() {
  // Release pairs with Event::wait's acquire reads of kPending: the waiter
  // sees what the notifier wrote before. The acquire half pairs with
  // nothing: the waiter's kSleeping (an acquire-only CAS) publishes no data.
  if (state_.exchange(kPending, std::memory_order_acq_rel) == kSleeping) futex_wake(&state_, 1);
}

// complete() wakes unconditionally: completions are a control-path tool, and
// a private FUTEX_WAKE only hashes the address, so it is harmless even if a
// waiter has already returned and freed the Completion.
void Completion::complete() {
  done_.store(1, std::memory_order_release);
  futex_wake(&done_, INT_MAX);
}

void Completion::wait() {
  while (!done_.load(std::memory_order_acquire)) futex_wait(&done_, 0);
}

bool Completion::wait_for(uint64_t timeout_ns) {
  if (timeout_ns == 0) return done();
  uint64_t deadline = deadline_after(timeout_ns);
  while (!done_.load(std::memory_order_acquire)) {
    uint64_t left;
    if (!time_left(deadline, &left)) return done();
    futex_wait(&done_, 0, left);
  }
  return true;
}

}  // namespace blkmq::base
