// The rbd driver's DriverOps: each request becomes one librbd asynchronous
// operation, and the operation's completion ends it.
//
// Completions play the part of the device's interrupt, in either of two
// ways (parameter `completion`):
//  - callback (the default): librbd's own thread runs the completion's
//    callback, which enters hardirq context and hands the request to the
//    core's completion routing, as any driver's interrupt handler does.
//  - eventfd: librbd only queues the completion and signals an eventfd
//    (rbd_set_image_notification); the driver's reaper thread wakes,
//    takes a batch with rbd_poll_io_events and ends them in hardirq
//    context. A thread hop more per batch, but librbd's thread is free
//    again as soon as it has signalled. docs/PERFORMANCE.md measures both.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "blkmq/driver/context.h"
#include "drivers/rbd/rbd_dev.h"

namespace blkmq::rbd {
namespace {

inline RbdDevice* to_dev(const HwCtx* hctx) { return static_cast<RbdDevice*>(queue_data(hctx->queue)); }

// Set while this thread is inside an rbd_aio_* call. Should librbd fail an
// operation at once and run its callback on the submitting thread, that is
// not an interrupt: the request then completes in task context, as a
// driver that completes inside queue_rq.
thread_local bool tl_submitting = false;

// The request's status from its librbd completion, which it releases.
BlkStatus take_result(Request* rq, rbd_completion_t c) {
  const ssize_t ret = rbd_aio_get_return_value(c);
  rbd_aio_release(c);
  if (ret < 0) return errno_to_blk_status(static_cast<int>(ret));
  // A short read: the image shrank under it.
  if (rq->op == ReqOp::read && static_cast<uint64_t>(ret) < rq->data_len) return BlkStatus::ioerr;
  return BlkStatus::ok;
}

void rbd_done(rbd_completion_t c, void* arg) {
  auto* rq = static_cast<Request*>(arg);
  const BlkStatus st = take_result(rq, c);
  if (tl_submitting) {
    complete_request(rq, st);
    return;
  }
  HardirqScope irq;
  complete_request(rq, st);
}

// The iovecs of a read or write, in the request's payload. -1 when the
// request has more segments than the limit the core honours (a core bug).
int fill_iov(Request* rq) {
  RbdCmd* cmd = rq->pdu_as<RbdCmd>();
  int n = 0;
  bool too_many = false;
  rq_for_each_segment(rq, [&](void* base, size_t len, uint64_t) {
    if (n == kMaxSegments) {
      too_many = true;
      return;
    }
    cmd->iov[n++] = {base, len};
  });
  return too_many ? -1 : n;
}

int issue_op(rbd_image_t img, Request* rq, int nr_iov, rbd_completion_t c) {
  const uint64_t off = rq->sector << kSectorShift;
  const iovec* iov = rq->pdu_as<RbdCmd>()->iov;
  switch (rq->op) {
    case ReqOp::read:
      return rbd_aio_readv(img, iov, nr_iov, off, c);
    case ReqOp::write:
      return rbd_aio_writev(img, iov, nr_iov, off, c);
    case ReqOp::flush:
      return rbd_aio_flush(img, c);
    case ReqOp::discard:
      return rbd_aio_discard(img, off, rq->data_len, c);
    case ReqOp::write_zeroes:
      return rbd_aio_write_zeroes(img, off, rq->data_len, c, /*zero_flags=*/0, /*op_flags=*/0);
    default:  // an image has no zones
      break;
  }
  return -EOPNOTSUPP;
}

BlkStatus rbd_queue_rq(HwCtx* hctx, const QueueData& bd) {
  Request* rq = bd.rq;
  int nr_iov = 0;
  if (op_has_data(rq->op) && (nr_iov = fill_iov(rq)) < 0) [[unlikely]] return BlkStatus::ioerr;
  rbd_completion_t c = nullptr;
  // Only out of memory; the core retries the request later.
  RbdDevice* dev = to_dev(hctx);
  if (rbd_aio_create_completion(rq, dev->eventfd_completion() ? nullptr : rbd_done, &c) < 0) [[unlikely]]
    return BlkStatus::resource;
  start_request(rq);
  tl_submitting = true;
  const int r = issue_op(dev->image(), rq, nr_iov, c);
  tl_submitting = false;
  if (r < 0) [[unlikely]] {
    // librbd's C calls refuse bad arguments before they take the
    // completion, so it is still ours and no callback will come.
    rbd_aio_release(c);
    return errno_to_blk_status(r);
  }
  return BlkStatus::ok;
}

void rbd_complete(Request* rq) { end_request(rq, rq->status); }

TimeoutResult rbd_timeout(Request* rq) {
  // librbd cannot cancel an operation and writes into the request's pages
  // until its callback: ending the request here would hand them back while
  // they are still in use. The cluster's own timeout (osd_op_timeout)
  // fails it instead.
  return TimeoutResult::reset_timer;
}

int rbd_init_request(TagSet* set, Request* rq, unsigned hctx_idx) {
  new (rq->pdu()) RbdCmd();
  return 0;
}

}  // namespace

Status RbdDevice::start_reaper() {
  efd_ = eventfd(0, EFD_CLOEXEC);
  if (efd_ < 0) return Status::error(errno, std::string("rbd: eventfd: ") + std::strerror(errno));
  if (int r = rbd_set_image_notification(image_, efd_, EVENT_TYPE_EVENTFD); r < 0) {
    return Status::error(-r, std::string("rbd: rbd_set_image_notification: ") + std::strerror(-r));
  }
  reaper_ = std::thread([this] { reap_loop(); });
  return Status::OK();
}

// After the queue is gone: nothing is in flight, so nothing is left to reap.
void RbdDevice::stop_reaper() {
  if (reaper_.joinable()) {
    stop_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    (void)!write(efd_, &one, sizeof one);
    reaper_.join();
  }
  if (efd_ >= 0) close(efd_);
  efd_ = -1;
}

void RbdDevice::reap_loop() {
  pthread_setname_np(pthread_self(), "rbd-reaper");
  constexpr int kBatch = 32;
  rbd_completion_t comps[kBatch];
  while (!stop_.load(std::memory_order_acquire)) {
    uint64_t n = 0;
    if (read(efd_, &n, sizeof n) < 0 && errno != EINTR) break;
    HardirqScope irq;
    for (int got; (got = rbd_poll_io_events(image_, comps, kBatch)) > 0;) {
      for (int i = 0; i < got; i++) {
        auto* rq = static_cast<Request*>(rbd_aio_get_arg(comps[i]));
        complete_request(rq, take_result(rq, comps[i]));
      }
    }
  }
}

const DriverOps kRbdOps = {
    .queue_rq = rbd_queue_rq,
    .queue_rqs = nullptr,
    .commit_rqs = nullptr,
    .get_budget = nullptr,
    .put_budget = nullptr,
    .timeout = rbd_timeout,
    .poll = nullptr,
    .wait = nullptr,
    .complete = rbd_complete,
    .init_hctx = nullptr,
    .exit_hctx = nullptr,
    .init_request = rbd_init_request,
    .exit_request = nullptr,
    .busy = nullptr,
};

}  // namespace blkmq::rbd
