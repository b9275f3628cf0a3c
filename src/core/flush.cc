// The flush machinery with write-cache emulation (blk-flush.c): a write with
// PREFLUSH and/or FUA on a device with a volatile cache is run as up to
// three steps — flush, data, flush — and concurrent flush steps are batched
// into one flush request, which borrows the tag of the first waiter.
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/core.h"

namespace blkmq {

enum FlushSeq : uint8_t {
  kSeqPreflush = 1,
  kSeqData = 2,
  kSeqPostflush = 4,
  kSeqDone = 8,
};

struct FlushQueue {
  QueueImpl* q = nullptr;
  base::SpinLock lock;
  ListNode pending[2];
  unsigned pending_idx = 0;
  bool running = false;
  Request* flush_rq = nullptr;
  void* mem = nullptr;
};

namespace {

uint8_t next_step(const Request* rq) {
  for (uint8_t s = kSeqPreflush; s <= kSeqDone; s = static_cast<uint8_t>(s << 1))
    if (!(rq->flush_seq & s)) return s;
  return kSeqDone;
}

void kick_flush(FlushQueue* fq);
bool data_end_io(Request* rq, BlkStatus st);

// Moves the request through its sequence after `done` finished with st.
void complete_seq(FlushQueue* fq, Request* rq, uint8_t done, BlkStatus st) {
  QueueImpl* q = fq->q;
  rq->flush_seq |= done;
  if (st != BlkStatus::ok) rq->flush_seq = kSeqPreflush | kSeqData | kSeqPostflush;
  if (st != BlkStatus::ok && rq->status == BlkStatus::ok) rq->status = st;
  switch (next_step(rq)) {
    case kSeqPreflush:
    case kSeqPostflush:
      fq->lock.lock();
      fq->pending[fq->pending_idx].push_back(&rq->queuelist);
      fq->lock.unlock();
      kick_flush(fq);
      return;
    case kSeqData:
      rq->end_io = data_end_io;
      q->requeue_lock_.lock();
      q->flush_list_.push_back(&rq->queuelist);
      q->requeue_lock_.unlock();
      kick_requeue_list(q);
      return;
    default: {
      BlkStatus final = rq->status;
      rq->rq_flags &= ~kRqfFlushSeq;
      rq->end_io = rq->flush_saved_end_io;
      rq->flush_saved_end_io = nullptr;
      end_request(rq, final);
      return;
    }
  }
}

bool data_end_io(Request* rq, BlkStatus st) {
  QueueImpl* q = to_impl(rq->q);
  put_driver_tag(rq);  // a scheduler request gets a new driver tag per step
  rq->state.store(RqState::idle, std::memory_order_relaxed);
  complete_seq(q->fq_, rq, kSeqData, st);
  return false;
}

bool flush_rq_end_io(Request* frq, BlkStatus st) {
  QueueImpl* q = to_impl(frq->q);
  FlushQueue* fq = q->fq_;
  account_flush(frq);
  if (frq->internal_tag != kNoTag) put_driver_tag(frq);  // it took its own driver tag
  frq->tag = kNoTag;
  frq->internal_tag = kNoTag;
  frq->state.store(RqState::idle, std::memory_order_relaxed);
  ListNode done;
  fq->lock.lock();
  done.splice_tail(&fq->pending[fq->pending_idx ^ 1]);
  fq->running = false;
  fq->lock.unlock();
  // Issue the flush for what queued up meanwhile before ending anything:
  // once the last request of the queue ends, the queue (and fq) may go.
  kick_flush(fq);
  while (!done.empty()) {
    Request* rq = rq_of(done.next);
    ListNode::unlink(&rq->queuelist);
    complete_seq(fq, rq, next_step(rq), st);
  }
  return false;
}

// Issues one flush for everything pending, unless one is running.
void kick_flush(FlushQueue* fq) {
  QueueImpl* q = fq->q;
  fq->lock.lock();
  ListNode& pend = fq->pending[fq->pending_idx];
  if (fq->running || pend.empty()) {
    fq->lock.unlock();
    return;
  }
  fq->running = true;
  fq->pending_idx ^= 1;
  Request* first = rq_of(pend.next);
  Request* frq = fq->flush_rq;
  frq->q = q;
  frq->mq_hctx = first->mq_hctx;
  frq->mq_ctx = first->mq_ctx;
  frq->op = ReqOp::flush;
  frq->cmd_flags = kBioPreflush | kBioSync;
  frq->rq_flags = kRqfFlushSeq;
  // Borrow the first waiter's tag: it is idle while it waits.
  if (first->internal_tag != kNoTag) {
    frq->internal_tag = first->internal_tag;
    frq->tag = kNoTag;
  } else {
    frq->internal_tag = kNoTag;
    frq->tag = first->tag;
  }
  frq->bio = frq->biotail = nullptr;
  frq->data_len = 0;
  frq->sector = 0;
  frq->nr_phys_segments = 0;
  frq->timeout_ms = 0;
  frq->start_time_ns = q->tun_.iostats.load(std::memory_order_relaxed) ? blk_time_get_ns(q) : 0;
  frq->status = BlkStatus::ok;
  frq->end_io = flush_rq_end_io;
  frq->ref.store(1, std::memory_order_relaxed);
  frq->budget_token = -1;
  fq->lock.unlock();
  q->requeue_lock_.lock();
  q->flush_list_.push_back(&frq->queuelist);
  q->requeue_lock_.unlock();
  kick_requeue_list(q);
}

}  // namespace

FlushQueue* flush_queue_alloc(QueueImpl* q) {
  auto* fq = new FlushQueue();
  fq->q = q;
  const size_t size = (sizeof(Request) + q->set_->cfg().cmd_size + 63) & ~size_t{63};
  fq->mem = std::aligned_alloc(64, size);
  std::memset(fq->mem, 0, size);
  fq->flush_rq = new (fq->mem) Request();
  if (q->ops_->init_request) q->ops_->init_request(q->set_, fq->flush_rq, 0);
  return fq;
}

void flush_queue_free(FlushQueue* fq) {
  if (!fq) return;
  if (fq->q->ops_->exit_request) fq->q->ops_->exit_request(fq->q->set_, fq->flush_rq, 0);
  fq->flush_rq->~Request();
  std::free(fq->mem);
  delete fq;
}

bool insert_flush(Request* rq) {
  QueueImpl* q = to_impl(rq->q);
  const QueueLimits& l = q->limits_;
  uint8_t policy = 0;
  if (rq->data_len) policy |= kSeqData;
  if (l.write_cache) {
    if ((rq->cmd_flags & kBioPreflush) || rq->op == ReqOp::flush) policy |= kSeqPreflush;
    if ((rq->cmd_flags & kBioFua) && !l.fua) policy |= kSeqPostflush;
  }
  rq->cmd_flags &= ~kBioPreflush;
  if (!l.write_cache || !l.fua) rq->cmd_flags &= ~kBioFua;
  if (!policy) {  // an empty flush on a device without a cache
    end_request(rq, BlkStatus::ok);
    return true;
  }
  if (policy == kSeqData) return false;  // plain data write (FUA native or dropped)
  if (rq->rq_flags & kRqfUseSched) {
    if (q->elevator_ && q->elevator_->type->ops.finish_request) q->elevator_->type->ops.finish_request(rq);
    rq->rq_flags &= ~kRqfUseSched;
  }
  rq->flush_seq = static_cast<uint8_t>((kSeqPreflush | kSeqData | kSeqPostflush) & ~policy);
  rq->rq_flags |= kRqfFlushSeq;
  rq->flush_saved_end_io = rq->end_io;
  rq->end_io = data_end_io;
  rq->op = rq->data_len ? rq->op : ReqOp::flush;  // a write or an append
  complete_seq(q->fq_, rq, 0, BlkStatus::ok);
  return true;
}

}  // namespace blkmq
