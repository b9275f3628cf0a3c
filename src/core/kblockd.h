// kblockd: work items queued to a runtime's kblockd (blkmq/runtime.h): on
// the process default, one worker thread per CPU ("kblockd/N", pinned and
// raised in priority where allowed, as the kernel's WQ_HIGHPRI kblockd);
// on a ManualRuntime, the test's run_pending(). A work item is queued at
// most once (pending bit); delayed work waits on the runtime's timers.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/timer.h"
#include "blkmq/runtime.h"

namespace blkmq {

struct Work {
  void (*fn)(Work*) = nullptr;
  void* data = nullptr;  // the owner, for fn
  Runtime* rt = nullptr;  // whose kblockd runs it
  std::atomic<uint32_t> pending{0};
  std::atomic<uint32_t> running{0};  // executions in progress
  Work* next = nullptr;

  // Once, before the first queueing. Task context.
  void init(Runtime* runtime, void (*func)(Work*), void* owner) {
    rt = runtime;
    fn = func;
    data = owner;
  }
};

constexpr int kWorkCpuUnbound = -1;  // run on the calling CPU's worker

// Queues w on cpu's worker unless already pending. Any context. Returns true
// if this call queued it. Cost when pending: one load; else an atomic
// exchange, a push and (threads) a wake.
bool kblockd_queue_work(Work* w, int cpu);
// Waits until w is neither pending nor running (a manual runtime runs what
// is queued until it is). Task context.
void kblockd_flush_work(Work* w);

// Work that may be delayed (delayed_work).
struct DelayedWork {
  Work work;
  base::Timer timer;
  std::atomic<int> cpu{kWorkCpuUnbound};

  // Once, before the first schedule. Task context.
  void init(Runtime* rt, void (*fn)(Work*), void* data);
  // queue_delayed_work: does nothing if the work is pending or the timer
  // armed. delay 0 queues at once.
  void schedule(int cpu, uint64_t delay_ns);
  // mod_delayed_work: (re)arms to fire after delay_ns; 0 queues at once.
  void mod(int cpu, uint64_t delay_ns);
  // Cancels the timer and waits for a queued or running execution.
  void cancel_sync();
};

}  // namespace blkmq
