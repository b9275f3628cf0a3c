#include "base/spinlock.h"

#include <sched.h>

namespace blkmq::base {

// Spin briefly: critical sections are a few dozen instructions, so the
// holder usually releases within the spin. Beyond that the holder was most
// likely preempted (user space cannot disable preemption), and yielding lets
// it run instead of burning its time slice.
void SpinLock::lock_slow() {
  constexpr int kSpins = 100;
  for (;;) {
    for (int i = 0; i < kSpins; i++) {
      if (!flag_.load(std::memory_order_relaxed) &&
          !flag_.exchange(true, std::memory_order_acquire))
        return;
      cpu_relax();
    }
    sched_yield();
  }
}

}  // namespace blkmq::base
