// The null driver's DriverOps: issue, completion in the three irqmodes,
// polling, timeouts, fault injection and bandwidth throttling.
#include <cerrno>
#include <cstring>
#include <new>

#include "blkmq/driver/context.h"
#include "drivers/null/null_dev.h"

namespace blkmq::nullb {
namespace {

inline NullCmd* to_cmd(Request* rq) { return rq->pdu_as<NullCmd>(); }
inline NullQueue* to_nq(const HwCtx* hctx) { return static_cast<NullQueue*>(hctx->driver_data); }

void cmd_timer_expired(Request* rq) {
  // The kernel's hrtimer callback runs in hardirq context and ends the
  // request directly, bypassing completion routing.
  HardirqScope irq;
  end_request(rq, to_cmd(rq)->status.load(std::memory_order_relaxed));
}

void arm_cmd_timer(const NullQueue* nq, Request* rq, BlkStatus st) {
  NullCmd* cmd = to_cmd(rq);
  cmd->status.store(st, std::memory_order_relaxed);
  if (!cmd->timer_bound) [[unlikely]] {
    // Once per static request: binding allocates (std::function).
    cmd->timer.init(nq->timer_thread, [rq] { cmd_timer_expired(rq); });
    cmd->timer_bound = true;
  }
  cmd->timer.arm_after(nq->completion_nsec);
}

inline void complete_cmd(const NullQueue* nq, Request* rq, BlkStatus st) {
  // irqmode=0 is the benchmark's mode: test it first.
  if (nq->irqmode == IrqMode::none) [[likely]] {
    end_request(rq, st);
  } else if (nq->irqmode == IrqMode::softirq) {
    complete_request(rq, st);
  } else {
    arm_cmd_timer(nq, rq, st);
  }
}

// Zeroes what a read past a zone's write pointer did not transfer.
void zero_from(Request* rq, uint64_t from) {
  rq_for_each_segment(rq, [from](void* base, size_t n, uint64_t roff) {
    if (roff + n <= from) return;
    const uint64_t skip = roff < from ? from - roff : 0;
    std::memset(static_cast<char*>(base) + skip, 0, n - skip);
  });
}


// null_process_zoned_cmd: reads, writes, appends and zone management go by
// the zone table's rules, the data (if memory-backed) moving under the
// zone's lock; an append reports where it wrote in rq->sector. The rest
// is an ordinary command.
BlkStatus handle_zoned(NullDevice* dev, ZoneTable* zt, Request* rq, bool* handled) {
  PageStore* store = dev->store();
  const uint64_t nr = rq->data_len >> kSectorShift;
  auto xfer = [store, rq](uint64_t sector, uint64_t n) {
    return store ? store->transfer(rq, sector << kSectorShift, n << kSectorShift) : BlkStatus::ok;
  };
  *handled = true;
  switch (rq->op) {
    case ReqOp::read: {
      uint64_t valid = 0;
      const BlkStatus st = zt->read(rq->sector, nr, xfer, &valid);
      if (st == BlkStatus::ok && store && valid < nr) zero_from(rq, valid << kSectorShift);
      return st;
    }
    case ReqOp::write:
    case ReqOp::zone_append: {
      if (store && (rq->cmd_flags & kBioPreflush))
        if (BlkStatus st = store->flush(); st != BlkStatus::ok) return st;
      const bool append = rq->op == ReqOp::zone_append;
      uint64_t at = rq->sector;
      const BlkStatus st = zt->write(rq->sector, nr, append, xfer, &at);
      if (append && st == BlkStatus::ok) rq->sector = at;
      return st;
    }
    case ReqOp::zone_reset:
    case ReqOp::zone_reset_all:
    case ReqOp::zone_open:
    case ReqOp::zone_close:
    case ReqOp::zone_finish:
      return zt->manage(zone_op_of(rq->op), rq->sector, [store](uint64_t s, uint64_t n) {
        if (store) store->discard(s << kSectorShift, n << kSectorShift);
      });
    default:
      *handled = false;
      return BlkStatus::ok;
  }
}

// Moves the data of a memory-backed device (null_handle_memory_backed).
// Without memory backing there is nothing to do: success.
BlkStatus handle_cmd(NullDevice* dev, Request* rq) {
  if (ZoneTable* zt = dev->zones()) {
    bool handled;
    const BlkStatus st = handle_zoned(dev, zt, rq, &handled);
    if (handled) return st;
  }
  PageStore* store = dev->store();
  if (!store) return BlkStatus::ok;
  const uint64_t off = rq->sector << kSectorShift;
  // The core checks capacity; this only guards against a core bug.
  if (off > store->capacity() || rq->data_len > store->capacity() - off) return BlkStatus::inval;
  switch (rq->op) {
    case ReqOp::read:
      return store->transfer(rq, off);
    case ReqOp::write:
      if (rq->cmd_flags & kBioPreflush) {
        if (BlkStatus st = store->flush(); st != BlkStatus::ok) return st;
      }
      return store->transfer(rq, off);
    case ReqOp::flush:
      return store->flush();
    case ReqOp::discard:
      if (!dev->params().discard) return BlkStatus::notsupp;
      return store->discard(off, rq->data_len);
    default:  // write_zeroes, and zone operations on a device without zones
      break;
  }
  return BlkStatus::notsupp;
}

// The mbps cap (null_handle_throttled). Zero-length requests carry no
// bandwidth and are never held back.
BlkStatus throttle(NullDevice* dev, Request* rq) {
  BwBudget* bw = dev->bw();
  if (rq->data_len == 0 || bw->try_consume(rq->data_len)) return BlkStatus::ok;
  bw->mark_throttled();
  stop_hw_queues(rq->q);
  // The tick may have refilled between the failed take and the stop, and it
  // may already have looked at the throttled mark: restart ourselves then.
  if (bw->available() > 0) start_stopped_hw_queues(rq->q, true);
  return BlkStatus::dev_resource;
}

uint64_t fault_size(const Request* rq) { return rq->data_len ? rq->data_len : 1; }

BlkStatus queue_rq_slow(NullQueue* nq, Request* rq) {
  NullDevice* dev = nq->dev;
  NullCmd* cmd = to_cmd(rq);
  cmd->status.store(BlkStatus::ok, std::memory_order_relaxed);
  cmd->fake_timeout = false;
  if (nq->slow & NullQueue::kSlowFaults) {
    cmd->fake_timeout = dev->timeout_fault().enabled() &&
                        dev->timeout_fault().should_fail(fault_size(rq));
    if (dev->requeue_fault().enabled() && dev->requeue_fault().should_fail(fault_size(rq))) {
      // Alternate between the two requeue paths of the core: a busy return
      // (hctx dispatch list) and a driver requeue (requeue list).
      if (nq->requeue_selection.fetch_add(1, std::memory_order_relaxed) % 2 == 0) {
        return BlkStatus::resource;
      }
      requeue_request(rq, true);
      return BlkStatus::ok;
    }
  }
  if (nq->slow & NullQueue::kSlowThrottle) {
    if (BlkStatus st = throttle(dev, rq); st != BlkStatus::ok) return st;
  }
  // Once started, a faked timeout may be ended by the timeout handler at any
  // moment: decide everything about rq before starting it.
  const bool fake_timeout = cmd->fake_timeout;
  start_request(rq);
  if (nq->slow & NullQueue::kSlowPoll) {
    // Poll requests ignore timeout injection, as null_blk: poll() finds them.
    std::lock_guard lk(nq->poll_lock);
    nq->poll_list.push_back(&rq->queuelist);
    return BlkStatus::ok;
  }
  if (fake_timeout) return BlkStatus::ok;
  complete_cmd(nq, rq, handle_cmd(dev, rq));
  return BlkStatus::ok;
}

BlkStatus null_queue_rq(HwCtx* hctx, const QueueData& bd) {
  NullQueue* nq = to_nq(hctx);
  Request* rq = bd.rq;
  // The benchmark path: no faults, no cap, no data, no poll list.
  if (nq->slow == 0) [[likely]] {
    start_request(rq);
    complete_cmd(nq, rq, BlkStatus::ok);
    return BlkStatus::ok;
  }
  return queue_rq_slow(nq, rq);
}

// A list from a plug: with irqmode=0 every request ends right here, so its
// completions are collected and ended together at the end of the list
// (end_request_batch), as a driver that reaps many completions at once.
void null_queue_rqs(RqList* rqs) {
  RqList left;
  IoCompBatch iob;
  while (Request* rq = rqs->pop_front()) {
    NullQueue* nq = to_nq(rq->mq_hctx);
    if (nq->slow == 0 && nq->irqmode == IrqMode::none) [[likely]] {
      start_request(rq);
      if (!add_to_batch(rq, &iob, BlkStatus::ok)) end_request(rq, BlkStatus::ok);
      continue;
    }
    // Popped before issue: a completed request may be reused at once.
    QueueData bd{rq, rqs->empty()};
    BlkStatus st = null_queue_rq(rq->mq_hctx, bd);
    if (st == BlkStatus::ok) continue;
    left.push_back(rq);
    if (st == BlkStatus::dev_resource) {
      // Throttled: the queues are stopped, every further try would fail.
      while (Request* r = rqs->pop_front()) left.push_back(r);
    }
  }
  end_request_batch(&iob);
  *rqs = left;
}

int null_poll(HwCtx* hctx, IoCompBatch* iob) {
  NullQueue* nq = to_nq(hctx);
  RqList done;
  {
    std::lock_guard lk(nq->poll_lock);
    while (!nq->poll_list.empty()) {
      ListNode* n = nq->poll_list.next;
      // unlink() leaves the node self-linked: the timeout handler reads
      // that as "a poller has it".
      ListNode::unlink(n);
      done.push_back(list_entry<Request, &Request::queuelist>(n));
    }
  }
  int nr = 0;
  while (Request* rq = done.pop_front()) {
    BlkStatus st = handle_cmd(nq->dev, rq);
    if (!iob || !add_to_batch(rq, iob, st)) end_request(rq, st);
    nr++;
  }
  return nr;
}

TimeoutResult null_timeout(Request* rq) {
  NullQueue* nq = to_nq(rq->mq_hctx);
  NullCmd* cmd = to_cmd(rq);
  if (nq->slow & NullQueue::kSlowPoll) {
    bool waiting;
    {
      std::lock_guard lk(nq->poll_lock);
      waiting = !rq->queuelist.empty();
      if (waiting) ListNode::unlink(&rq->queuelist);
    }
    // A poller took it and ends it; nothing to do here.
    if (!waiting) return TimeoutResult::done;
    complete_request(rq, BlkStatus::timeout);
    return TimeoutResult::done;
  }
  // A real timeout (slow timer completion) ends with this status when its
  // pending completion fires; only a faked one has nobody to end it.
  cmd->status.store(BlkStatus::timeout, std::memory_order_relaxed);
  if (cmd->fake_timeout) complete_request(rq, BlkStatus::timeout);
  return TimeoutResult::done;
}

void null_complete(Request* rq) { end_request(rq, rq->status); }

int null_init_hctx(HwCtx* hctx, void* driver_data, unsigned hctx_idx) {
  auto* set = static_cast<NullSet*>(driver_data);
  auto* dev = hctx->queue ? static_cast<NullDevice*>(queue_data(hctx->queue)) : nullptr;
  if (!dev) dev = set->creating();
  if (!dev) return -EINVAL;
  if (dev->init_hctx_fault().enabled() && dev->init_hctx_fault().should_fail(1)) return -EFAULT;
  NullQueue* nq = dev->alloc_queue(hctx, set);
  if (!nq) return -ENOMEM;
  hctx->driver_data = nq;
  return 0;
}

void null_exit_hctx(HwCtx* hctx, unsigned hctx_idx) {
  NullQueue* nq = to_nq(hctx);
  if (!nq) return;
  hctx->driver_data = nullptr;
  nq->dev->free_queue(nq);
}

int null_init_request(TagSet* set, Request* rq, unsigned hctx_idx) {
  new (rq->pdu()) NullCmd();
  return 0;
}

void null_exit_request(TagSet* set, Request* rq, unsigned hctx_idx) { to_cmd(rq)->~NullCmd(); }

}  // namespace

const DriverOps kNullOps = {
    .queue_rq = null_queue_rq,
    .queue_rqs = null_queue_rqs,
    .commit_rqs = nullptr,  // no doorbell to ring
    .get_budget = nullptr,
    .put_budget = nullptr,
    .timeout = null_timeout,
    .poll = null_poll,
    .complete = null_complete,
    .init_hctx = null_init_hctx,
    .exit_hctx = null_exit_hctx,
    .init_request = null_init_request,
    .exit_request = null_exit_request,
    .busy = nullptr,
};

}  // namespace blkmq::nullb
