// What a Runtime (blkmq/runtime.h) does for the core: where kblockd work
// and BLOCK_SOFTIRQ completions wait and who runs them, and the timers.
// Two implementations: real per-CPU threads (runtime_threads.cc, the
// process default) and the hand-driven ManualRuntime (runtime_manual.cc).
// The policy (when a softirq list needs a wake, what "irq exit" runs, the
// pending bit of a work item) is the core's and shared by both: see
// kblockd.cc and softirq.cc.
#pragma once

#include <cstdint>

#include "base/timer.h"
#include "blkmq/runtime.h"

namespace blkmq {

struct Request;
struct Work;

class Runtime::Ops {
 public:
  virtual ~Ops() = default;

  // Queues w (its pending bit already set by kblockd_queue_work) for the
  // kblockd of `cpu` (< nr_cpu_ids) and wakes it. Any context.
  virtual void work_queue(Work* w, unsigned cpu) = 0;
  // Returns once w is neither pending nor running. Task context, never
  // from w itself.
  virtual void work_flush(Work* w) = 0;

  // Adds rq to `cpu`'s BLOCK_SOFTIRQ list; true if the list was empty (its
  // worker may sleep: softirq_wake). Any context.
  virtual bool softirq_push(unsigned cpu, Request* rq) = 0;
  // Has `cpu`'s list run in softirq context (ksoftirqd). Any context.
  virtual void softirq_wake(unsigned cpu) = 0;
  // Takes `cpu`'s list in push order (linked through rq_next), for the
  // caller to run itself at irq exit. Any context.
  virtual Request* softirq_take(unsigned cpu) = 0;

  // Where the core's and the schedulers' timers wait. Any thread.
  virtual base::TimerQueue& timers() = 0;

  // A core thread waiting for others (a freeze draining, a flush, a
  // dispatch section to end) lets time pass: real threads sleep `us`; a
  // manual runtime first runs one pending item, since the waiter may be
  // its only executor (a test's teardown), and sleeps only when none is.
  // Task context.
  virtual void idle(unsigned us) = 0;
};

// Runs a chain of work items (linked through Work::next, in queue order)
// as kblockd does: each item's pending bit is cleared before it runs, so it
// may be queued again meanwhile and no request for a run is lost. Both
// runtimes call it.
void run_work_chain(Work* first);
// Completes a chain of requests (linked through rq_next, in push order) in
// softirq context, as the BLOCK_SOFTIRQ handler does. Both runtimes call it.
void run_completion_chain(Request* first);

}  // namespace blkmq
