// Building the blktrace records of core/trace.h, and starting and stopping
// a queue's trace.
#include "core/trace.h"

#include "core/blktrace_writer.h"
#include "trace/blktrace_mask.h"

namespace blkmq {

using blktrace::Writer;

// Each builds the event's action and categories first and asks the
// filter (Writer::wants) before it reads the clock: a filtered-out event
// costs those few instructions and no more.
void trace_bio_slow(Writer* w, const QueueImpl* q, const Bio* bio, uint32_t action) {
  const uint32_t what = action | blktrace::io_categories(bio->op, bio->flags);
  if (!w->wants(what, bio->sector)) return;
  w->add(what, q->clock_ns(), bio->sector, bio->size);
}

void trace_split_slow(Writer* w, const QueueImpl* q, const Bio* front, uint64_t rest_sector) {
  const uint32_t what = blktrace::kSplit | blktrace::io_categories(front->op, front->flags);
  if (!w->wants(what, front->sector)) return;
  w->add_u64(what, q->clock_ns(), front->sector, front->size, rest_sector);
}

void trace_rq_slow(Writer* w, const Request* rq, uint32_t action, BlkStatus st) {
  const bool pc = rq->rq_flags & kRqfPassthrough;
  // A read request carries kBioSync for the schedulers (op_is_sync); the
  // kernel's REQ_SYNC is not set on reads, so blkparse shows them as R.
  const uint32_t flags = rq->op == ReqOp::read ? rq->cmd_flags & ~uint32_t{kBioSync} : rq->cmd_flags;
  const uint32_t what = action | blktrace::io_categories(rq->op, flags) |
                        blktrace::tc_act(pc ? blktrace::kTcPc : blktrace::kTcFs);
  // blk_rq_trace_sector: a driver command has no position.
  const uint64_t sector = pc ? 0 : rq->sector;
  if (!w->wants(what, sector)) return;
  // The kernel stores the negative errno in the 16-bit field, as is.
  const int err = blk_status_to_errno(st);
  w->add(what, to_impl(rq->q)->clock_ns(), sector, rq->data_len, static_cast<uint16_t>(err));
}

void trace_alloc_slow(Writer* w, const QueueImpl* q, ReqOp op, uint32_t flags, uint32_t action) {
  const uint32_t what = action | blktrace::io_categories(op, flags);
  if (!w->wants(what, 0)) return;
  w->add(what, q->clock_ns(), 0, 0);
}

void trace_plug_slow(Writer* w, const QueueImpl* q, uint32_t action, unsigned depth) {
  // The kernel traces a plug with op 0 (a read), so it carries the read
  // category: act_mask=read keeps P and U, act_mask=write drops them.
  const uint32_t what = action | blktrace::tc_act(blktrace::kTcRead);
  if (!w->wants(what, 0)) return;
  if (action == blktrace::kPlug) w->add(what, q->clock_ns(), 0, 0);
  else w->add_u64(what, q->clock_ns(), 0, 0, depth);
}

namespace {

// The queue's blk_trace: its last writer (set up, running or stopped),
// whose filter the next trace starts with; nullptr before any.
Writer* current_trace_locked(const QueueImpl* q) {
  return q->trace_writers_.empty() ? nullptr : q->trace_writers_.back().get();
}

// blk_trace_setup_lba for a whole disk: every sector of the device.
blktrace::Filter default_trace_filter(const QueueImpl* q) {
  blktrace::Filter f;
  f.end_lba = q->limits_.capacity_sectors;
  return f;
}

// The writer a filter attribute changes: the current one, or a new one in
// the setup state if the queue has none yet.
Writer* filter_owner_locked(QueueImpl* q) {
  if (Writer* w = current_trace_locked(q)) return w;
  q->trace_writers_.push_back(std::make_unique<Writer>(default_trace_filter(q)));
  return q->trace_writers_.back().get();
}

}  // namespace

Status trace_start_locked(QueueImpl* q, const std::string& dir, size_t buffer_bytes_per_cpu) {
  if (q->trace_.load(std::memory_order_relaxed))
    return Status::error(EBUSY, q->cfg_.name + ": a blktrace is already running");
  if (dir.empty()) return Status::invalid(q->cfg_.name + ": blktrace needs a directory (trace/dir)");
  Writer* w = current_trace_locked(q);
  const bool fresh = !w || w->started();
  if (fresh) {
    // A stopped writer is never restarted (a thread racing its stop may
    // still hold it): the new one takes over its filter.
    q->trace_writers_.push_back(std::make_unique<Writer>(w ? w->filter() : default_trace_filter(q)));
    w = q->trace_writers_.back().get();
  }
  const uint32_t dev = blktrace::make_dev(Queue::kDevMajor, q->minor_);
  if (Status st = w->start(dir, q->cfg_.name, dev, buffer_bytes_per_cpu); !st) {
    // The last trace stays the current one, with its drop count.
    if (fresh && q->trace_writers_.size() > 1) q->trace_writers_.pop_back();
    return st;
  }
  q->trace_.store(w, std::memory_order_release);
  q->trace_dir_ = dir;
  return Status::OK();
}

void trace_stop_locked(QueueImpl* q) {
  // Pairs with nothing that needs it: trace_lock_ orders start and stop,
  // and the traced path (trace.h:tracer, acquire) only tests for null; a
  // release store of nullptr would do.
  Writer* w = q->trace_.exchange(nullptr, std::memory_order_acq_rel);
  if (w) w->close();
}

Result<std::string> trace_filter_show(const QueueImpl* q, std::string_view name) {
  std::lock_guard<std::mutex> l(const_cast<QueueImpl*>(q)->trace_lock_);
  const Writer* w = current_trace_locked(q);
  if (name == "dropped") return std::to_string(w ? w->dropped() : 0);
  const blktrace::Filter f = w ? w->filter() : default_trace_filter(q);
  if (name == "act_mask") return blktrace::act_mask_to_string(f.act_mask);
  if (name == "start_lba") return std::to_string(f.start_lba);
  if (name == "end_lba") return std::to_string(f.end_lba);
  if (name == "pid") return std::to_string(f.pid);
  return Status::invalid("trace/" + std::string(name) + ": no such attribute");
}

Status trace_filter_store(QueueImpl* q, std::string_view name, std::string_view value) {
  const std::string path = "trace/" + std::string(name);
  uint64_t n = 0;
  uint16_t mask = 0;
  if (name == "act_mask") {
    auto m = blktrace::act_mask_from_string(value);
    if (!m) return m.status();
    mask = *m;
  } else if (!blktrace::parse_kernel_uint(value, &n) || (name == "pid" && n > UINT32_MAX)) {
    const char* what = name == "pid" ? "a thread id (0: every thread)" : "a sector number";
    return Status::invalid(path + ": expected " + what + ", decimal, 0x hex or 0 octal, got '" +
                           std::string(value) + "'");
  }
  std::lock_guard<std::mutex> l(q->trace_lock_);
  Writer* w = filter_owner_locked(q);
  blktrace::Filter f = w->filter();
  if (name == "act_mask") f.act_mask = mask;
  else if (name == "start_lba") f.start_lba = n;
  else if (name == "end_lba") f.end_lba = n;
  else if (name == "pid") f.pid = static_cast<uint32_t>(n);
  else return Status::invalid(path + ": no such attribute");
  w->set_filter(f);
  return Status::OK();
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

std::string blktrace_drop_warning(const BlktraceResult& r, const std::string& how) {
  if (!r.dropped && !r.write_errors) return "";
  std::string s = "blktrace " + r.path_prefix + ": ";
  if (r.dropped)
    s += std::to_string(r.dropped) + " events dropped: the per-CPU buffers filled faster than they were written out";
  if (r.write_errors) s += std::string(r.dropped ? "; " : "") + std::to_string(r.write_errors) + " buffers not written";
  s += "; to trace less, ";
  s += how.empty() ? "set trace/act_mask to the categories wanted (e.g. issue,complete), trace/start_lba and "
                     "trace/end_lba to a sector range, or trace/pid to one thread"
                   : how;
  return s;
}

}  // namespace blkmq
