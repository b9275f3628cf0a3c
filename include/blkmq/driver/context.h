// Execution contexts: user-space stand-ins for the kernel's task, hardirq and
// softirq contexts (see DESIGN.md). A driver's completion thread marks itself
// as hardirq context while it completes requests, so the core routes those
// completions as the kernel routes completions from an interrupt handler.
#pragma once

#include <cstdint>

namespace blkmq {

enum class ExecContext : uint8_t { task = 0, hardirq = 1, softirq = 2 };

// The calling thread's current context. Any thread; a thread-local read.
ExecContext current_context();
// True in hardirq or softirq context, as the kernel's in_interrupt().
inline bool in_interrupt() { return current_context() != ExecContext::task; }

// RAII: the calling thread is in hardirq context for the scope's lifetime.
// On leaving the outermost scope ("irq exit") any block softirq work that was
// raised on this CPU while inside is run by this thread, as the kernel runs
// pending softirqs at irq exit. Nests. Use from driver completion threads
// (timer callbacks, io_uring reapers); never from a submitter.
class HardirqScope {
 public:
  HardirqScope();
  ~HardirqScope();
  HardirqScope(const HardirqScope&) = delete;
  HardirqScope& operator=(const HardirqScope&) = delete;

 private:
  ExecContext prev_;
};

// Logical CPU the caller runs on (sched_getcpu(), cheap via rseq). Per-CPU
// state is indexed by it. Any context.
unsigned current_cpu();
// Number of possible CPU ids (per-CPU arrays are this long).
unsigned nr_cpu_ids();

}  // namespace blkmq
