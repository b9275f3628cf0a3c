// The driver interface: what a block driver provides (DriverOps, the
// blk_mq_ops analogue) and the core functions it calls back.
//
// Contexts. queue_rq/queue_rqs/commit_rqs/get_budget/put_budget run in the
// dispatching thread: a submitter (task context), a kblockd worker, or the
// requeue worker. They may sleep only when the tag set has kTagSetBlocking.
// complete runs where the core routes the completion (see complete_request).
// timeout runs on the timeout worker (task context). init_hctx/exit_hctx run
// during setup, update_nr_hw_queues and teardown, with no I/O on that hctx.
//
// Concurrency. queue_rq may run on several threads at once for the same hw
// queue (submitters issuing directly, a kblockd run, the requeue worker),
// as in the kernel: whatever a driver keeps per hw queue (a ring, a
// submission index) it protects itself. complete and timeout may run
// beside queue_rq too.
//
// What a request asks. rq->op says what; rq->sector and rq->data_len the
// range in every case: a discard's and a write-zeroes' length is data_len
// too, with no data vectors (rq_for_each_segment visits none). A flush
// has data_len 0. FUA is rq->cmd_flags & kBioFua.
//
// What a device offers. QueueConfig::limits (blkmq/queue.h), given when the
// queue is made: write_cache (the core sends flushes), fua (native FUA; else
// the core emulates it with a flush after the write), max_discard_sectors
// and max_write_zeroes_sectors (0: the op is refused before the driver),
// capacity_sectors (I/O past it fails before the driver), the block sizes
// and segment limits every request then respects.
#pragma once

#include <atomic>

#include <cstdint>

#include "blkmq/driver/request.h"
#include "blkmq/status.h"

