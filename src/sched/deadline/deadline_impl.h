// mq-deadline's per-queue state, shared by the scheduler (deadline.cc) and
// its tunables (deadline_attrs.cc). Not a public header.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/lockstat.h"
#include "blkmq/elevator/elevator.h"
#include "blkmq/ioctx.h"
#include "blkmq/queue.h"
#include "blkmq/elevator/rbtree.h"
#include "sched/insert_lists.h"
#include "sched/sort_tree.h"

namespace blkmq::dd {

enum Prio : unsigned { kRtPrio = 0, kBePrio = 1, kIdlePrio = 2, kNrPrio = 3 };
enum Dir : unsigned { kRead = 0, kWrite = 1, kNrDir = 2 };

// Where a request is inside the scheduler (rq->elv_priv[2]). The kernel
// infers this from RB_EMPTY_NODE and list_empty; we keep it explicit so a
// request parked on an insert list is never mistaken for a queued one.
enum RqWhere : uintptr_t { kNowhere = 0, kSorted = 1, kOnDispatch = 2 };

// One priority level: a sort tree (src/sched/sort_tree.h) and a FIFO per
// direction.
struct PerPrio {
  PerPrio() = default;
  PerPrio(const PerPrio&) = delete;
  PerPrio& operator=(const PerPrio&) = delete;

  SortTree sort[kNrDir];
  ListNode fifo[kNrDir];            // arrival order, linked through queuelist
  uint64_t latest_pos[kNrDir] = {0, 0};  // sector of the last dispatch
  // Under the lock, except completed: finish_request runs in any context.
  uint64_t inserted = 0;
  uint64_t merged = 0;
  uint64_t dispatched = 0;
  std::atomic<uint64_t> completed{0};
};

// Tunables, protected by DeadlineData::lock (show/store take it).
struct Tunables {
  int64_t fifo_expire_ns[kNrDir];
  int writes_starved;
  int front_merges;
  int fifo_batch;
  int64_t prio_aging_expire_ns;
};

struct DeadlineData {
  explicit DeadlineData(Queue* queue, ElevatorQueue* elv);
  DeadlineData(const DeadlineData&) = delete;

  Queue* q;
  ElevatorQueue* eq;
  base::StatSpinLock lock;  // queue/iosched/lock_stat
  PerPrio prio[kNrPrio];
  ListNode dispatch;  // at-head inserts, served before anything else
  Dir last_dir = kWrite;
  int batching = 0;
  int starved = 0;
  Tunables tun;
  // Lockless has_work hint: requests on dispatch + the FIFOs (written under
  // lock) and requests parked on the insert lists (ins.pending()).
  std::atomic<int64_t> nr_queued{0};

  SplitInsert ins;  // seed 003's insert_lists
};

inline DeadlineData* dd_of(ElevatorQueue* eq) { return static_cast<DeadlineData*>(eq->elevator_data); }
inline DeadlineData* dd_of(Queue* q) { return dd_of(queue_elevator(q)); }
inline SplitInsert* dd_ins_of(ElevatorQueue* eq) { return &dd_of(eq)->ins; }
inline base::StatSpinLock* dd_lock_of(ElevatorQueue* eq) { return &dd_of(eq)->lock; }
inline base::StatSpinLock* dd_ins_lock_of(ElevatorQueue* eq) { return &dd_of(eq)->ins.lock(); }

// The ioprio class of a request or bio, mapped to a level; class none is
// best effort, as in the kernel.
inline Prio prio_of(uint16_t ioprio) {
  switch (ioprio_class(ioprio)) {
    case IoprioClass::rt: return kRtPrio;
    case IoprioClass::idle: return kIdlePrio;
    default: return kBePrio;
  }
}
inline Dir dir_of(ReqOp op) { return op_is_write(op) ? kWrite : kRead; }

// mq-deadline's time (FIFO deadlines, aging): its queue's clock.
// In jiffies, as the kernel's mq-deadline keeps its FIFO and aging times:
// the coarse clock, two of which per I/O cost less than one precise read.
inline int64_t now_ns(const DeadlineData* dd) { return static_cast<int64_t>(dd->q->coarse_now_ns()); }

// The attribute table (deadline_attrs.cc).
std::vector<ElvAttr> deadline_attrs();

}  // namespace blkmq::dd
