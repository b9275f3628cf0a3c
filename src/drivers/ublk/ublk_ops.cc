// The ublk driver's DriverOps and the completion side of UblkIo: queue_rq
// hands a request to its hw queue's server thread; the target completes it
// through UblkIo::complete(), which routes it through the core as a
// completion from task context; ops.complete ends it.
#include <new>

#include "drivers/ublk/ublk_dev.h"

namespace blkmq {

UblkTarget::~UblkTarget() = default;

unsigned UblkIo::nr_segments() const {
  unsigned n = 0;
  rq_for_each_segment(rq_, [&n](void*, size_t, uint64_t) { n++; });
  return n;
}

bool UblkIo::complete(BlkStatus st, uint32_t bytes) {
  // The guard makes a double completion by a buggy target harmless instead
  // of ending bios twice (the RMW decides). Release orders the target's
  // data writes before the completion; acquire pairs with a racing second
  // complete() (this function) whose release it reads. Reset by
  // ublk_dev.h's relaxed store before the request is handed out again.
  if (completed_.exchange(1, std::memory_order_acq_rel) != 0) return false;
  if (st == BlkStatus::resource || st == BlkStatus::dev_resource) st = BlkStatus::ioerr;
  if (st == BlkStatus::ok && op_has_data(rq_->op) && bytes < length_) {
    // Short transfer: ops.complete ends the good part ok, the rest ioerr.
    short_ = true;
    short_bytes_ = bytes - bytes % lbs_;
    st = BlkStatus::ioerr;
  }
  // Task context (or whatever the caller is in): the core decides between
  // completing right here and raising the softirq (queue/task_completion).
  // Within the server's pass, one that ublk_complete would only end joins
  // the pass's batch.
  IoCompBatch* iob = ublkd::ublk_pass_batch();
  if (iob && !short_ && !static_cast<ublkd::UblkDevice*>(queue_data(rq_->q))->options().completion_hook)
    return complete_request_batched(rq_, st, iob);
  return complete_request(rq_, st);
}

}  // namespace blkmq

namespace blkmq::ublkd {

IoCompBatch*& ublk_pass_batch() {
  thread_local IoCompBatch* batch = nullptr;
  return batch;
}

namespace {

BlkStatus ublk_queue_rq(HwCtx* hctx, const QueueData& bd) {
  auto* srv = static_cast<UblkServer*>(hctx->driver_data);
  Request* rq = bd.rq;
  auto* dev = static_cast<UblkDevice*>(queue_data(rq->q));
  to_cmd(rq)->prepare(rq, hctx->queue_num, dev->options().logical_block_size);
  start_request(rq);
  if (srv->post(rq)) [[likely]] return BlkStatus::ok;
  // Cannot happen: the ring holds twice the queue depth and at most
  // depth + 1 (the flush request) are in flight per hctx. A busy return
  // after start_request() would leave a started request with the core, so
  // fail it instead, exactly once, through the normal completion.
  complete_request(rq, BlkStatus::ioerr);
  return BlkStatus::ok;
}

void ublk_complete(Request* rq) {
  UblkCmd* cmd = to_cmd(rq);
  auto* dev = static_cast<UblkDevice*>(queue_data(rq->q));
  if (dev->options().completion_hook) [[unlikely]] dev->target()->completed(*cmd);
  if (cmd->is_short()) [[unlikely]] {
    // The good prefix first: bios wholly inside it end ok (update_request
    // returns true while bytes remain), then everything left ends ioerr.
    if (cmd->short_bytes()) update_request(rq, BlkStatus::ok, cmd->short_bytes());
    end_request(rq, BlkStatus::ioerr);
    return;
  }
  end_request(rq, rq->status);
}

TimeoutResult ublk_timeout(Request* rq) {
  // The target owns the request until it calls complete(); ending it here
  // would race with that and end bios twice. ublk without a configured
  // timeout behaves the same way.
  return TimeoutResult::reset_timer;
}

int ublk_init_hctx(HwCtx* hctx, void* driver_data, unsigned hctx_idx) {
  auto* dev = static_cast<UblkDevice*>(driver_data);
  if (hctx_idx >= dev->options().nr_hw_queues) return -22;  // -EINVAL
  hctx->driver_data = dev->server(hctx_idx);
  return 0;
}

void ublk_exit_hctx(HwCtx* hctx, unsigned hctx_idx) { hctx->driver_data = nullptr; }

int ublk_init_request(TagSet* set, Request* rq, unsigned hctx_idx) {
  new (rq->pdu()) UblkCmd();
  return 0;
}

void ublk_exit_request(TagSet* set, Request* rq, unsigned hctx_idx) { to_cmd(rq)->~UblkCmd(); }

}  // namespace

const DriverOps kUblkOps = {
    .queue_rq = ublk_queue_rq,
    .queue_rqs = nullptr,   // queue_rq per request is already just a ring push
    .commit_rqs = nullptr,  // the wake happens per push, only when the server sleeps
    .get_budget = nullptr,
    .put_budget = nullptr,
    .timeout = ublk_timeout,
    .poll = nullptr,
    .complete = ublk_complete,
    .init_hctx = ublk_init_hctx,
    .exit_hctx = ublk_exit_hctx,
    .init_request = ublk_init_request,
    .exit_request = ublk_exit_request,
    .busy = nullptr,
};

}  // namespace blkmq::ublkd