namespace blkmq {

class Queue;
class TagSet;

// Hardware-queue types, as HCTX_TYPE_*: a map of CPUs to hw queues per type.
enum class HctxType : uint8_t { dflt = 0, read = 1, poll = 2 };
constexpr unsigned kNrHctxTypes = 3;

// The driver-visible part of a hardware queue context. The core's own state
// follows it in memory; drivers must treat these fields as read-only except
// driver_data.
struct HwCtx {
  Queue* queue = nullptr;
  TagSet* set = nullptr;
  unsigned queue_num = 0;        // index among the queue's hw queues
  HctxType type = HctxType::dflt;
  void* driver_data = nullptr;   // set by init_hctx
  void* sched_data = nullptr;    // owned by the elevator's init_hctx
};

// What queue_rq gets: the request and whether it is the last of the current
// batch (a driver rings its doorbell when last is true, or in commit_rqs).
struct QueueData {
  Request* rq;
  bool last;
};

enum class TimeoutResult : uint8_t {
  done,         // the driver completed (or will complete) the request itself
  reset_timer,  // keep waiting: re-arm the request's timer
};

// Completions collected by a poller to be ended together (io_comp_batch).
struct IoCompBatch {
  RqList reqs;
  bool need_ts = false;
};

// The driver's hooks. Required: queue_rq, and complete if the driver ever
// calls complete_request(). Everything else is optional (nullptr).
struct DriverOps {
  // REQUIRED. Issue one request. Call start_request() before the device can
  // complete it. rq->queuelist is empty on entry and the driver may use it
  // until it ends the request. Returns ok (the driver owns the request until
  // it ends it), resource (the core keeps the request and retries when a
  // request frees or 3 ms later), dev_resource (the core keeps it and retries
  // when one of the driver's in-flight requests completes: return it only
  // with requests in flight), or any other status (the core ends the request
  // with it).
  BlkStatus (*queue_rq)(HwCtx* hctx, const QueueData& bd) = nullptr;
  // Optional. Issue a list of requests in one go (plug flush without a
  // scheduler). Take what you can; leave the rest in *rqs for the core to
  // issue one by one through queue_rq.
  void (*queue_rqs)(RqList* rqs) = nullptr;
  // Optional. Ring the doorbell for requests queued with last == false when
  // the batch ended early.
  void (*commit_rqs)(HwCtx* hctx) = nullptr;
  // Optional pair (SCSI device queue depth): reserve a dispatch budget before
  // a driver tag is taken. get_budget returns a token >= 0 (kept in
  // rq->budget_token), or -1 when none is available. The core puts the
  // budget back for requests it does not issue (busy returns, leftovers);
  // for issued requests the driver puts it when the request completes and
  // reruns the queue (run_hw_queues(q, true)) before it ends the request
  // (a queue may be torn down once its last request ended), since the
  // core's own restart only follows tag frees (and a 3 ms delayed rerun).
  int (*get_budget)(Queue* q) = nullptr;
  void (*put_budget)(Queue* q, int token) = nullptr;
  // Optional. A request passed its deadline (queue/io_timeout).
  TimeoutResult (*timeout)(Request* rq) = nullptr;
  // Optional. Reap completions on a poll hw queue into iob (or end them
  // directly); returns how many were found.
  int (*poll)(HwCtx* hctx, IoCompBatch* iob) = nullptr;
  // Optional (Queue::wait). Sleep while *word == val and *channel ==
  // channel_val, completing what the device reports done on this hw queue
  // meanwhile (as an interrupt that woke this thread would). `channel` is
  // the calling thread's wake channel: wake_waiters(word) bumps and
  // futex-wakes it, and it is never freed, so a driver may leave a futex
  // wait armed on it (the caller's word may die once the call returns).
  // Task context. Return 0 when it slept or returned early (the caller
  // re-checks its condition), or a negative errno when it cannot wait
  // here; the core then sleeps on the word itself.
  int (*wait)(HwCtx* hctx, const std::atomic<uint32_t>* word, uint32_t val, std::atomic<uint32_t>* channel,
              uint32_t channel_val) = nullptr;
  // Required with complete_request(): end the request (usually by
  // end_request(rq, rq->status)). Runs in the context the core routes to.
  void (*complete)(Request* rq) = nullptr;
  // Optional. Per-hctx setup/teardown; a non-zero return fails the setup.
  int (*init_hctx)(HwCtx* hctx, void* driver_data, unsigned hctx_idx) = nullptr;
  void (*exit_hctx)(HwCtx* hctx, unsigned hctx_idx) = nullptr;
  // Optional. Per-request payload setup/teardown, once for every request
  // that can reach queue_rq: driver-tag and scheduler-tag requests and the
  // flush request.
  int (*init_request)(TagSet* set, Request* rq, unsigned hctx_idx) = nullptr;
  void (*exit_request)(TagSet* set, Request* rq, unsigned hctx_idx) = nullptr;
  // Optional. Is the device busy (for the dispatch_busy heuristics).
  bool (*busy)(HwCtx* hctx) = nullptr;
};

// ---- functions a driver calls ----

// Marks the request in flight and arms its timeout. Call from queue_rq before
// the request can complete. Dispatch context. Cost: a clock read and a store.
void start_request(Request* rq);

// Ends every bio of the request with `st` and frees the request. Any context.
// Each bio's end_io runs here, exactly once.
void end_request(Request* rq, BlkStatus st);

// Completes `bytes` of the request with `st` (partial completion): ends the
// bios that are now fully done. Returns true if bytes remain (the driver
// must continue or end the rest), false when the request is done (it is not
// freed: call end_request(rq, st) or free via the usual path). Any context.
bool update_request(Request* rq, BlkStatus st, uint32_t bytes);

// The normal completion entry (blk_mq_complete_request): records `st` in
// rq->status and routes the completion to the right CPU and context per
// queue/rq_affinity and queue/task_completion (inline, softirq thread, or
// IPI-style handoff to the submitting CPU), where ops.complete runs.
// Returns false if the request had already been completed (e.g. timed out).
// Any context.
bool complete_request(Request* rq, BlkStatus st = BlkStatus::ok);

// Completes in place: marks complete and calls fn(rq) now, skipping all
// routing (blk_mq_complete_request_direct). For drivers that know they run
// in task context.
void complete_request_direct(Request* rq, void (*fn)(Request*));

// Adds a completed request to a batch (blk_mq_add_to_batch); returns false
// if it cannot be batched (an error, a scheduler's or reserved request, a
// flush step, one with an end_io), and then the caller ends it itself.
// Any context; the batch belongs to the caller's thread.
bool add_to_batch(Request* rq, IoCompBatch* iob, BlkStatus st);
// Ends every request in the batch (blk_mq_end_request_batch): each bio
// ends once and the accounting is that of end_request, but the clock and
// the CPU are read once per batch and driver tags and usage references
// go back in groups of up to 32 per hctx. Any context.
void end_request_batch(IoCompBatch* iob);
// complete_request for a driver that reaps many completions in one pass
// (a reaper thread, an interrupt handler's loop; nvme_irq's pattern): the
// same single winner and routing, but a request that would be ended right
// here and can be batched goes into `iob`, to be ended with the others by
// the caller's end_request_batch(iob) at the end of the pass. Only for
// drivers whose ops.complete does nothing but end_request(rq, rq->status):
// a batched request skips ops.complete. Any context, as complete_request;
// the batch belongs to the caller's thread. Returns as complete_request.
bool complete_request_batched(Request* rq, BlkStatus st, IoCompBatch* iob);

// Driver-initiated requeue: releases the driver tag and puts the request on
// the queue's requeue list; with kick, the requeue worker re-inserts it now.
void requeue_request(Request* rq, bool kick);
void kick_requeue_list(Queue* q);
void delay_kick_requeue_list(Queue* q, unsigned msecs);

// Stop/start hardware queues (driver flow control). A stopped hctx is not
// run; starting reruns it (async: through kblockd).
void stop_hw_queue(HwCtx* hctx);
void start_hw_queue(HwCtx* hctx);
void stop_hw_queues(Queue* q);
void start_stopped_hw_queues(Queue* q, bool async);
void run_hw_queues(Queue* q, bool async);
void delay_run_hw_queues(Queue* q, unsigned msecs);
bool hctx_stopped(const HwCtx* hctx);

// The request holding driver tag `tag` on this hctx, or nullptr.
Request* tag_to_rq(HwCtx* hctx, int tag);
// The queue's driver cookie (QueueConfig::queuedata); valid from init_hctx on.
void* queue_data(const Queue* q);

}  // namespace blkmq
