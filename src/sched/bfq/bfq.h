// bfq: the Budget Fair Queueing I/O scheduler (block/bfq-iosched.c and
// block/bfq-wf2q.c, block/bfq-cgroup.c): a queue per I/O context, B-WF2Q+
// over budgets in sectors, idling, injection and weight raising, and group
// scheduling: each I/O group (blkmq/iogroup.h) a request is charged to is
// an entity with its own service trees, weighted by io.bfq.weight, inside
// its parent's. An IoContext's weight also scales its queues' weights
// within their group.
//
// It registers itself as "bfq" (bfq_iosched.cc). This header gives tests
// and tools what the elevator interface has no room for: the time source,
// the idle timer driven by that time source, and read-only views of the
// per-queue state.
#pragma once

#include <cstdint>

#include "blkmq/elevator/elevator.h"
#include "blkmq/ioctx.h"
#include "blkmq/iogroup.h"

namespace blkmq {

// Every bfq decision (FIFO expiry, budget timeouts, idle timer, think
// time, weight raising) reads its queue's clock (Queue::now_ns), and the
// idle timer waits on its queue's runtime: on a ManualRuntime a test steps
// both with advance() and the timer fires exactly at its deadline.

// Why an in-service queue stopped being served (bfqq_expiration).
enum class BfqExpire : uint8_t { too_idle, budget_timeout, budget_exhausted, no_more_requests, preempted, nr };

// One bfq queue as tests see it. found = false if none exists.
struct BfqQueueInfo {
  bool found = false;
  bool busy = false;          // has requests, or is in service
  bool in_service = false;
  bool wait_request = false;  // in service, empty, idle timer armed
  unsigned ioprio_class = 0;  // 1 rt, 2 be, 3 idle
  unsigned orig_weight = 0;   // from ioprio and the context weight
  unsigned weight = 0;        // orig_weight x wr_coeff, as last applied
  unsigned wr_coeff = 1;
  uint64_t budget = 0;        // entity budget (sectors)
  uint64_t max_budget = 0;    // budget assigned by the feedback rules
  uint64_t service = 0;       // service received in the current slot
  unsigned queued = 0;
  unsigned dispatched = 0;    // with the driver
  unsigned inject_limit = 0;
  uint64_t sectors_dispatched = 0;
  bool in_weights = false;    // counted among the busy weights (asymmetry)
  uint64_t last_charge = 0;   // sectors charged for its last slot, time charges included
  bool io_bound = true;       // busy at least 80 % of the recent past (bfq_update_io_intensity)
};
// The sync (sync = true) or async queue that requests of `ioc` go to.
BfqQueueInfo bfq_queue_info(Queue* q, const IoContext* ioc, bool sync = true);

struct BfqStats {
  uint64_t queues_alive = 0;
  uint64_t queues_created = 0;
  uint64_t queues_freed = 0;
  uint64_t queues_moved = 0;    // sync queues that followed their context into another group
  uint64_t groups_created = 0;  // per-group state made on this device
  uint64_t groups_alive = 0;
  uint64_t inserted = 0;
  uint64_t dispatched = 0;
  uint64_t injected = 0;        // requests dispatched from a queue not in service
  uint64_t idle_timer_armed = 0;
  uint64_t expired[static_cast<unsigned>(BfqExpire::nr)] = {};
  uint64_t wr_started = 0;      // interactive or soft real-time raising
  uint64_t deferred_inserts = 0;  // split mode: requests parked on the insert lists
  uint64_t in_service_ioc = 0;  // IoContext id of the in-service sync queue, 0 if none
  int hw_tag = -1;
  unsigned rq_in_driver = 0;
  uint64_t peak_rate = 0;   // estimated, sectors per microsecond << 16 (the kernel's unit)
  uint64_t max_budget = 0;  // in force: the user's, or the default until enough budgets, then the estimate's
};
// A group's state on q's bfq instance (found = false if it has none: no
// request of it arrived, or it was removed and its last queue freed).
struct BfqGroupInfo {
  bool found = false;
  unsigned weight = 0;      // applied to its entity (changes at the next queueing)
  unsigned dev_weight = 0;  // io.bfq.weight for this device; 0: the group's default
  unsigned refs = 0;        // its queues, child groups and the tree link
  bool active = false;      // queued in its parent, or on the in-service path
};
BfqGroupInfo bfq_group_info(Queue* q, const IoGroup* g);

// Counters of q's bfq instance; all zero if q runs another elevator.
BfqStats bfq_stats(Queue* q);

// Test hooks. hold: has_work says false, so the core never pulls from bfq
// and a test calls the dispatch hook itself, deciding at a fake time.
// always_defer: split mode always parks inserts (seed 003 as posted).
void bfq_set_hold(Queue* q, bool hold);
void bfq_set_always_defer(Queue* q, bool always);

}  // namespace blkmq
