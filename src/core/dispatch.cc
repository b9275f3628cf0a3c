// Running hardware queues: the dispatch paths from the hctx dispatch list,
// the scheduler and the software queues to the driver, direct issue, and the
// queue-run machinery (blk-mq-sched.c and the dispatch half of blk-mq.c).
#include <algorithm>

#include "base/clock.h"
#include "core/core.h"
#include "core/trace.h"
#include "core/time.h"

namespace blkmq {

constexpr unsigned kResourceDelayMs = 3;  // BLK_MQ_RESOURCE_DELAY
constexpr unsigned kBudgetDelayMs = 3;    // BLK_MQ_BUDGET_DELAY
constexpr int kCpuWorkBatch = 8;          // BLK_MQ_CPU_WORK_BATCH
// dispatch_busy is an EWMA of "the driver was busy": each update keeps
// (weight - 1) / weight of the old value and adds 1 << factor when busy.
constexpr unsigned kDispatchBusyEwmaWeight = 8;  // BLK_MQ_DISPATCH_BUSY_EWMA_WEIGHT
constexpr unsigned kDispatchBusyEwmaFactor = 4;  // BLK_MQ_DISPATCH_BUSY_EWMA_FACTOR
// How long one scheduler dispatch loop may run before it hands the rest to
// kblockd: blk_mq_do_dispatch_sched's HZ (one second).
constexpr uint64_t kDispatchSchedMaxNs = base::kNsPerSec;
// The last bucket of mq/<n>/dispatched (64 and more requests). The
// kernel's debugfs has BLK_MQ_MAX_DISPATCH_ORDER = 7 buckets, the last
// 32 and more; blkmq's counters (HwCtxImpl::dispatched) have one more.
constexpr unsigned kLastDispatchBucket = 7;
constexpr int kEagain = -11;

namespace {

enum class Prep : uint8_t { ok, no_tag, no_budget };

bool stopped(const HwCtxImpl* h) { return h->state.load(std::memory_order_acquire) & kHctxStopped; }

bool shared_driver_tags(const HwCtxImpl* h) {
  return h->q->set_->queue_shared_.load(std::memory_order_relaxed) || h->q->set_->shared_hctx_tags();
}

bool has_pending(HwCtxImpl* h) {
  if (h->has_dispatch.load(std::memory_order_acquire) || h->ctx_map.any()) return true;
  QueueImpl* q = h->q;
  return q->elevator_ && q->elevator_->type->ops.has_work(h);
}

int get_budget(QueueImpl* q) { return q->ops_->get_budget ? q->ops_->get_budget(q) : 0; }
void put_budget(QueueImpl* q, int token) {
  if (q->ops_->put_budget && token >= 0) q->ops_->put_budget(q, token);
}

void splice_dispatch(HwCtxImpl* h, ListNode* list, bool at_head) {
  h->lock.lock();
  if (at_head) h->dispatch.splice_head(list); else h->dispatch.splice_tail(list);
  h->has_dispatch.store(true, std::memory_order_release);
  h->lock.unlock();
}

int next_cpu(HwCtxImpl* h) {
  if (h->q->nr_hw_queues_ == 1 || h->cpus.empty()) return kWorkCpuUnbound;
  if (h->next_cpu_batch.fetch_sub(1, std::memory_order_relaxed) <= 1) {
    h->next_cpu_batch.store(kCpuWorkBatch, std::memory_order_relaxed);
    h->next_cpu.fetch_add(1, std::memory_order_relaxed);
  }
  return static_cast<int>(h->cpus[h->next_cpu.load(std::memory_order_relaxed) % h->cpus.size()]);
}

// Wake callback of hctx->dispatch_wait: a driver tag freed on a shared map.
void dispatch_wake(base::SbqWaitEntry* e) { run_hw_queue(static_cast<HwCtxImpl*>(e->data), true); }

// blk_mq_mark_tag_wait: no driver tag. Without sharing, rely on the restart
// when one of our requests frees; with sharing, wait on the tag map.
bool mark_tag_wait(HwCtxImpl* h, Request* rq) {
  if (!shared_driver_tags(h)) {
    h->state.fetch_or(kHctxSchedRestart);
    return get_driver_tag(rq);
  }
  base::SbitmapQueue& bt = h->tags->bitmap_tags;
  h->dispatch_wait_lock.lock();
  if (h->dispatch_wait.queued.load()) {  // a stale read only retries
    h->dispatch_wait_lock.unlock();
    return false;
  }
  base::SbqWaitQueue* wq = bt.wait_ptr(&h->wait_index);
  bt.add_wait(wq, &h->dispatch_wait);
  const unsigned gen = ++h->dispatch_wait_gen;
  h->dispatch_wait_lock.unlock();
  // Being on the wait queue, then retrying the tag (blk_mq_mark_tag_wait's
  // barrier, since a failed get implies none). Pairs with
  // base/sbitmap.h:SbitmapQueue::clear (a freed bit, then ws_active_):
  // either the freer sees this waiter and wakes it, or this retry sees
  // the freed bit. add_wait's own fence (base/sbitmap_queue.cc) gives the
  // same order; this one keeps the core's rule visible where it is relied on.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!get_driver_tag(rq)) return false;
  // We got a tag: take our registration back so the wake-up goes to someone
  // who needs it — unless it was woken and another dispatcher of this hctx
  // registered again meanwhile (maybe on another wait queue): that one is
  // theirs.
  h->dispatch_wait_lock.lock();
  if (h->dispatch_wait_gen == gen) bt.remove_wait(wq, &h->dispatch_wait);
  h->dispatch_wait_lock.unlock();
  return true;
}

Prep prep_dispatch_rq(Request* rq, bool need_budget) {
  QueueImpl* q = to_impl(rq->q);
  if (need_budget) {
    int token = get_budget(q);
    if (token < 0) return Prep::no_budget;
    rq->budget_token = token;
  }
  if (!get_driver_tag(rq) && !mark_tag_wait(to_impl(rq->mq_hctx), rq)) {
    if (need_budget) {
      put_budget(q, rq->budget_token);
      rq->budget_token = -1;
    }
    return Prep::no_tag;
  }
  return Prep::ok;
}

unsigned batch_bucket(unsigned n) {
  if (n == 0) return 0;
  unsigned b = 1;
  while ((1u << (b - 1)) < n && b < kLastDispatchBucket) b++;
  return b;
}

// Returns the driver's status; on a busy status the request is ready to be
// reinserted (driver tag and budget released).
BlkStatus issue_one(HwCtxImpl* h, Request* rq, bool last) {
  BlkStatus st = h->q->ops_->queue_rq(h, QueueData{rq, last});
  if (st == BlkStatus::resource || st == BlkStatus::dev_resource) {
    h->busy.inc();
    put_budget(h->q, rq->budget_token);
    rq->budget_token = -1;
    requeue_rq_internal(rq);
  }
  return st;
}

void commit(HwCtxImpl* h, unsigned queued) {
  if (queued && h->q->ops_->commit_rqs) h->q->ops_->commit_rqs(h);
}

// blk_mq_dispatch_rq_list. Returns true if the whole list went to the driver.
bool dispatch_rq_list(HwCtxImpl* h, ListNode* list, bool get_budget_each) {
  if (list->empty()) return false;
  QueueImpl* q = h->q;
  unsigned queued = 0;
  bool needs_resource = false;
  Prep prep = Prep::ok;
  BlkStatus ret = BlkStatus::ok;
  do {
    Request* rq = rq_of(list->next);
    prep = prep_dispatch_rq(rq, get_budget_each);
    if (prep != Prep::ok) break;
    ListNode::unlink(&rq->queuelist);
    ret = issue_one(to_impl(rq->mq_hctx), rq, list->empty());
    if (ret == BlkStatus::ok) {
      queued++;
    } else if (ret == BlkStatus::resource || ret == BlkStatus::dev_resource) {
      needs_resource = ret == BlkStatus::resource;
      list->push_front(&rq->queuelist);
      break;
    } else {
      end_request(rq, ret);
    }
  } while (!list->empty());
  h->dispatched[batch_bucket(queued)].inc();
  if (!list->empty() || ret != BlkStatus::ok) commit(h, queued);
  if (list->empty()) {
    dispatch_busy_update(h, false);
    return true;
  }
  if (!get_budget_each) {
    for (ListNode* n = list->next; n != list; n = n->next) {
      Request* rq = rq_of(n);
      put_budget(q, rq->budget_token);
      rq->budget_token = -1;
    }
  }
  splice_dispatch(h, list, false);
  // The requests are on hctx->dispatch before SCHED_RESTART is read
  // (blk_mq_dispatch_rq_list's smp_mb). Pairs with dispatch.cc:
  // sched_restart's fence (the bit cleared before the queue is run): either
  // this sees the bit still set and leaves the rerun to the restart, or the
  // restart's run sees these requests.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const bool needs_restart = h->state.load() & kHctxSchedRestart;
  if (prep == Prep::no_budget) needs_resource = true;
  const bool no_tag_unqueued = prep == Prep::no_tag && shared_driver_tags(h) && !h->dispatch_wait.queued.load();
  if (!needs_restart || no_tag_unqueued)
    run_hw_queue(h, true);
  else if (needs_resource)
    delay_run_hw_queue(h, kResourceDelayMs);
  dispatch_busy_update(h, true);
  return false;
}

// Dispatch a list whose requests may belong to several hctxs, one group at a
// time (the scheduler may hand out another hctx's request).
void dispatch_multi(ListNode* list) {
  while (!list->empty()) {
    HwCtxImpl* h = to_impl(rq_of(list->next)->mq_hctx);
    ListNode group;
    for (ListNode* n = list->next; n != list;) {
      ListNode* next = n->next;
      if (rq_of(n)->mq_hctx == h) {
        ListNode::unlink(n);
        group.push_back(n);
      }
      n = next;
    }
    dispatch_rq_list(h, &group, false);
  }
}

// One batch pulled from the scheduler (__blk_mq_do_dispatch_sched).
int do_dispatch_sched_once(HwCtxImpl* h) {
  QueueImpl* q = h->q;
  const ElevatorOps& e = q->elevator_->type->ops;
  const unsigned max_dispatch = h->dispatch_busy.load(std::memory_order_relaxed) ? 1 : q->nr_requests_;
  ListNode list;
  unsigned count = 0;
  bool multi = false, run_queue = false, busy = false;
  do {
    if (!e.has_work(h)) break;
    if (h->has_dispatch.load(std::memory_order_acquire)) {
      busy = true;
      break;
    }
    int token = get_budget(q);
    if (token < 0) break;
    Request* rq = e.dispatch_request(h);
    if (!rq) {
      put_budget(q, token);
      run_queue = true;
      break;
    }
    rq->budget_token = token;
    list.push_back(&rq->queuelist);
    count++;
    if (rq->mq_hctx != h) multi = true;
    // No driver tag: stop pulling; what stays in the scheduler can still merge.
    if (!get_driver_tag(rq)) break;
  } while (count < max_dispatch);

  if (!count) {
    if (run_queue) delay_run_hw_queues(q, kBudgetDelayMs);
  } else if (multi) {
    dispatch_multi(&list);
  } else {
    dispatch_rq_list(h, &list, false);
  }
  if (busy) return kEagain;
  return count ? 1 : 0;
}

int do_dispatch_sched(HwCtxImpl* h) {
  const uint64_t start = coarse_now_ns();
  int ret;
  do {
    ret = do_dispatch_sched_once(h);
    if (ret != 1) break;
    if (coarse_now_ns() - start >= kDispatchSchedMaxNs) {
      delay_run_hw_queue(h, 0);
      break;
    }
  } while (true);
  return ret;
}

// Takes the first request of the next busy ctx at or after `start`.
Request* dequeue_from_ctx(HwCtxImpl* h, unsigned start) {
  const unsigned type = static_cast<unsigned>(h->type);
  Request* found = nullptr;
  h->ctx_map.for_each_from(start, [&](unsigned bit) {
    SwCtx* ctx = h->ctxs[bit];
    ctx->lock.lock();
    ListNode& l = ctx->rq_lists[type];
    if (!l.empty()) {
      found = rq_of(l.next);
      ListNode::unlink(&found->queuelist);
    }
    if (l.empty()) h->ctx_map.clear(bit);
    ctx->lock.unlock();
    return found == nullptr;
  });
  return found;
}

// Round-robin one request at a time over the busy ctxs (dispatch_busy).
int do_dispatch_ctx(HwCtxImpl* h) {
  QueueImpl* q = h->q;
  unsigned from = h->dispatch_from.load(std::memory_order_relaxed);
  int ret = 0;
  ListNode list;
  do {
    if (h->has_dispatch.load(std::memory_order_acquire)) {
      ret = kEagain;
      break;
    }
    if (!h->ctx_map.any()) break;
    int token = get_budget(q);
    if (token < 0) break;
    Request* rq = dequeue_from_ctx(h, from);
    if (!rq) {
      put_budget(q, token);
      delay_run_hw_queues(q, kBudgetDelayMs);
      break;
    }
    rq->budget_token = token;
    list.push_back(&rq->queuelist);
    from = (rq->mq_ctx->index_hw[static_cast<unsigned>(h->type)] + 1) % std::max(1u, h->ctx_map.size());
  } while (dispatch_rq_list(h, &list, false));
  h->dispatch_from.store(from, std::memory_order_relaxed);
  return ret;
}

void flush_busy_ctxs(HwCtxImpl* h, ListNode* list) {
  const unsigned type = static_cast<unsigned>(h->type);
  h->ctx_map.for_each_from(0, [&](unsigned bit) {
    SwCtx* ctx = h->ctxs[bit];
    ctx->lock.lock();
    list->splice_tail(&ctx->rq_lists[type]);
    h->ctx_map.clear(bit);
    ctx->lock.unlock();
    return true;
  });
}

int sched_dispatch_once(HwCtxImpl* h) {
  ListNode list;
  bool need_dispatch;
  if (h->has_dispatch.load(std::memory_order_acquire)) {
    h->lock.lock();
    list.splice_tail(&h->dispatch);
    h->has_dispatch.store(false, std::memory_order_release);
    h->lock.unlock();
  }
  if (!list.empty()) {
    h->state.fetch_or(kHctxSchedRestart);
    if (!dispatch_rq_list(h, &list, true)) return 0;
    need_dispatch = true;
  } else {
    need_dispatch = h->dispatch_busy.load(std::memory_order_relaxed) != 0;
  }
  if (h->q->elevator_) return do_dispatch_sched(h);
  if (need_dispatch) return do_dispatch_ctx(h);
  flush_busy_ctxs(h, &list);
  dispatch_rq_list(h, &list, true);
  return 0;
}

void sched_dispatch_requests(HwCtxImpl* h) {
  if (stopped(h) || h->q->quiesced()) return;
  h->runs.inc();
  if (sched_dispatch_once(h) == kEagain && sched_dispatch_once(h) == kEagain) run_hw_queue(h, true);
}

}  // namespace

void run_work_fn(Work* w) {
  auto* h = static_cast<HwCtxImpl*>(w->data);
  h->q->dispatch_enter();
  sched_dispatch_requests(h);
  h->q->dispatch_exit();
}

namespace {

bool cpu_in_hctx(const HwCtxImpl* h) {
  unsigned cpu = base::this_cpu();
  return cpu < h->cpu_mask.size() && h->cpu_mask[cpu];
}

// blk_mq_request_issue_directly for lists: budget and tag, then queue_rq.
BlkStatus request_issue_directly(Request* rq, bool last) {
  HwCtxImpl* h = to_impl(rq->mq_hctx);
  if (stopped(h) || h->q->quiesced()) {
    insert_request(rq, 0);
    return BlkStatus::ok;
  }
  int token = get_budget(h->q);
  if (token < 0) return BlkStatus::resource;
  rq->budget_token = token;
  if (!get_driver_tag(rq)) {
    put_budget(h->q, token);
    rq->budget_token = -1;
    return BlkStatus::resource;
  }
  BlkStatus st = issue_one(h, rq, last);
  dispatch_busy_update(h, st == BlkStatus::resource || st == BlkStatus::dev_resource);
  return st;
}

// Issue a plug list one by one; stops at the first busy request and leaves
// the rest on the list (blk_mq_issue_direct).
void issue_direct(RqList* rqs) {
  HwCtxImpl* h = nullptr;
  unsigned queued = 0;
  BlkStatus ret = BlkStatus::ok;
  while (Request* rq = rqs->pop_front()) {
    if (h != to_impl(rq->mq_hctx)) {
      if (h) commit(h, queued);
      queued = 0;
      h = to_impl(rq->mq_hctx);
    }
    ret = request_issue_directly(rq, rqs->empty());
    if (ret == BlkStatus::ok) {
      queued++;
    } else if (ret == BlkStatus::resource || ret == BlkStatus::dev_resource) {
      request_bypass_insert(rq, 0);
      run_hw_queue(h, false);
      break;
    } else {
      end_request(rq, ret);
    }
  }
  if (h && ret != BlkStatus::ok) commit(h, queued);
}

void dispatch_queue_requests(RqList* rqs) {
  QueueImpl* q = to_impl(rqs->head->q);
  q->dispatch_enter();
  if (!q->quiesced()) {
    if (q->ops_->queue_rqs && !q->ops_->get_budget) {
      q->ops_->queue_rqs(rqs);
      // Recount: the driver leaves what it could not take.
      unsigned n = 0;
      Request* tail = nullptr;
      for (Request* r = rqs->head; r; r = r->rq_next) { n++; tail = r; }
      rqs->count = n;
      rqs->tail = tail;
    }
    if (!rqs->empty()) issue_direct(rqs);
  }
  q->dispatch_exit();
}

// blk_mq_insert_requests: try direct issue if the hctx is not busy, else
// (and for leftovers) the software queue; then run the hctx.
void insert_requests(HwCtxImpl* h, SwCtx* ctx, ListNode* list, bool from_schedule, bool allow_direct) {
  QueueImpl* q = h->q;
  if (allow_direct && !from_schedule && !h->dispatch_busy.load(std::memory_order_relaxed)) {
    q->dispatch_enter();
    unsigned queued = 0;
    while (!list->empty()) {
      Request* rq = rq_of(list->next);
      ListNode::unlink(&rq->queuelist);
      BlkStatus st = request_issue_directly(rq, list->empty());
      if (st == BlkStatus::ok) {
        queued++;
      } else if (st == BlkStatus::resource || st == BlkStatus::dev_resource) {
        request_bypass_insert(rq, 0);
        if (list->empty()) run_hw_queue(h, false);
        break;
      } else {
        end_request(rq, st);
      }
    }
    commit(h, queued);
    q->dispatch_exit();
    if (list->empty()) return;
  }
  const unsigned type = static_cast<unsigned>(h->type);
  unsigned n = 0;
  for (ListNode* it = list->next; it != list; it = it->next) {
    trace_rq(rq_of(it), blktrace::kInsert);
    n++;
  }
  ctx->lock.lock();
  ctx->rq_lists[type].splice_tail(list);
  h->ctx_map.set(ctx->index_hw[type]);
  ctx->lock.unlock();
  h->queued.inc(n);
  run_hw_queue(h, from_schedule);
}

// blk_mq_dispatch_list: take the run of requests for the first request's
// (hctx, ctx) and insert them there.
void dispatch_list(RqList* rqs, bool from_schedule, bool allow_direct) {
  Request* first = rqs->head;
  HwCtxImpl* h = to_impl(first->mq_hctx);
  SwCtx* ctx = first->mq_ctx;
  QueueImpl* q = h->q;
  ListNode list;
  RqList rest;
  while (Request* rq = rqs->pop_front()) {
    if (rq->mq_hctx == h && rq->mq_ctx == ctx) list.push_back(&rq->queuelist);
    else rest.push_back(rq);
  }
  *rqs = rest;
  if (q->elevator_) {
    if (tracer(q))
      for (ListNode* it = list.next; it != &list; it = it->next) trace_rq(rq_of(it), blktrace::kInsert);
    // In the dispatch epoch, as submit_one's insert and run: once inserted
    // the requests may end, and `h` must outlive the run.
    q->dispatch_enter();
    q->elevator_->type->ops.insert_requests(h, &list, 0);
    run_hw_queue(h, from_schedule);
    q->dispatch_exit();
  } else {
    insert_requests(h, ctx, &list, from_schedule, allow_direct);
  }
}

}  // namespace

// Set once: a waker may still be calling func while a dispatcher queues the
// entry again, so the fields are never rewritten.
void init_dispatch_wait(HwCtxImpl* h) {
  h->dispatch_wait.func = dispatch_wake;
  h->dispatch_wait.data = h;
}

void dispatch_busy_update(HwCtxImpl* h, bool busy) {
  unsigned ewma = h->dispatch_busy.load(std::memory_order_relaxed);
  if (!ewma && !busy) return;
  ewma *= kDispatchBusyEwmaWeight - 1;
  if (busy) ewma += 1u << kDispatchBusyEwmaFactor;
  ewma /= kDispatchBusyEwmaWeight;
  h->dispatch_busy.store(ewma, std::memory_order_relaxed);
}

void requeue_rq_internal(Request* rq) {
  trace_rq(rq, blktrace::kRequeue);
  put_driver_tag(rq);
  rq_qos_requeue(to_impl(rq->q), rq);
  rq->timed_out.store(0, std::memory_order_relaxed);
  RqState expected = RqState::in_flight;
  rq->state.compare_exchange_strong(expected, RqState::idle);
}

void sched_restart(HwCtxImpl* h) {
  if (!(h->state.load(std::memory_order_relaxed) & kHctxSchedRestart)) return;
  h->state.fetch_and(~kHctxSchedRestart);
  // SCHED_RESTART cleared before the run reads hctx->dispatch
  // (__blk_mq_sched_restart's smp_mb). Pairs with dispatch.cc:
  // dispatch_rq_list's fence after splice_dispatch.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  run_hw_queue(h, true);
}

void delay_run_hw_queue(HwCtxImpl* h, unsigned msecs) {
  if (stopped(h)) return;
  h->run_work.mod(next_cpu(h), static_cast<uint64_t>(msecs) * base::kNsPerMs);
}

void run_hw_queue(HwCtxImpl* h, bool async) {
  QueueImpl* q = h->q;
  // The need-run check reads the elevator (has_work): like the kernel, do it
  // inside the dispatch epoch, so that a scheduler switch (which quiesces
  // and waits for the epoch to drain) cannot free that state under it.
  q->dispatch_enter();
  if (q->quiesced() || !has_pending(h)) {
    q->dispatch_exit();
    return;
  }
  if (async || in_interrupt() || !cpu_in_hctx(h)) {
    q->dispatch_exit();
    delay_run_hw_queue(h, 0);
    return;
  }
  sched_dispatch_requests(h);
  q->dispatch_exit();
}

void run_hw_queues_impl(QueueImpl* q, bool async) {
  HwCtxImpl* sq = nullptr;
  if (q->sq_sched_) sq = q->ctx(base::this_cpu())->hctxs[0];
  for (unsigned i = 0; i < q->nr_hw_queues_; i++) {
    HwCtxImpl* h = q->hctx(i);
    if (stopped(h)) continue;
    // A queue-wide scheduler is run once, from the local hctx, plus any hctx
    // with a non-empty dispatch list.
    if (sq && h != sq && !h->has_dispatch.load(std::memory_order_acquire)) continue;
    run_hw_queue(h, async);
  }
}

void insert_request(Request* rq, uint32_t flags) {
  HwCtxImpl* h = to_impl(rq->mq_hctx);
  QueueImpl* q = h->q;
  trace_rq(rq, blktrace::kInsert);
  if (rq->rq_flags & (kRqfFlushSeq | kRqfPassthrough)) {
    // Flushes and driver commands go to the head of hctx->dispatch: the
    // device may refuse normal I/O until such a command ran.
    request_bypass_insert(rq, kInsertAtHead);
    return;
  }
  if (q->elevator_ && (rq->rq_flags & kRqfUseSched)) {
    ListNode list;
    list.push_back(&rq->queuelist);
    q->elevator_->type->ops.insert_requests(h, &list, flags);
  } else {
    SwCtx* ctx = rq->mq_ctx;
    const unsigned type = static_cast<unsigned>(h->type);
    ctx->lock.lock();
    if (flags & kInsertAtHead) ctx->rq_lists[type].push_front(&rq->queuelist);
    else ctx->rq_lists[type].push_back(&rq->queuelist);
    h->ctx_map.set(ctx->index_hw[type]);
    ctx->lock.unlock();
  }
  h->queued.inc();
}

void request_bypass_insert(Request* rq, uint32_t flags) {
  ListNode list;
  list.push_back(&rq->queuelist);
  splice_dispatch(to_impl(rq->mq_hctx), &list, flags & kInsertAtHead);
}

void try_issue_directly(HwCtxImpl* h, Request* rq) {
  QueueImpl* q = h->q;
  // Once inserted the request may be dispatched, completed and reused by
  // another thread: read what we need from it first.
  const bool nowait = rq->cmd_flags & kBioNowait;
  if (stopped(h) || q->quiesced()) {
    insert_request(rq, 0);
    run_hw_queue(h, false);
    return;
  }
  if (rq->rq_flags & kRqfUseSched) {
    insert_request(rq, 0);
    run_hw_queue(h, nowait);
    return;
  }
  int token = get_budget(q);
  if (token < 0) {
    insert_request(rq, 0);
    run_hw_queue(h, nowait);
    return;
  }
  rq->budget_token = token;
  if (!get_driver_tag(rq)) {
    put_budget(q, token);
    rq->budget_token = -1;
    insert_request(rq, 0);
    run_hw_queue(h, nowait);
    return;
  }
  BlkStatus st = issue_one(h, rq, true);
  if (st == BlkStatus::ok) {
    dispatch_busy_update(h, false);
  } else if (st == BlkStatus::resource || st == BlkStatus::dev_resource) {
    dispatch_busy_update(h, true);
    request_bypass_insert(rq, 0);
    run_hw_queue(h, false);
  } else {
    dispatch_busy_update(h, false);
    end_request(rq, st);
  }
}

// The dispatch half of blk_mq_flush_plug_list.
void issue_list_from_plug(RqList* rqs, bool from_schedule, bool has_elevator, bool multiple_queues) {
  if (!has_elevator && !from_schedule) {
    QueueImpl* q = to_impl(rqs->head->q);
    const bool legacy_noshed = (q->set_->cfg().flags & kTagSetNoSched) && q->nr_hw_queues_ == 1 &&
                               !q->tun_.plug_direct_issue.load(std::memory_order_relaxed);
    if (!legacy_noshed) {
      if (!multiple_queues) {
        dispatch_queue_requests(rqs);
      } else {
        // Split per queue, dispatch each part, keep what each left over.
        RqList all = *rqs, leftovers;
        rqs->clear();
        while (!all.empty()) {
          QueueImpl* cur = to_impl(all.head->q);
          RqList mine, rest;
          while (Request* rq = all.pop_front()) (to_impl(rq->q) == cur ? mine : rest).push_back(rq);
          dispatch_queue_requests(&mine);
          while (Request* rq = mine.pop_front()) leftovers.push_back(rq);
          all = rest;
        }
        *rqs = leftovers;
      }
      if (rqs->empty()) return;
    }
  }
  // The pre-seed-001 path (plug_direct_issue=0 on a no-scheduler single
  // queue) goes through the software queue and a queue run, no direct try.
  const bool allow_direct = !((to_impl(rqs->head->q)->set_->cfg().flags & kTagSetNoSched) &&
                              !to_impl(rqs->head->q)->tun_.plug_direct_issue.load(std::memory_order_relaxed));
  while (!rqs->empty()) dispatch_list(rqs, from_schedule, allow_direct);
}

void run_hw_queues(Queue* q, bool async) { run_hw_queues_impl(to_impl(q), async); }

void delay_run_hw_queues(Queue* q, unsigned msecs) {
  QueueImpl* qi = to_impl(q);
  for (unsigned i = 0; i < qi->nr_hw_queues_; i++) {
    HwCtxImpl* h = qi->hctx(i);
    if (stopped(h)) continue;
    // Leave an already pending run alone (blk_mq_delay_run_hw_queues).
    if (h->run_work.work.pending.load(std::memory_order_acquire)) continue;
    delay_run_hw_queue(h, msecs);
  }
}

void stop_hw_queue(HwCtx* hctx) { to_impl(hctx)->state.fetch_or(kHctxStopped); }

void start_hw_queue(HwCtx* hctx) {
  to_impl(hctx)->state.fetch_and(~kHctxStopped);
  run_hw_queue(to_impl(hctx), false);
}

void stop_hw_queues(Queue* q) {
  QueueImpl* qi = to_impl(q);
  for (unsigned i = 0; i < qi->nr_hw_queues_; i++) stop_hw_queue(qi->hctx(i));
}

void start_stopped_hw_queues(Queue* q, bool async) {
  QueueImpl* qi = to_impl(q);
  for (unsigned i = 0; i < qi->nr_hw_queues_; i++) {
    HwCtxImpl* h = qi->hctx(i);
    if (!(h->state.fetch_and(~kHctxStopped) & kHctxStopped)) continue;
    run_hw_queue(h, async);
  }
}

bool hctx_stopped(const HwCtx* hctx) { return stopped(static_cast<const HwCtxImpl*>(hctx)); }

}  // namespace blkmq
