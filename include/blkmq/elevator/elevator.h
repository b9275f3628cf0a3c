// The elevator interface (elevator_mq_ops): the only seam between the core
// and an I/O scheduler. A scheduler includes include/blkmq/ and src/base/
// only, never src/core/.
//
// Locking and contexts: every hook runs in the thread that drives the queue
// (a submitter, kblockd, the requeue worker) except completed_request and
// finish_request, which run wherever a request ends (any context, including
// hardirq and softirq stand-ins: no sleeping there). The scheduler protects
// its own state; the core holds no lock across a hook. Switching schedulers
// freezes and quiesces the queue, so init/exit never race with I/O.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "blkmq/driver/driver.h"
#include "blkmq/driver/request.h"
#include "blkmq/status.h"

namespace blkmq {

enum InsertFlag : uint32_t { kInsertAtHead = 1u << 0 };

enum class ElvMerge : uint8_t { none, front, back };

struct ElevatorQueue;

// Depth limiting at allocation (blk_mq_alloc_data subset).
struct AllocLimit {
  unsigned shallow_depth = 0;  // 0: no limit; else max scheduler tags usable
};

struct ElevatorOps {
  // REQUIRED. Set up per-queue state in eq->elevator_data. Task context.
  Status (*init_sched)(Queue* q, ElevatorQueue* eq) = nullptr;
  // REQUIRED. Free per-queue state; the queue is frozen and empty.
  void (*exit_sched)(ElevatorQueue* eq) = nullptr;
  // Optional per-hctx state (hctx->sched_data).
  Status (*init_hctx)(HwCtx* hctx, unsigned idx) = nullptr;
  void (*exit_hctx)(HwCtx* hctx, unsigned idx) = nullptr;
  // Optional. nr_requests changed (queue frozen).
  void (*depth_updated)(Queue* q) = nullptr;
  // Optional merge hooks.
  bool (*allow_merge)(Queue* q, Request* rq, const Bio* bio) = nullptr;
  bool (*bio_merge)(Queue* q, Bio* bio, unsigned nr_segs) = nullptr;
  ElvMerge (*request_merge)(Queue* q, Request** rq, const Bio* bio) = nullptr;
  void (*request_merged)(Queue* q, Request* rq, ElvMerge type) = nullptr;
  void (*requests_merged)(Queue* q, Request* rq, Request* next) = nullptr;
  // Optional. Limit the depth for this op (shallow_depth).
  void (*limit_depth)(Queue* q, ReqOp op, uint32_t flags, AllocLimit* lim) = nullptr;
  // Optional. Request allocated / freed.
  void (*prepare_request)(Request* rq) = nullptr;
  void (*finish_request)(Request* rq) = nullptr;
  // Optional. A dispatched request comes back (driver requeue).
  void (*requeue_request)(Request* rq) = nullptr;
  // REQUIRED. Take ownership of the requests on `list` (linked through
  // queuelist); flags: InsertFlag.
  void (*insert_requests)(HwCtx* hctx, ListNode* list, uint32_t flags) = nullptr;
  // REQUIRED. Next request to issue, or nullptr. May return a request of
  // another hctx of the same queue.
  Request* (*dispatch_request)(HwCtx* hctx) = nullptr;
  // REQUIRED. Lockless hint: may dispatch_request return something?
  bool (*has_work)(HwCtx* hctx) = nullptr;
  // Optional. A request completed (USE_SCHED only); now in ns.
  void (*completed_request)(Request* rq, uint64_t now_ns) = nullptr;
  // Optional neighbours for merging.
  Request* (*former_request)(Queue* q, Request* rq) = nullptr;
  Request* (*next_request)(Queue* q, Request* rq) = nullptr;
};

// One tunable under queue/iosched/.
struct ElvAttr {
  std::string name;
  std::string (*show)(ElevatorQueue* eq) = nullptr;
  Status (*store)(ElevatorQueue* eq, std::string_view value) = nullptr;
};

// One per-group file a scheduler serves, as the kernel's blkcg policy
// cftypes (bfq's io.bfq.weight): the queue attribute
// cgroup/<group path>/<name> of every group but the root. show and store
// run in task context under the queue's sysfs lock, with a reference on g
// (it may have been removed meanwhile: io_group_online says).
struct ElvGroupAttr {
  std::string name;
  Result<std::string> (*show)(ElevatorQueue* eq, IoGroup* g) = nullptr;
  Status (*store)(ElevatorQueue* eq, IoGroup* g, std::string_view value) = nullptr;
};

struct ElevatorType {
  std::string name;            // "mq-deadline", "kyber", "bfq"
  // Another name queue/scheduler accepts for this one (the kernel's
  // elevator_alias: mq-deadline's is "deadline"); shown by its name only.
  // Empty: none. Registration refuses an alias that names another type.
  std::string alias;
  ElevatorOps ops;
  std::vector<ElvAttr> attrs;
  std::vector<ElvGroupAttr> group_attrs;  // cgroup/<group path>/<name>; optional
  bool queue_wide = false;     // QUEUE_FLAG_SQ_SCHED: one scheduler for all hctxs
  // ELEVATOR_FLAG_DISABLE_WBT: while this scheduler is attached, wbt is
  // off unless queue/wbt_lat_usec was set by hand (bfq: it does its own
  // write throttling).
  bool disable_wbt = false;
};

// Per-queue elevator instance.
struct ElevatorQueue {
  const ElevatorType* type = nullptr;
  void* elevator_data = nullptr;
  Queue* queue = nullptr;
  // Core-owned merge state (see elv_rqhash_*); protected by the
  // scheduler's lock.
  void* hash = nullptr;
  Request* last_merge = nullptr;
};

// ---- What the core provides to schedulers ----
//
// The merge helpers below must be called with the scheduler's own lock held
// (the one that protects its queued requests); the back-merge hash and the
// last_merge hint live in the ElevatorQueue and are protected by that lock.

// Back-merge hash of queued requests by end sector (elv_rqhash_*). A
// scheduler adds a request when it queues it (if rq_mergeable) and deletes
// it when it dispatches it; the helpers below keep it current on merges.
void elv_rqhash_add(ElevatorQueue* eq, Request* rq);
void elv_rqhash_del(ElevatorQueue* eq, Request* rq);
Request* elv_rqhash_find(ElevatorQueue* eq, uint64_t end_sector);

// blk_mq_sched_try_merge: tries the last_merge hint, the back-merge hash and
// the scheduler's request_merge hook (front merges), merges the bio, calls
// request_merged, then tries to merge the grown request with its neighbour
// (next_request after a back merge, former_request after a front merge),
// calling requests_merged. A request absorbed by that second merge is
// removed from the hash and returned in *absorbed: the scheduler removes it
// from its own structures in requests_merged, and the caller frees it with
// free_requests() after dropping its lock. Returns true if the bio merged.
bool sched_try_merge(Queue* q, Bio* bio, unsigned nr_segs, Request** absorbed);

// blk_mq_sched_try_insert_merge: back-merges rq into a queued request found
// through the hash (repeatedly, as elv_attempt_insert_merge does). Returns
// true if rq was absorbed; it is then put on *free_list (via queuelist) and
// must be freed with free_requests() after the lock is dropped. Calls
// requests_merged for each merge.
bool sched_try_insert_merge(Queue* q, Request* rq, ListNode* free_list);

// blk_bio_list_merge: tries to back- or front-merge the bio into one of the
// last 8 requests of a scheduler's own list (linked through queuelist),
// newest first, with the core's eligibility and size checks. For schedulers
// that merge in their own insertion lists (kyber's per-ctx queues); call with
// the lock that protects `list` held. Returns true if the bio merged.
bool bio_list_merge(Queue* q, ListNode* list, Bio* bio, unsigned nr_segs);

// free_requests' out-of-line part, for a list known not to be empty (call
// free_requests). Any context; one free_request per entry.
void free_requests_nonempty(ListNode* list);

// Frees requests linked through queuelist (blk_mq_free_requests). Any context.
// Inline because schedulers call it after every insert, dispatch and bio
// merge and the list is nearly always empty: then the test is all it costs
// (it was a call, 17 instructions, twice per I/O under mq-deadline).
inline void free_requests(ListNode* list) {
  if (!list->empty()) free_requests_nonempty(list);
}

// Request facts schedulers need.
// May rq take more merges (has data, no NOMERGE/FUA/PREFLUSH, not a flush
// step, not marked unmergeable)? Only such requests belong in the hash.
bool rq_mergeable(const Request* rq);
inline bool rq_is_sync(const Request* rq) {
  return rq->op == ReqOp::read || (rq->cmd_flags & (kBioSync | kBioFua | kBioPreflush));
}
// Index of the request's software queue within its hctx (0..hctx_nr_ctx-1).
unsigned rq_ctx_index(const Request* rq);
unsigned hctx_nr_ctx(const HwCtx* hctx);
// The software-queue index the calling CPU maps to on hctx (for bio_merge).
unsigned current_ctx_index(const HwCtx* hctx);

// Queue facts and knobs.
unsigned queue_nr_requests(const Queue* q);   // queue/nr_requests
unsigned queue_async_depth(const Queue* q);   // queue/async_depth
void set_queue_async_depth(Queue* q, unsigned depth);  // from init_sched (default: nr_requests)
unsigned queue_nr_hw_queues(const Queue* q);
HwCtx* queue_hctx(Queue* q, unsigned idx);
HwCtx* current_hctx(Queue* q, ReqOp op, uint32_t bio_flags);  // the hctx a bio from this CPU goes to
bool queue_rotational(const Queue* q);
// The smallest shallow depth limit_depth will hand out (sbitmap wake batch).
void set_min_shallow_depth(Queue* q, unsigned depth);
// Record io_start_time_ns on every request (blk-stat; kyber's I/O latency).
void queue_enable_stats(Queue* q);
// The elevator instance of a queue (nullptr for none).
ElevatorQueue* queue_elevator(Queue* q);

// Registers *type, which must stay alive (and unchanged) for the rest of
// the process, as a queue/scheduler choice. Refused: no name, "none", or a
// required hook missing (EINVAL); a name or alias that one registered
// scheduler already answers to, a built-in's included (EEXIST, "elevator
// 'NAME' is already registered"). Any thread, also from a static
// initializer; queues list it from then on. Cheap (a lock and a walk over
// the schedulers). The built-ins (mq-deadline, kyber, bfq) are registered
// from the first use of the registry on; nobody needs to ask for them.
Status register_elevator(const ElevatorType* type);
// Registered names: the built-ins in the kernel's order (mq-deadline, kyber,
// bfq), then the others in registration order. Any thread.
std::vector<std::string> registered_elevators();

}  // namespace blkmq
