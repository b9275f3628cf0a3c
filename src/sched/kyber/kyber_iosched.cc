// Kyber's request path: per-ctx insertion lists, token-gated round-robin
// dispatch over the domains, and the elevator ops table.
#include <mutex>

#include "base/registry.h"
#include "blkmq/driver/driver.h"
#include "sched/kyber/kyber_internal.h"

namespace blkmq::kyber {
namespace {

constexpr intptr_t kNoToken = -1;

int rq_token(const Request* rq) { return static_cast<int>(reinterpret_cast<intptr_t>(rq->elv_priv[0])); }
void set_rq_token(Request* rq, intptr_t token) { rq->elv_priv[0] = reinterpret_cast<void*>(token); }

HctxData* khd_of(HwCtx* hctx) { return static_cast<HctxData*>(hctx->sched_data); }

// ---- setup and teardown ----

Status init_sched(Queue* q, ElevatorQueue* eq) {
  auto kqd = std::make_unique<KyberData>();
  kqd->q = q;
  for (unsigned d = 0; d < kNrDomains; d++)
    kqd->tokens[d] = std::make_unique<base::SbitmapQueue>(kDomainDepth[d], false);
  for (unsigned d = 0; d < kOther; d++) kqd->targets[d].store(kDefaultTarget[d], std::memory_order_relaxed);
  KyberData* raw = kqd.get();
  kqd->timer.init(&q->runtime().timers(), [raw] { timer_fired(raw); });
  // I/O latency needs the issue time of every request (blk-stat).
  queue_enable_stats(q);
  set_queue_async_depth(q, queue_nr_requests(q) * kAsyncPercent / 100);
  set_min_shallow_depth(q, queue_async_depth(q));
  eq->elevator_data = kqd.release();
  return Status::OK();
}

void exit_sched(ElevatorQueue* eq) {
  KyberData* kqd = kqd_of(eq);
  // The queue is frozen: no completion can re-arm the timer after this.
  kqd->timer.cancel_sync();
  delete kqd;
  eq->elevator_data = nullptr;
}

void domain_wake(base::SbqWaitEntry* e);

Status init_hctx(HwCtx* hctx, unsigned) {
  auto* khd = new HctxData(hctx_nr_ctx(hctx));
  for (DomainWait& w : khd->waits) {
    w.hctx = hctx;
    w.entry.func = &domain_wake;
    w.entry.data = &w;
  }
  hctx->sched_data = khd;
  return Status::OK();
}

void exit_hctx(HwCtx* hctx, unsigned) {
  HctxData* khd = khd_of(hctx);
  KyberData* kqd = kqd_of(hctx->queue);
  // Unhook from the token pools; remove_wait takes the wait queue's lock,
  // so a wake callback running on the entry has finished when it returns.
  for (unsigned d = 0; d < kNrDomains; d++)
    if (khd->waits[d].ws) kqd->tokens[d]->remove_wait(khd->waits[d].ws, &khd->waits[d].entry);
  delete khd;
  hctx->sched_data = nullptr;
}

void depth_updated(Queue* q) {
  // New scheduler tags: tell them again how shallow limit_depth goes.
  set_min_shallow_depth(q, queue_async_depth(q));
}

// ---- allocation and freeing ----

void limit_depth(Queue* q, ReqOp op, uint32_t, AllocLimit* lim) {
  // Reads are always sync; everything else may use only async_depth tags,
  // so a flood of writes cannot starve the reads of scheduler tags.
  if (op != ReqOp::read) lim->shallow_depth = queue_async_depth(q);
}

void prepare_request(Request* rq) { set_rq_token(rq, kNoToken); }

// Also the requeue hook: a requeued request gives its token back and takes
// a new one when it is dispatched again.
void finish_request(Request* rq) {
  const int nr = rq_token(rq);
  if (nr == kNoToken) return;
  set_rq_token(rq, kNoToken);
  kqd_of(rq->q)->tokens[op_domain(rq->op)]->clear(static_cast<unsigned>(nr), rq->submit_cpu);
}

void completed_request(Request* rq, uint64_t now) {
  const Domain d = op_domain(rq->op);
  if (d == kOther) return;
  KyberData* kqd = kqd_of(rq->q);
  // A request without a start time (I/O stats off) has no total latency.
  if (rq->start_time_ns) add_latency_sample(kqd, d, kTotalLatency, now > rq->start_time_ns ? now - rq->start_time_ns : 0);
  if ((rq->rq_flags & kRqfStats) && rq->io_start_time_ns)
    add_latency_sample(kqd, d, kIoLatency, now > rq->io_start_time_ns ? now - rq->io_start_time_ns : 0);
  // timer_reduce(now + 100 ms): every arming is "now + period", so an armed
  // timer is always the earlier one and only an idle timer needs arming.
  // The exchange pairs with kyber_latency.cc:timer_fired's clear: after
  // it, exactly one completion arms the next period. That takes only the
  // RMW's atomicity; its acq_rel pairs with nothing that needs it (the
  // samples are atomic counters the timer exchanges, and one that misses
  // this period's flush is counted in the next).
  if (!kqd->timer_armed.load(std::memory_order_relaxed) &&
      !kqd->timer_armed.exchange(true, std::memory_order_acq_rel))
    kqd->timer.arm_after(kTimerPeriodNs);
}

// ---- insertion and merging ----

void insert_requests(HwCtx* hctx, ListNode* list, uint32_t flags) {
  HctxData* khd = khd_of(hctx);
  while (!list->empty()) {
    Request* rq = rq_of(list->next);
    ListNode::unlink(&rq->queuelist);
    const unsigned d = op_domain(rq->op);
    const unsigned idx = rq_ctx_index(rq);
    CtxQueue& kcq = khd->kcqs[idx];
    kcq.lock.lock();
    if (flags & kInsertAtHead) kcq.rq_list[d].push_front(&rq->queuelist);
    else kcq.rq_list[d].push_back(&rq->queuelist);
    khd->kcq_map[d].set(idx);
    kcq.lock.unlock();
  }
}

bool bio_merge(Queue* q, Bio* bio, unsigned nr_segs) {
  HwCtx* hctx = current_hctx(q, bio->op, bio->flags);
  HctxData* khd = khd_of(hctx);
  CtxQueue& kcq = khd->kcqs[current_ctx_index(hctx)];
  kcq.lock.lock();
  const bool merged = bio_list_merge(q, &kcq.rq_list[op_domain(bio->op)], bio, nr_segs);
  kcq.lock.unlock();
  return merged;
}

// ---- dispatch ----

// A token of the waited-for domain was freed: run the hctx from kblockd,
// since this runs in whatever context freed the token.
void domain_wake(base::SbqWaitEntry* e) {
  auto* w = static_cast<DomainWait*>(e->data);
  Queue* q = w->hctx->queue;
  w->waiting.store(false, std::memory_order_release);
  run_hw_queues(q, true);
}

// Takes a token of the current domain. Without one, the hctx waits on the
// pool (so it is rerun when a token frees) and tries once more, in case the
// last token freed before the wait was queued. Called under khd->lock.
int get_domain_token(KyberData* kqd, HctxData* khd) {
  const unsigned d = khd->cur_domain;
  base::SbitmapQueue& tokens = *kqd->tokens[d];
  DomainWait& w = khd->waits[d];
  int nr = tokens.get();
  if (nr < 0 && !w.waiting.load(std::memory_order_acquire)) {
    w.ws = tokens.wait_ptr(&w.wait_index);
    w.waiting.store(true, std::memory_order_relaxed);
    tokens.add_wait(w.ws, &w.entry);
    nr = tokens.get();
  }
  // Holding a token now: leave the wait queue so other waiters get the
  // wake-ups.
  if (nr >= 0 && w.waiting.load(std::memory_order_acquire)) {
    tokens.remove_wait(w.ws, &w.entry);
    w.waiting.store(false, std::memory_order_relaxed);
  }
  return nr;
}

// Moves every kcq's requests of domain d to the tail of khd->rqs[d].
void flush_busy_kcqs(HctxData* khd, unsigned d) {
  khd->kcq_map[d].for_each_set([&](unsigned idx) {
    CtxQueue& kcq = khd->kcqs[idx];
    kcq.lock.lock();
    khd->rqs[d].splice_tail(&kcq.rq_list[d]);
    // Busy before the bit goes, so has_work never sees neither.
    khd->rqs_busy[d].store(!khd->rqs[d].empty(), std::memory_order_relaxed);
    khd->kcq_map[d].clear(idx);
    kcq.lock.unlock();
  });
}

Request* take_first(HctxData* khd, unsigned d, int token) {
  ListNode& rqs = khd->rqs[d];
  Request* rq = rq_of(rqs.next);
  ListNode::unlink(&rq->queuelist);
  khd->rqs_busy[d].store(!rqs.empty(), std::memory_order_relaxed);
  set_rq_token(rq, token);
  khd->batching++;
  return rq;
}

Request* dispatch_cur_domain(KyberData* kqd, HctxData* khd) {
  const unsigned d = khd->cur_domain;
  if (!khd->rqs[d].empty()) {
    const int nr = get_domain_token(kqd, khd);
    return nr >= 0 ? take_first(khd, d, nr) : nullptr;
  }
  if (!khd->kcq_map[d].any()) return nullptr;
  // Token first: while the domain is throttled its requests stay in the
  // kcqs, where bios can still merge into them.
  const int nr = get_domain_token(kqd, khd);
  if (nr < 0) return nullptr;
  flush_busy_kcqs(khd, d);
  if (khd->rqs[d].empty()) {  // nothing was there after all
    kqd->tokens[d]->clear(static_cast<unsigned>(nr), base::this_cpu());
    return nullptr;
  }
  return take_first(khd, d, nr);
}

Request* dispatch_request(HwCtx* hctx) {
  KyberData* kqd = kqd_of(hctx->queue);
  HctxData* khd = khd_of(hctx);
  std::lock_guard<base::SpinLock> g(khd->lock);
  // Keep batching the current domain while it is entitled to.
  if (khd->batching < kBatchSize[khd->cur_domain])
    if (Request* rq = dispatch_cur_domain(kqd, khd)) return rq;
  // Batch over, or the domain had no requests or no tokens: start a new
  // batch with the next domain that can go, wrapping back to this one.
  khd->batching = 0;
  for (unsigned i = 0; i < kNrDomains; i++) {
    khd->cur_domain = (khd->cur_domain + 1) % kNrDomains;
    if (Request* rq = dispatch_cur_domain(kqd, khd)) return rq;
  }
  return nullptr;
}

bool has_work(HwCtx* hctx) {
  HctxData* khd = khd_of(hctx);
  for (unsigned d = 0; d < kNrDomains; d++)
    if (khd->rqs_busy[d].load(std::memory_order_relaxed) || khd->kcq_map[d].any()) return true;
  return false;
}

ElevatorType make_type() {
  ElevatorType t;
  t.name = "kyber";
  t.queue_wide = false;  // one instance of the dispatch state per hctx
  ElevatorOps& o = t.ops;
  o.init_sched = &init_sched;
  o.exit_sched = &exit_sched;
  o.init_hctx = &init_hctx;
  o.exit_hctx = &exit_hctx;
  o.depth_updated = &depth_updated;
  o.bio_merge = &bio_merge;
  o.limit_depth = &limit_depth;
  o.prepare_request = &prepare_request;
  o.finish_request = &finish_request;
  o.requeue_request = &finish_request;
  o.insert_requests = &insert_requests;
  o.dispatch_request = &dispatch_request;
  o.has_work = &has_work;
  o.completed_request = &completed_request;
  t.attrs = latency_attrs();
  return t;
}

}  // namespace

Domain op_domain(ReqOp op) {
  switch (op) {
    case ReqOp::read: return kRead;
    case ReqOp::write: return kWrite;
    case ReqOp::discard: return kDiscard;
    default: return kOther;
  }
}

unsigned domain_depth(ElevatorQueue* eq, Domain d) { return kqd_of(eq)->tokens[d]->depth(); }

unsigned domain_tokens_in_use(ElevatorQueue* eq, Domain d) {
  return kqd_of(eq)->tokens[d]->bitmap().weight();
}

}  // namespace blkmq::kyber

namespace blkmq {

KyberStats kyber_stats(Queue* q) {
  ElevatorQueue* eq = queue_elevator(q);
  KyberStats s;
  for (unsigned d = 0; d < kyber::kNrDomains; d++) {
    s.depth[d] = kyber::domain_depth(eq, kyber::Domain(d));
    s.tokens_in_use[d] = kyber::domain_tokens_in_use(eq, kyber::Domain(d));
  }
  for (unsigned d = 0; d < kyber::kOther; d++) s.target_ns[d] = kyber::latency_target(eq, kyber::Domain(d));
  return s;
}

}  // namespace blkmq

// The scheduler, listed by the table CMake generates from src/sched's
// folders; second in queue/scheduler (see deadline.cc).
BLKMQ_BUILTIN(blkmq::ElevatorType, elevator, kyber, 2, blkmq::kyber::make_type());
