// mq-deadline: the kernel's deadline scheduler (block/mq-deadline.c) with
// seed 003's split insertion lists as queue/iosched/insert_lists.
//
// It registers itself as "mq-deadline" (deadline.cc). This header gives
// tests and tools the few knobs the elevator interface has no room for: the
// time source and the per-level counters the kernel shows in debugfs.
#pragma once

#include <cstdint>

#include "blkmq/elevator/elevator.h"

namespace blkmq {

// FIFO deadlines and priority aging read the queue's clock
// (Queue::now_ns, the runtime's clock): tests advance a ManualRuntime's.

// Per priority level (0 = RT, 1 = BE, 2 = IDLE) counters, as debugfs shows
// them. inserted counts each request once, however often it is requeued.
struct DeadlineLevelStats {
  uint64_t inserted = 0;
  uint64_t merged = 0;
  uint64_t dispatched = 0;
  uint64_t completed = 0;
};
struct DeadlineStats {
  DeadlineLevelStats level[3];
  uint64_t deferred_inserts = 0;  // split mode: requests that went to the insert lists
};
// Counters of q's mq-deadline instance; all zero if q runs another elevator.
// Task context; takes the scheduler lock.
DeadlineStats deadline_stats(Queue* q);

// Test hook: with always = true, split mode never takes the main lock at
// insert (seed 003 exactly as posted), so the deferred path is exercised
// even without contention. No effect in locked mode.
void deadline_set_always_defer(Queue* q, bool always);

}  // namespace blkmq
