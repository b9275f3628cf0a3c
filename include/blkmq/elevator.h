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

#include "blkmq/driver.h"
#include "blkmq/request.h"
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

struct ElevatorType {
  std::string name;            // "mq-deadline", "kyber", "bfq"
  ElevatorOps ops;
  std::vector<ElvAttr> attrs;
  bool queue_wide = false;     // QUEUE_FLAG_SQ_SCHED: one scheduler for all hctxs
};

// Per-queue elevator instance.
struct ElevatorQueue {
  const ElevatorType* type = nullptr;
  void* elevator_data = nullptr;
  Queue* queue = nullptr;
};

// Registers a scheduler by name. Task context; call before creating queues
// that should list it. Error if the name is taken.
Status register_elevator(const ElevatorType* type);
// Registered names in registration order.
std::vector<std::string> registered_elevators();

}  // namespace blkmq
