// bfq's request path and elevator hooks (block/bfq-iosched.c): per-queue
// FIFOs and sector-sorted trees, the choice of the next request with the
// back-seek rules, queue selection with idling and injection, completion
// accounting, the idle timer, merging through the core's helpers, depth
// limits, and seed 003's insert_lists exactly as mq-deadline offers them:
//   locked: insert_requests takes the main lock (the current kernel).
//   split:  insert_requests try_locks the main lock; only when it is
//           contended are the requests parked on at_head/at_tail under the
//           light insert lock. Whoever takes the main lock next (dispatch,
//           bio_merge, an insert) moves them in first, so merges still see
//           every inserted request (see deadline.cc for the history).
#include "base/registry.h"
#include "blkmq/driver/driver.h"
#include "sched/bfq/bfq.h"
#include "sched/bfq/bfq_impl.h"
#include "sched/bfq/bfq_queue.h"

namespace blkmq {
namespace bfq {
namespace {

unsigned sync_idx(const Request* rq) { return rq_is_sync(rq) ? 1 : 0; }

bool bio_is_sync(const Bio* bio) {
  return bio->op == ReqOp::read || (bio->flags & (kBioSync | kBioFua | kBioPreflush));
}

// bfq_choose_req (from CFQ): the request closer to the head, a backward
// seek within back_seek_max counting back_seek_penalty times its distance.
Request* choose_req(const BfqData* bfqd, Request* r1, Request* r2, uint64_t last) {
  if (!r1 || r1 == r2) return r2;
  if (!r2) return r1;
  if (rq_is_sync(r1) != rq_is_sync(r2)) return rq_is_sync(r1) ? r1 : r2;
  const uint64_t back_max = bfqd->tun.back_max_kib * 2;
  const uint64_t s1 = r1->sector, s2 = r2->sector;
  uint64_t d1 = 0, d2 = 0;
  bool wrap1 = false, wrap2 = false;
  if (s1 >= last) d1 = s1 - last;
  else if (s1 + back_max >= last) d1 = (last - s1) * bfqd->tun.back_penalty;
  else wrap1 = true;
  if (s2 >= last) d2 = s2 - last;
  else if (s2 + back_max >= last) d2 = (last - s2) * bfqd->tun.back_penalty;
  else wrap2 = true;
  if (!wrap1 && !wrap2) {
    if (d1 != d2) return d1 < d2 ? r1 : r2;
    return s1 >= s2 ? r1 : r2;
  }
  if (wrap1 != wrap2) return wrap1 ? r2 : r1;
  // Both behind the head beyond back_seek_max: start with the furthest
  // back, so only one backward seek is needed.
  return s1 <= s2 ? r1 : r2;
}

// The next request of a queue: the FIFO head if it expired (checked once
// per service slot, as bfq_check_fifo does), else the better of the
// neighbours of the head position.
Request* peek_next(BfqData* bfqd, BfqQueue* q, uint64_t now) {
  if (q->sort.empty()) return nullptr;
  if (q->next_rq) return q->next_rq;
  if (!q->fifo_checked && !q->fifo.empty()) {
    q->fifo_checked = true;
    Request* head = rq_of(q->fifo.next);
    if (now >= head->fifo_time) return q->next_rq = head;
  }
  Request* after = q->sort.lower_bound(bfqd->last_position);
  Request* before = after ? SortTree::prev(after) : q->sort.before(bfqd->last_position);
  Request* rq = choose_req(bfqd, after, before, bfqd->last_position);
  return q->next_rq = rq ? rq : q->sort.first();
}

// bfq_remove_request: off the tree, the FIFO and the hash. A queue that
// empties and is not in service stops being busy.
void remove_request(BfqData* bfqd, Request* rq, uint64_t now) {
  elv_rqhash_del(bfqd->eq, rq);
  if (bfqd->eq->last_merge == rq) bfqd->eq->last_merge = nullptr;
  const RqWhere w = where_of(rq);
  if (w == kNowhere || w == kInDriver) return;
  ListNode::unlink(&rq->queuelist);
  bfqd->nr_queued.fetch_sub(1, std::memory_order_relaxed);
  set_where(rq, kNowhere);
  if (w != kSorted) return;
  BfqQueue* q = rq_bfqq(rq);
  q->sort.erase(rq);
  q->queued[sync_idx(rq)]--;
  q->next_rq = nullptr;
  if (q->sort.empty() && q->busy && q != bfqd->in_service) {
    del_busy(bfqd, q, false, now);
    // Emptied out of service: its budget and service say nothing about a
    // slot of its own (bfq_remove_request resets both).
    q->budget = q->service = 0;
  }
}

// The injection part of bfq_add_request, for a context with no other
// request: every second the limit is probed anew, and when the in-service
// queue gets a request with the driver empty (or after an injection), the
// next request it dispatches is the one whose completion time is measured.
void probe_injection(BfqData* bfqd, BfqQueue* q, uint64_t now) {
  if (now >= q->decrease_time + kInjectResetNs) reset_inject_limit(bfqd, q, now);
  if (q != bfqd->in_service || now < q->decrease_time + 10 * kMs) return;
  if (bfqd->rq_in_driver == 0 || (q->last_serv_time_ns > 0 && bfqd->rqs_injected)) {
    bfqd->last_empty_occupied = now;
    bfqd->wait_dispatch = true;
    if (bfqd->rq_in_driver == 0) bfqd->rqs_injected = false;
  }
}

// __bfq_insert_request + bfq_rq_enqueued.
void add_request(BfqData* bfqd, BfqQueue* q, Request* rq, uint64_t arrival, uint64_t now) {
  if (q->sync && q->refs <= 1) probe_injection(bfqd, q, now);
  update_thinktime(bfqd, q, now);
  update_seek(bfqd, q, rq);
  if (q->sync) update_io_intensity(q, now);
  rq->fifo_time = arrival + bfqd->tun.fifo_expire_ns[sync_idx(rq)];
  q->fifo.push_back(&rq->queuelist);
  q->sort.insert(rq);
  q->queued[sync_idx(rq)]++;
  q->next_rq = nullptr;
  set_where(rq, kSorted);
  bfqd->nr_queued.fetch_add(1, std::memory_order_relaxed);
  if (rq_mergeable(rq)) {
    elv_rqhash_add(bfqd->eq, rq);
    if (!bfqd->eq->last_merge) bfqd->eq->last_merge = rq;
  }
  if (!q->busy) {
    if (add_busy(bfqd, q, rq, now)) expire(bfqd, bfqd->in_service, Expire::preempted, now);
    return;
  }
  if (q == bfqd->in_service && q->wait_request) {
    // A small request while idling boosts throughput: keep waiting for
    // more, unless the budget has timed out.
    const bool small = q->queued[sync_idx(rq)] == 1 && (rq->data_len >> kSectorShift) < 32;
    const bool timed_out = budget_timed_out(q, now);
    if (small && idling_boosts_thr_without_issues(bfqd, q) && !timed_out) return;
    q->wait_request = false;
    bfqd->idle_deadline = 0;
    if (timed_out) expire(bfqd, q, Expire::budget_timeout, now);
  }
}

// A queue of sd's subtree whose next request may be injected, in the
// order of the trees (classes, then finish time; a group's queues where
// the group stands), or nullptr.
BfqQueue* injectable_in(BfqData* bfqd, SchedData* sd, bool always_inject, uint64_t now) {
  for (ServiceTree& st : sd->st) {
    for (BfqEntity* e = st.active.first(); e; e = ActiveTree::next(e)) {
      if (e->my_sd) {
        if (BfqQueue* q = injectable_in(bfqd, e->my_sd, always_inject, now)) return q;
        continue;
      }
      BfqQueue* q = static_cast<BfqQueue*>(e);
      if (q->sort.empty() || !(always_inject || q->wr_coeff > 1)) continue;
      Request* next = peek_next(bfqd, q, now);
      if (serv_to_charge(next, q) > budget_left(q)) continue;
      // Only one large request at a time on a non-rotational device.
      if (!bfqd->rotational && (next->data_len >> kSectorShift) >= kSectThrNonrot && bfqd->rq_in_driver >= 1)
        continue;
      return q;
    }
  }
  return nullptr;
}

// bfq_choose_bfqq_for_injection: a queue whose next request fits its
// budget may be served while the in-service queue is plugged, within the
// in-service queue's inject_limit of requests in the driver.
BfqQueue* choose_for_injection(BfqData* bfqd, BfqQueue* in_serv, uint64_t now) {
  unsigned limit = in_serv->inject_limit;
  const bool always_inject = in_serv->wr_coeff == 1 || !in_serv->short_ttime;
  if (limit == 0 && in_serv->last_serv_time_ns == 0 && in_serv->wait_request &&
      now >= bfqd->last_idling_start + bfqd->tun.slice_idle_ns && !asymmetric_scenario(bfqd, in_serv))
    limit = 1;
  if (bfqd->rq_in_driver >= limit) return nullptr;
  BfqQueue* q = injectable_in(bfqd, &bfqd->root.own, always_inject, now);
  if (q) bfqd->rqs_injected = true;
  return q;
}

// bfq_select_queue: keep serving the in-service queue, idle for it, inject
// another while it is plugged, or expire it and pick the next.
BfqQueue* select_queue(BfqData* bfqd, uint64_t now) {
  BfqQueue* q = bfqd->in_service;
  if (q && may_expire_for_budget_timeout(q, now) && !(q->sort.empty() && better_to_idle(bfqd, q))) {
    expire(bfqd, q, Expire::budget_timeout, now);
    q = nullptr;
  }
  // Each pass returns, or expires the queue it looked at; an expired queue
  // is either off the trees (no requests) or fits its next request in the
  // fresh slot it gets when picked again, so this ends.
  bool fresh = false;
  for (;;) {
    if (!q) {
      q = set_in_service(bfqd, now);
      if (!q) return nullptr;
      fresh = true;
    }
    if (!q->sort.empty()) {
      const uint64_t need = serv_to_charge(peek_next(bfqd, q, now), q);
      if (need <= budget_left(q) || fresh) {
        if (need > budget_left(q)) q->budget = q->service + need;  // a new slot always fits one request
        if (q->wait_request) {
          q->wait_request = false;
          bfqd->idle_deadline = 0;
        }
        return q;
      }
      expire(bfqd, q, Expire::budget_exhausted, now);
      q = nullptr;
      continue;
    }
    // No requests (a preempted queue may be picked again without any):
    // idle for it, injecting others, or let it go.
    if (q->wait_request || (q->dispatched != 0 && better_to_idle(bfqd, q))) {
      if (!idling_boosts_thr_without_issues(bfqd, q) &&
          (q->wr_coeff == 1 || bfqd->wr_busy_queues > 1 || !q->short_ttime))
        return choose_for_injection(bfqd, q, now);
      return nullptr;
    }
    expire(bfqd, q, Expire::no_more_requests, now);
    q = nullptr;
  }
}

void start_in_driver(BfqData* bfqd, Request* rq, BfqQueue* q) {
  set_where(rq, kInDriver);
  rq->rq_flags |= kRqfStarted;
  bfqd->rq_in_driver++;
  bfqd->stats.dispatched++;
  if (q) q->dispatched++;
}

// bfq_dispatch_rq_from_bfqq.
Request* dispatch_from_queue(BfqData* bfqd, BfqQueue* q, uint64_t now) {
  Request* rq = peek_next(bfqd, q, now);
  const uint64_t charge = serv_to_charge(rq, q);
  update_wr_data(bfqd, q, charge, now);
  if (q->wr_coeff == 1) q->service_from_backlogged += charge;
  entity_served(bfqd, q, charge);
  if (q == bfqd->in_service && bfqd->wait_dispatch) {  // the injection probe's request
    bfqd->wait_dispatch = false;
    bfqd->waited_rq = rq;
  }
  // Counted as dispatched before it leaves the queue (bfq_dispatch_remove):
  // a queue that this empties while not in service (an injection) then
  // leaves the busy set with a request in the driver and keeps its weight
  // counted; otherwise it dropped out of the weights and, busy again
  // before that request completed, stayed out, so two queues of different
  // weights looked alike and preempted each other by turns.
  q->dispatched++;
  peak_rate_on_dispatch(bfqd, rq, now);
  remove_request(bfqd, rq, now);
  start_in_driver(bfqd, rq, nullptr);
  bfqd->last_position = rq->end_sector();
  q->sectors_dispatched += rq->data_len >> kSectorShift;
  if (q != bfqd->in_service) bfqd->stats.injected++;
  // An idle-class queue gives way as soon as others wait.
  else if (bfqd->tot_busy() > 1 && q->cls == kIdle) expire(bfqd, q, Expire::budget_exhausted, now);
  return rq;
}

Request* dispatch_locked(BfqData* bfqd, uint64_t now) {
  if (!bfqd->dispatch.empty()) {
    Request* rq = rq_of(bfqd->dispatch.next);
    ListNode::unlink(&rq->queuelist);
    bfqd->nr_queued.fetch_sub(1, std::memory_order_relaxed);
    start_in_driver(bfqd, rq, rq_bfqq(rq));
    return rq;
  }
  if (bfqd->tot_busy() == 0) return nullptr;
  if (bfqd->tun.strict_guarantees && bfqd->rq_in_driver > 0) return nullptr;
  BfqQueue* q = select_queue(bfqd, now);
  return q ? dispatch_from_queue(bfqd, q, now) : nullptr;
}

// bfq_insert_request. `arrival` is when the request reached the scheduler.
void insert_one(BfqData* bfqd, Request* rq, bool at_head, uint64_t arrival, uint64_t now, ListNode* free) {
  BfqQueue* q = rq_bfqq(rq);
  if (!q && rq->ioc) {
    q = get_queue(bfqd, rq->ioc, rq_is_sync(rq), rq_group(rq), now);
    rq->elv_priv[0] = q;
    q->refs++;
  }
  bfqd->stats.inserted++;
  if (sched_try_insert_merge(bfqd->q, rq, free)) return;
  if (at_head || !q) {
    if (at_head) bfqd->dispatch.push_front(&rq->queuelist);
    else bfqd->dispatch.push_back(&rq->queuelist);
    set_where(rq, kOnDispatch);
    bfqd->nr_queued.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  add_request(bfqd, q, rq, arrival, now);
}

// Moves parked requests in, at-head ones first. Main lock held.
void drain_pending_locked(BfqData* bfqd, uint64_t now, ListNode* free) {
  bfqd->ins.drain([&](Request* rq, bool at_head, uint64_t arrival) {
    insert_one(bfqd, rq, at_head, arrival, now, free);
  });
}

// ---- elevator hooks ----

void bfq_insert_requests(HwCtx* hctx, ListNode* list, uint32_t flags) {
  BfqData* bfqd = bfqd_of(hctx->queue);
  const bool at_head = flags & kInsertAtHead;
  const uint64_t now = now_ns(bfqd);
  if (!bfqd->ins.lock_or_park(bfqd->lock, list, at_head, now)) return;
  ListNode free;
  drain_pending_locked(bfqd, now, &free);
  while (!list->empty()) {
    Request* rq = rq_of(list->next);
    ListNode::unlink(&rq->queuelist);
    insert_one(bfqd, rq, at_head, now, now, &free);
  }
  bfqd->lock.unlock();
  free_requests(&free);
}

Request* bfq_dispatch_request(HwCtx* hctx) {
  BfqData* bfqd = bfqd_of(hctx->queue);
  const uint64_t now = now_ns(bfqd);
  ListNode free;
  bfqd->lock.lock();
  drain_pending_locked(bfqd, now, &free);
  Request* rq = dispatch_locked(bfqd, now);
  // Inline, as it always was: the check is most of a dispatch's sweeps.
  if (now >= bfqd->last_sweep + kSweepIntervalNs) [[unlikely]] sweep(bfqd, now, false);
  bfqd->lock.unlock();
  free_requests(&free);
  return rq;
}

bool bfq_has_work(HwCtx* hctx) {
  BfqData* bfqd = bfqd_of(hctx->queue);
  if (bfqd->hold.load(std::memory_order_relaxed)) return false;
  return bfqd->nr_queued.load(std::memory_order_relaxed) > 0 || bfqd->ins.pending();
}

bool bfq_bio_merge(Queue* q, Bio* bio, unsigned nr_segs) {
  BfqData* bfqd = bfqd_of(q);
  ListNode free;
  Request* absorbed = nullptr;
  bfqd->lock.lock();
  drain_pending_locked(bfqd, now_ns(bfqd), &free);
  const bool merged = sched_try_merge(q, bio, nr_segs, &absorbed);
  bfqd->lock.unlock();
  if (absorbed) free.push_back(&absorbed->queuelist);
  free_requests(&free);
  return merged;
}

// A bio may only join a request of the queue it would go to
// (bfq_allow_bio_merge): same context, same sync-ness, same group. On
// one queue the same group means the same charge (blkg), or none for both.
bool bfq_allow_merge(Queue*, Request* rq, const Bio* bio) {
  const IoContext* ioc = bio->ioc ? bio->ioc : current_io_context();
  return rq->ioc == ioc && rq_is_sync(rq) == bio_is_sync(bio) && rq->bio->blkg == bio->blkg;
}

// Front-merge lookup in the bio's own queue. Main lock held.
ElvMerge bfq_request_merge(Queue* q, Request** rq, const Bio* bio) {
  BfqData* bfqd = bfqd_of(q);
  const IoContext* ioc = bio->ioc ? bio->ioc : current_io_context();
  // A context that moved group meanwhile finds its old queue; the
  // core's allow_merge check then refuses the merge.
  const bool sync = bio_is_sync(bio);
  BfqQueue* bq = find_queue(bfqd, ioc, sync, sync ? nullptr : bio_group(bio));  // sync: one queue per context
  if (!bq) return ElvMerge::none;
  const uint64_t end = bio->end_sector();
  Request* found = bq->sort.lower_bound(end);
  if (!found || found->sector != end) return ElvMerge::none;
  *rq = found;
  return ElvMerge::front;
}

void bfq_request_merged(Queue*, Request* rq, ElvMerge type) {
  if (type != ElvMerge::front || where_of(rq) != kSorted) return;
  BfqQueue* q = rq_bfqq(rq);
  q->sort.erase(rq);
  q->sort.insert(rq);
  q->next_rq = nullptr;
}

void bfq_requests_merged(Queue* q, Request* rq, Request* next) {
  BfqData* bfqd = bfqd_of(q);
  // The survivor takes the older FIFO position and deadline.
  if (where_of(rq) == kSorted && where_of(next) == kSorted && rq_bfqq(rq) == rq_bfqq(next) &&
      next->fifo_time < rq->fifo_time) {
    ListNode::unlink(&rq->queuelist);
    next->queuelist.push_front(&rq->queuelist);
    rq->fifo_time = next->fifo_time;
  }
  remove_request(bfqd, next, now_ns(bfqd));
}

Request* neighbour(Request* rq, bool after) {
  if (where_of(rq) != kSorted) return nullptr;
  return after ? SortTree::next(rq) : SortTree::prev(rq);
}
Request* bfq_former_request(Queue*, Request* rq) { return neighbour(rq, false); }
Request* bfq_next_request(Queue*, Request* rq) { return neighbour(rq, true); }

void bfq_prepare_request(Request* rq) { rq->elv_priv[0] = rq->elv_priv[1] = rq->elv_priv[2] = nullptr; }

// bfq_completed_request for a request the driver had. Returns true if the
// hw queues should run (the in-service queue was expired, or the driver
// went idle with work queued).
bool completed_locked(BfqData* bfqd, Request* rq, BfqQueue* q, uint64_t now) {
  if (q && rq == bfqd->waited_rq) {
    const uint64_t tot = now > bfqd->last_empty_occupied ? now - bfqd->last_empty_occupied : 0;
    update_inject_limit(bfqd, q, tot, bfqd->rq_in_driver == 1, now);
  }
  update_hw_tag(bfqd);
  bfqd->rq_in_driver--;
  peak_rate_on_completion(bfqd, now);
  bool kick = false;
  if (q) {
    q->dispatched--;
    if (!q->dispatched && !q->busy) weights_remove(bfqd, q);
    q->last_end_request = now;
    if (q->softrt_update && q->dispatched == 0 && q->sort.empty())
      q->soft_rt_next_start = softrt_next_start(bfqd, q, now);
    if (q == bfqd->in_service) {
      if (q->sort.empty() && better_to_idle(bfqd, q)) {
        if (q->dispatched == 0 && !q->wait_request) arm_slice_timer(bfqd, q, now);
      } else if (may_expire_for_budget_timeout(q, now)) {
        expire(bfqd, q, Expire::budget_timeout, now);
        kick = true;
      } else if (q->sort.empty() && (q->dispatched == 0 || !better_to_idle(bfqd, q))) {
        expire(bfqd, q, Expire::no_more_requests, now);
        kick = true;
      }
    }
  }
  if (bfqd->rq_in_driver == 0 && bfqd->nr_queued.load(std::memory_order_relaxed) > 0) kick = true;
  return kick;
}

void bfq_finish_request(Request* rq) {
  const RqWhere w = where_of(rq);
  BfqQueue* q = rq_bfqq(rq);
  if (w != kInDriver && !q) return;
  BfqData* bfqd = bfqd_of(rq->q);
  const uint64_t now = now_ns(bfqd);
  bfqd->lock.lock();
  const bool kick = w == kInDriver && completed_locked(bfqd, rq, q, now);
  set_where(rq, kNowhere);
  if (q) {
    rq->elv_priv[0] = nullptr;
    q->refs--;
    put_queue_if_idle(bfqd, q, now);
  }
  bfqd->lock.unlock();
  if (kick) run_hw_queues(bfqd->q, true);
}

// A dispatched request comes back: it leaves the driver's count but stays
// attached to its queue; it is inserted again at the head.
void bfq_requeue_request(Request* rq) {
  if (where_of(rq) != kInDriver) return;
  BfqData* bfqd = bfqd_of(rq->q);
  bfqd->lock.lock();
  bfqd->rq_in_driver--;
  if (BfqQueue* q = rq_bfqq(rq)) {
    q->dispatched--;
    if (!q->dispatched && !q->busy) weights_remove(bfqd, q);
  }
  set_where(rq, kNowhere);
  rq->rq_flags &= ~kRqfStarted;
  bfqd->lock.unlock();
}

// Word depths as the kernel derives them (bfq_update_depths, bare there):
// async I/O may use half of the scheduler tags, sync writes three
// quarters; while a queue is weight raised, about 18 % and 37 %, so
// raised sync reads find tags. The kernel's are 3/16 (18.75 %) and 6/16
// (37.5 %) of the depth.
constexpr unsigned kAsyncDepthPct = 50;
constexpr unsigned kSyncWriteDepthPct = 75;
constexpr unsigned kWrAsyncDepthPct = 18;
constexpr unsigned kWrSyncWriteDepthPct = 37;

unsigned depth_for(Queue* q, bool sync_write, bool wr) {
  const unsigned nr = queue_nr_requests(q);
  const unsigned pct = sync_write ? (wr ? kWrSyncWriteDepthPct : kSyncWriteDepthPct)
                                  : (wr ? kWrAsyncDepthPct : kAsyncDepthPct);
  const unsigned d = nr * pct / 100;
  return d ? d : 1;
}

void bfq_limit_depth(Queue* q, ReqOp op, uint32_t flags, AllocLimit* lim) {
  if (op == ReqOp::read) return;
  const bool sync = flags & (kBioSync | kBioFua | kBioPreflush);
  BfqData* bfqd = bfqd_of(q);
  // A lockless read of a hint, as the kernel's is.
  const bool wr = bfqd->wr_busy_queues.load(std::memory_order_relaxed) > 0;
  lim->shallow_depth = depth_for(q, sync, wr);
}

void bfq_depth_updated(Queue* q) { set_min_shallow_depth(q, depth_for(q, false, true)); }

void idle_timer_fn(BfqData* bfqd);

Status bfq_init_sched(Queue* q, ElevatorQueue* eq) {
  auto* bfqd = new BfqData(q, eq);
  bfqd->idle_timer.init(&q->runtime().timers(), [bfqd] { idle_timer_fn(bfqd); });
  eq->elevator_data = bfqd;
  set_queue_async_depth(q, queue_nr_requests(q) * 3 / 4);
  bfq_depth_updated(q);
  return Status::OK();
}

void bfq_exit_sched(ElevatorQueue* eq) {
  BfqData* bfqd = bfqd_of(eq);
  bfqd->idle_timer.cancel_sync();  // frozen: nothing re-arms it now
  delete bfqd;
  eq->elevator_data = nullptr;
}

// The idle timer's work (bfq_idle_slice_timer_body).
void idle_timer_fn(BfqData* bfqd) {
  bfqd->lock.lock();
  const uint64_t now = now_ns(bfqd);
  if (!bfqd->idle_deadline || now < bfqd->idle_deadline) {
    // The timer thread may run us a little before our clock reaches the
    // deadline: wait for the rest, or the queue would stay plugged until
    // some completion happened to look at it. (The timer and the queue
    // read one clock, the runtime's, so this is rare and never loops.)
    if (bfqd->idle_deadline) bfqd->idle_timer.arm_after(bfqd->idle_deadline - now);
    bfqd->lock.unlock();
    return;
  }
  bfqd->idle_deadline = 0;
  BfqQueue* q = bfqd->in_service;
  if (q && q->wait_request) {
    q->wait_request = false;
    if (budget_timed_out(q, now)) expire(bfqd, q, Expire::budget_timeout, now, /*compensate=*/true);
    else if (q->sort.empty()) expire(bfqd, q, Expire::too_idle, now, /*compensate=*/true);
  }
  bfqd->lock.unlock();
  run_hw_queues(bfqd->q, true);
}

ElevatorType make_type() {
  ElevatorType t;
  t.name = "bfq";
  t.queue_wide = true;
  t.disable_wbt = true;  // bfq_init_queue's wbt_disable_default
  ElevatorOps& o = t.ops;
  o.init_sched = bfq_init_sched;
  o.exit_sched = bfq_exit_sched;
  o.depth_updated = bfq_depth_updated;
  o.allow_merge = bfq_allow_merge;
  o.bio_merge = bfq_bio_merge;
  o.request_merge = bfq_request_merge;
  o.request_merged = bfq_request_merged;
  o.requests_merged = bfq_requests_merged;
  o.limit_depth = bfq_limit_depth;
  o.prepare_request = bfq_prepare_request;
  o.finish_request = bfq_finish_request;
  o.requeue_request = bfq_requeue_request;
  o.insert_requests = bfq_insert_requests;
  o.dispatch_request = bfq_dispatch_request;
  o.has_work = bfq_has_work;
  o.former_request = bfq_former_request;
  o.next_request = bfq_next_request;
  t.attrs = bfq_attrs();
  t.group_attrs = bfq_group_attrs();
  return t;
}

BfqData* instance(Queue* q) {
  ElevatorQueue* eq = queue_elevator(q);
  return eq && eq->type->name == "bfq" ? bfqd_of(eq) : nullptr;
}

}  // namespace

BfqData::BfqData(Queue* queue, ElevatorQueue* elv)
    : q(queue), eq(elv) {
  dispatch.init();
  rotational = queue_rotational(queue);
  init_peak_rate(this);
  const uint64_t now = queue->now_ns();
  root.own.class_idle_last_service = now;
  root.linked = true;  // never unlinked: its queues age out as before
  last_sweep = now;
}

BfqData::~BfqData() {
  for (auto& [k, q] : queues) delete q;
  queues.clear();
  free_all_groups(this);
}

}  // namespace bfq

BfqQueueInfo bfq_queue_info(Queue* q, const IoContext* ioc, bool sync) {
  BfqQueueInfo i;
  bfq::BfqData* bfqd = bfq::instance(q);
  if (!bfqd) return i;
  bfqd->lock.lock();
  IoGroup* g = io_context_group(ioc);
  if (g == io_group_root()) g = nullptr;
  if (bfq::BfqQueue* bq = bfq::find_queue(bfqd, ioc, sync, g)) {
    i.found = true;
    i.busy = bq->busy;
    i.in_service = bq == bfqd->in_service;
    i.wait_request = bq->wait_request;
    i.ioprio_class = bq->cls + 1;
    i.orig_weight = bq->orig_weight;
    i.weight = bq->weight;
    i.wr_coeff = bq->wr_coeff;
    i.budget = bq->budget;
    i.max_budget = bq->max_budget;
    i.service = bq->service;
    i.queued = bq->queued[0] + bq->queued[1];
    i.dispatched = bq->dispatched;
    i.inject_limit = bq->inject_limit;
    i.in_weights = bq->in_weights;
    i.last_charge = bq->last_charge;
    i.io_bound = bq->io_bound;
    i.sectors_dispatched = bq->sectors_dispatched;
  }
  bfqd->lock.unlock();
  return i;
}

BfqStats bfq_stats(Queue* q) {
  BfqStats s;
  bfq::BfqData* bfqd = bfq::instance(q);
  if (!bfqd) return s;
  bfqd->lock.lock();
  s = bfqd->stats;
  s.in_service_ioc = bfqd->in_service && bfqd->in_service->sync ? bfqd->in_service->key.ioc_id : 0;
  s.hw_tag = bfqd->hw_tag;
  s.rq_in_driver = bfqd->rq_in_driver;
  s.peak_rate = bfqd->pr.rate;
  s.max_budget = bfqd->max_budget();
  bfqd->lock.unlock();
  s.deferred_inserts = bfqd->ins.deferred_inserts();
  return s;
}

void bfq_set_hold(Queue* q, bool hold) {
  if (bfq::BfqData* bfqd = bfq::instance(q)) bfqd->hold.store(hold);
}

void bfq_set_always_defer(Queue* q, bool always) {
  if (bfq::BfqData* bfqd = bfq::instance(q)) bfqd->ins.set_always_defer(always);
}

}  // namespace blkmq

// The scheduler, listed by the table CMake generates from src/sched's
// folders; third in queue/scheduler (see deadline.cc).
BLKMQ_BUILTIN(blkmq::ElevatorType, elevator, bfq, 3, blkmq::bfq::make_type());
