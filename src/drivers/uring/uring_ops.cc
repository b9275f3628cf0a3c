// The uring driver's DriverOps: issue to the hctx's ring, batch doorbells
// (commit_rqs), completion, polling and per-hctx ring setup.
#include <cerrno>
#include <new>

#include "drivers/uring/uring_dev.h"

namespace blkmq::uring {
namespace {

inline UringQueue* to_uq(const HwCtx* hctx) { return static_cast<UringQueue*>(hctx->driver_data); }

// Whether the device can do `op` at all; refused before the request starts.
bool op_supported(const UringDevice* dev, const HwCtx* hctx, ReqOp op) {
  const Features& f = dev->features();
  // An IOPOLL ring takes reads and writes only.
  if (hctx->type == HctxType::poll && f.iopoll) return op_has_data(op);
  switch (op) {
    case ReqOp::read:
    case ReqOp::write:
      return true;
    case ReqOp::flush:
      return f.fsync;
    case ReqOp::discard:
      return f.punch_hole;
    case ReqOp::write_zeroes:
      return f.zero_range;
    default:  // zone operations: a file has no zones
      return false;
  }
  return false;
}

BlkStatus uring_queue_rq(HwCtx* hctx, const QueueData& bd) {
  UringQueue* uq = to_uq(hctx);
  auto* dev = static_cast<UringDevice*>(queue_data(hctx->queue));
  if (!op_supported(dev, hctx, bd.rq->op)) [[unlikely]] {
    // Doorbell for what earlier requests of this batch prepared.
    if (bd.last) uq->commit();
    return BlkStatus::notsupp;
  }
  BlkStatus st = uq->issue(bd.rq, bd.last);
  if (st != BlkStatus::ok && bd.last) uq->commit();
  return st;
}

void uring_commit_rqs(HwCtx* hctx) { to_uq(hctx)->commit(); }

int uring_poll(HwCtx* hctx, IoCompBatch* iob) { return to_uq(hctx)->poll(iob); }

int uring_wait(HwCtx* hctx, const std::atomic<uint32_t>* word, uint32_t val, std::atomic<uint32_t>* channel,
               uint32_t channel_val) {
  return to_uq(hctx)->wait(word, val, channel, channel_val);
}

void uring_complete(Request* rq) { end_request(rq, rq->status); }

TimeoutResult uring_timeout(Request* rq) {
  // The kernel owns the request until its CQE arrives, and file I/O always
  // completes: ending it here would let the CQE touch a reused request.
  return TimeoutResult::reset_timer;
}

int uring_init_hctx(HwCtx* hctx, void* driver_data, unsigned hctx_idx) {
  auto* dev = static_cast<UringDevice*>(driver_data);
  UringQueue* uq = dev->alloc_queue(hctx, hctx_idx);
  if (!uq) return -ENOMEM;
  if (int r = uq->start(hctx->type == HctxType::poll); r < 0) {
    dev->free_queue(uq);
    return r;
  }
  hctx->driver_data = uq;
  return 0;
}

void uring_exit_hctx(HwCtx* hctx, unsigned hctx_idx) {
  UringQueue* uq = to_uq(hctx);
  if (!uq) return;
  hctx->driver_data = nullptr;
  auto* dev = static_cast<UringDevice*>(hctx->set->config().driver_data);
  dev->free_queue(uq);
}

int uring_init_request(TagSet* set, Request* rq, unsigned hctx_idx) {
  new (rq->pdu()) UringCmd();
  return 0;
}

void uring_exit_request(TagSet* set, Request* rq, unsigned hctx_idx) {
  rq->pdu_as<UringCmd>()->~UringCmd();
}

}  // namespace

const DriverOps kUringOps = {
    .queue_rq = uring_queue_rq,
    .queue_rqs = nullptr,
    .commit_rqs = uring_commit_rqs,
    .get_budget = nullptr,
    .put_budget = nullptr,
    .timeout = uring_timeout,
    .poll = uring_poll,
    .wait = uring_wait,
    .complete = uring_complete,
    .init_hctx = uring_init_hctx,
    .exit_hctx = uring_exit_hctx,
    .init_request = uring_init_request,
    .exit_request = uring_exit_request,
    .busy = nullptr,
};

}  // namespace blkmq::uring
