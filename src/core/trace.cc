// Building the blktrace records of core/trace.h, and starting and stopping
// a queue's trace.
#include "core/trace.h"

#include "core/blktrace_writer.h"

namespace blkmq {

using blktrace::Writer;

void trace_bio_slow(Writer* w, const QueueImpl* q, const Bio* bio, uint32_t action) {
  w->add(action | blktrace::io_categories(bio->op, bio->flags), q->clock_ns(), bio->sector, bio->size);
}

void trace_split_slow(Writer* w, const QueueImpl* q, const Bio* front, uint64_t rest_sector) {
  w->add_u64(blktrace::kSplit | blktrace::io_categories(front->op, front->flags), q->clock_ns(), front->sector,
             front->size, rest_sector);
}

void trace_rq_slow(Writer* w, const Request* rq, uint32_t action, BlkStatus st) {
  const bool pc = rq->rq_flags & kRqfPassthrough;
  // A read request carries kBioSync for the schedulers (op_is_sync); the
  // kernel's REQ_SYNC is not set on reads, so blkparse shows them as R.
  const uint32_t flags = rq->op == ReqOp::read ? rq->cmd_flags & ~uint32_t{kBioSync} : rq->cmd_flags;
  const uint32_t cats = blktrace::io_categories(rq->op, flags) |
                        blktrace::tc_act(pc ? blktrace::kTcPc : blktrace::kTcFs);
  // blk_rq_trace_sector: a driver command has no position.
  const uint64_t sector = pc ? 0 : rq->sector;
  // The kernel stores the negative errno in the 16-bit field, as is.
  const int err = blk_status_to_errno(st);
  w->add(action | cats, to_impl(rq->q)->clock_ns(), sector, rq->data_len, static_cast<uint16_t>(err));
}

void trace_alloc_slow(Writer* w, const QueueImpl* q, ReqOp op, uint32_t flags, uint32_t action) {
  w->add(action | blktrace::io_categories(op, flags), q->clock_ns(), 0, 0);
}

void trace_plug_slow(Writer* w, const QueueImpl* q, uint32_t action, unsigned depth) {
  if (action == blktrace::kPlug) w->add(action, q->clock_ns(), 0, 0);
  else w->add_u64(action, q->clock_ns(), 0, 0, depth);
}

Status trace_start_locked(QueueImpl* q, const std::string& dir, size_t buffer_bytes_per_cpu) {
  if (q->trace_.load(std::memory_order_relaxed))
    return Status::error(EBUSY, q->cfg_.name + ": a blktrace is already running");
  if (dir.empty()) return Status::invalid(q->cfg_.name + ": blktrace needs a directory (trace/dir)");
  auto w = Writer::open(dir, q->cfg_.name, blktrace::make_dev(Queue::kDevMajor, q->minor_), buffer_bytes_per_cpu);
  if (!w) return w.status();
  q->trace_.store(w->get(), std::memory_order_release);
  q->trace_writers_.push_back(std::move(*w));
  q->trace_dir_ = dir;
  return Status::OK();
}

void trace_stop_locked(QueueImpl* q) {
  Writer* w = q->trace_.exchange(nullptr, std::memory_order_acq_rel);
  if (w) w->close();
}

}  // namespace blkmq

namespace blkmq {

Status Queue::start_blktrace(const std::string& dir, size_t buffer_bytes_per_cpu) {
  QueueImpl* q = to_impl(this);
  std::lock_guard<std::mutex> l(q->trace_lock_);
  return trace_start_locked(q, dir, buffer_bytes_per_cpu ? buffer_bytes_per_cpu : kBlktraceDefaultBuffer);
}

BlktraceResult Queue::stop_blktrace() {
  QueueImpl* q = to_impl(this);
  std::lock_guard<std::mutex> l(q->trace_lock_);
  BlktraceResult r;
  Writer* w = q->trace_.load(std::memory_order_relaxed);
  if (!w) return r;
  r.was_running = true;
  r.path_prefix = w->path_prefix();
  trace_stop_locked(q);
  r.dropped = w->dropped();
  r.write_errors = w->write_errors();
  return r;
}

}  // namespace blkmq
