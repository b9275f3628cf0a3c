// The engine's blktrace events (the kernel's block tracepoints as
// kernel/trace/blktrace.c records them): each hook is one acquire load of
// the queue's writer and a predicted-not-taken branch while tracing is off;
// with it on, an out-of-line call builds the record (see blktrace_writer.h).
// Which event, where (the kernel function named after each):
//   Q  a bio entered the queue (submit_bio_noacct_nocheck), after its checks
//   X  a bio was split (bio_split_to_limits): the front part, payload = the
//      sector where the rest starts
//   M/F a bio was back/front merged into a request; M also for a request
//      merged into another (trace_block_rq_merge: the absorbed one)
//   S  a submitter sleeps for a tag (the old blk_add_trace_sleeprq)
//   G  a request was allocated for the bio (trace_block_getrq)
//   P  a plug started holding requests; U/UT it was flushed, payload = how
//      many of this queue's requests it held (explicitly / from schedule())
//   I  a request was inserted into the scheduler, a software queue or the
//      dispatch list (trace_block_rq_insert)
//   D  the driver started it (blk_mq_start_request)
//   R  it was requeued (__blk_mq_requeue_request)
//   C  it completed, with its error (blk_update_request, the batch path)
#pragma once

#include <atomic>
#include <cstdint>

#include "trace/blktrace_format.h"
#include "core/core.h"

namespace blkmq {

inline blktrace::Writer* tracer(const QueueImpl* q) {
  return q->trace_.load(std::memory_order_acquire);
}

// The out-of-line halves; call the inline hooks below instead.
void trace_bio_slow(blktrace::Writer* w, const QueueImpl* q, const Bio* bio, uint32_t action);
void trace_split_slow(blktrace::Writer* w, const QueueImpl* q, const Bio* front, uint64_t rest_sector);
void trace_rq_slow(blktrace::Writer* w, const Request* rq, uint32_t action, BlkStatus st);
void trace_alloc_slow(blktrace::Writer* w, const QueueImpl* q, ReqOp op, uint32_t flags, uint32_t action);
void trace_plug_slow(blktrace::Writer* w, const QueueImpl* q, uint32_t action, unsigned depth);

// Q, M, F, G for a bio. Any context.
inline void trace_bio(const QueueImpl* q, const Bio* bio, uint32_t action) {
  if (blktrace::Writer* w = tracer(q)) [[unlikely]]
    trace_bio_slow(w, q, bio, action);
}
inline void trace_split(const QueueImpl* q, const Bio* front, uint64_t rest_sector) {
  if (blktrace::Writer* w = tracer(q)) [[unlikely]]
    trace_split_slow(w, q, front, rest_sector);
}
// I, D, R, M (merged request) and C (with st) for a request: its sector and
// remaining bytes, FS or PC by whether it is a driver command.
inline void trace_rq(const Request* rq, uint32_t action, BlkStatus st = BlkStatus::ok) {
  if (blktrace::Writer* w = tracer(to_impl(rq->q))) [[unlikely]]
    trace_rq_slow(w, rq, action, st);
}
// S, or G without a bio (a driver command): no sector, the op's categories.
inline void trace_alloc(const QueueImpl* q, ReqOp op, uint32_t flags, uint32_t action) {
  if (blktrace::Writer* w = tracer(q)) [[unlikely]]
    trace_alloc_slow(w, q, op, flags, action);
}
// P (depth unused), U and UT.
inline void trace_plug(const QueueImpl* q, uint32_t action, unsigned depth = 0) {
  if (blktrace::Writer* w = tracer(q)) [[unlikely]]
    trace_plug_slow(w, q, action, depth);
}

// Queue::start_blktrace / stop_blktrace and the trace/ attributes; the
// caller holds q->trace_lock_. A new trace takes the filter of the last
// one (or the one the filter attributes set up before any trace).
Status trace_start_locked(QueueImpl* q, const std::string& dir, size_t buffer_bytes_per_cpu);
void trace_stop_locked(QueueImpl* q);

// The attributes trace/act_mask, start_lba, end_lba, pid (the kernel's,
// read and written in its text forms, see trace/blktrace_mask.h) and
// trace/dropped (the kernel's debugfs `dropped` file: the current or last
// trace's drops, read-only). `name` is the part after "trace/"; `value`
// has no surrounding blanks. A filter may be written before a trace
// starts, while it runs and after it stopped. Take q->trace_lock_; task
// context.
Result<std::string> trace_filter_show(const QueueImpl* q, std::string_view name);
Status trace_filter_store(QueueImpl* q, std::string_view name, std::string_view value);

}  // namespace blkmq
