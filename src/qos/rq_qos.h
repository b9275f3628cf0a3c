// The rq-qos chain (block/blk-rq-qos.h): per queue, an ordered list of
// policies whose hooks the core calls where the kernel calls them. The core
// reaches a policy only through these hooks (DESIGN.md). wbt is built in
// (src/qos/wbt.cc); io.latency and io.cost come next. docs/QOS.md lists
// the call sites.
#pragma once

#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "blkmq/bio.h"
#include "blkmq/driver/request.h"
#include "blkmq/queue.h"
#include "blkmq/status.h"

namespace blkmq {

struct RqQos;

// A policy's hooks, each optional (nullptr: not called). "Task" means the
// submitting thread, which may sleep; "any" means task, softirq or hardirq
// context, which must not sleep.
struct RqQosOps {
  // Before a request is allocated for bio (blk_mq_get_new_requests), with
  // no tag held, or before a plug's cached request is used. May sleep: this
  // is where a policy makes the submitter wait. Task.
  void (*throttle)(RqQos* rqos, Bio* bio) = nullptr;
  // The allocation after throttle failed (nowait, dying queue): undo what
  // throttle counted. Task.
  void (*cleanup)(RqQos* rqos, Bio* bio) = nullptr;
  // rq was allocated for bio (rq_qos_track), before bio is added to it. Task.
  void (*track)(RqQos* rqos, Request* rq, Bio* bio) = nullptr;
  // bio is merged into rq (back, front or discard merge). Task.
  void (*merge)(RqQos* rqos, Request* rq, Bio* bio) = nullptr;
  // rq is started towards the driver (blk_mq_start_request). Dispatch.
  void (*issue)(RqQos* rqos, Request* rq) = nullptr;
  // rq goes back for another dispatch (__blk_mq_requeue_request). Any.
  void (*requeue)(RqQos* rqos, Request* rq) = nullptr;
  // rq has ended and is about to be freed (blk_mq_free_request and the
  // batch path). Any.
  void (*done)(RqQos* rqos, Request* rq) = nullptr;
  // A bio that throttle or merge saw ends (bio_endio). Any.
  void (*done_bio)(RqQos* rqos, Bio* bio) = nullptr;
  // The device's queue depth changed (blk_set_queue_depth). Task.
  void (*queue_depth_changed)(RqQos* rqos) = nullptr;
  // The policy leaves the queue (rq_qos_del, queue teardown); free data.
  // Task; the queue is frozen and nothing is in flight.
  void (*exit)(RqQos* rqos) = nullptr;
};

// Which bios a policy needs to see (a blkmq addition, see docs/QOS.md,
// "What a policy costs"). The core calls throttle, cleanup, track and merge
// only for a bio that some policy on the chain wants, and issue, requeue
// and done only for a request whose first bio was wanted. A bio is wanted
// if its op is in `ops` (bit 1 << ReqOp), it has a flag in `flags`, or a
// policy asked to see every bio for now (rq_qos_watch_all). done_bio
// follows throttle and merge (the bio was marked there).
struct RqQosFilter {
  bool all = true;      // every bio, always (the kernel's behaviour)
  uint8_t ops = 0;      // with all == false: these ops
  uint32_t flags = 0;   // with all == false: bios with any of these BioFlags
};

// A policy kind, registered by name (the Registry<T> of elevators and
// drivers). `init` sets up rqos->data for one queue; an error refuses the
// add. Called with the queue frozen. Optional.
struct RqQosType {
  std::string name;
  RqQosOps ops;
  Status (*init)(RqQos* rqos) = nullptr;
  RqQosFilter filter;
};

// One policy on one queue: a link of the queue's chain.
struct RqQos {
  const RqQosType* type = nullptr;
  Queue* q = nullptr;
  RqQos* next = nullptr;
  void* data = nullptr;  // the policy's
};

// Registers a policy kind; it must outlive every queue that uses it.
// EEXIST for a taken name. Any thread.
Status register_rq_qos(const RqQosType* type);
// Appends policy `name` to q's chain, freezing q (rq_qos_add): ENOENT for
// an unknown name, EBUSY if q has it already, init's error. Task context.
Status rq_qos_add(Queue* q, std::string_view name);
// Takes policy `name` off q's chain, freezing q, and calls its exit.
// ENOENT if q does not have it. Task context.
Status rq_qos_del(Queue* q, std::string_view name);
// The names of q's policies, in chain order. Task context.
std::vector<std::string> rq_qos_list(Queue* q);
// The policy of kind `name` on q's chain, nullptr if none. The caller
// holds q's sysfs lock (QueueImpl::sysfs_lock_), under which the chain
// changes. Task context.
RqQos* rq_qos_find_locked(Queue* q, std::string_view name);
// While on, every bio to rqos's queue is wanted (RqQosFilter), whatever
// the filters say: for a policy that samples all I/O for a while (wbt's
// window). Calls must pair: each on is undone by one off. Any context;
// one atomic add.
void rq_qos_watch_all(RqQos* rqos, bool on);
// Calls every policy's queue_depth_changed (blk_set_queue_depth's hook).
// Task context.
void rq_qos_queue_depth_changed(Queue* q);

// The chain walks the core calls. Each is called only when the queue's
// chain is not empty (the core tests the head inline: a load and a branch
// per call site when no policy is set).
void rq_qos_throttle_slow(RqQos* head, Bio* bio);
void rq_qos_cleanup_slow(RqQos* head, Bio* bio);
void rq_qos_track_slow(RqQos* head, Request* rq, Bio* bio);
void rq_qos_merge_slow(RqQos* head, Request* rq, Bio* bio);
void rq_qos_issue_slow(RqQos* head, Request* rq);
void rq_qos_requeue_slow(RqQos* head, Request* rq);
void rq_qos_done_slow(RqQos* head, Request* rq);
// A bio throttle or merge saw ends: bio->qos_queue's chain. Any context.
void rq_qos_done_bio(Bio* bio);
// Teardown: every policy's exit, the chain freed. The queue is drained.
void rq_qos_exit(Queue* q);

}  // namespace blkmq
