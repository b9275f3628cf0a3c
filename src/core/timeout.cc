// Request timeouts (blk-timeout.c, blk_mq_timeout_work) and the requeue
// worker (blk_mq_requeue_work).
#include <algorithm>
#include <mutex>
#include <vector>

#include "core/core.h"
#include "core/time.h"

namespace blkmq {
namespace {

constexpr uint64_t kMaxTimeoutNs = 5ull * 1000000000ull;  // BLK_MAX_TIMEOUT: rescan at least every 5 s
constexpr uint64_t kSecNs = 1000000000ull;

uint64_t round_up_sec(uint64_t ns) { return (ns + kSecNs - 1) / kSecNs * kSecNs; }

// The slow path of arm_queue_timer, out of line so the check inlines.
[[gnu::noinline]] void arm_queue_timer_locked(QueueImpl* q, uint64_t expiry) {
  std::lock_guard<std::mutex> g(q->timeout_lock_);
  q->timeout_timer_.arm_if_earlier(expiry);
  // seq_cst: pairs with the load in arm_queue_timer (below).
  q->timeout_expiry_.store(q->timeout_timer_.expires(), std::memory_order_seq_cst);
}

}  // namespace

// Arms the queue's timer for `expiry` unless it is armed no more than half a
// second later (blk_add_timer's rule for moving the timer earlier). The fast
// path is one load of the cached expiry (0: not armed); the timer callback
// clears it before the timeout work scans, so a request whose deadline was
// published before that load is either covered by the armed timer or seen
// by the scan.
void arm_queue_timer(QueueImpl* q, uint64_t expiry) {
  // seq_cst, a Dekker pair with timeout_timer_fired: the request's state
  // store (start_request) comes before this load, the callback's store of
  // 0 before the scan's loads of the states; so either this sees 0 and
  // arms, or the scan sees the request in flight.
  const uint64_t cur = q->timeout_expiry_.load(std::memory_order_seq_cst);
  if (cur && cur <= expiry + kSecNs / 2) return;
  arm_queue_timer_locked(q, expiry);
}

namespace {

// Collects the in-flight requests of q held in one tag map; pinned.
void collect(QueueImpl* q, Tags* tags, std::vector<Request*>* out) {
  auto visit = [&](unsigned tag) {
    Request* rq = tags->rqs[tag].load(std::memory_order_acquire);
    // Pin before looking: a pinned request cannot be freed and reused.
    if (!rq || !rq_pin(rq)) return true;
    if (rq->q == q && rq->state.load(std::memory_order_acquire) == RqState::in_flight) out->push_back(rq);
    else rq_unpin(rq);
    return true;
  };
  tags->breserved_tags.bitmap().for_each_set([&](unsigned b) { return visit(b); });
  tags->bitmap_tags.bitmap().for_each_set([&](unsigned b) { return visit(b + tags->nr_reserved); });
}

}  // namespace

namespace {

uint64_t rq_timeout_ns(const Request* rq) {
  const QueueImpl* q = to_impl(rq->q);
  const uint64_t ms = rq->timeout_ms ? rq->timeout_ms : q->tun_.io_timeout_ms.load(std::memory_order_relaxed);
  return ms * 1000000ull;
}

// When the timer must fire for a deadline `timeout` ahead: at the deadline
// rounded up to a whole second (round_jiffies_up), but no later than
// BLK_MAX_TIMEOUT from now; a timeout under a second fires on time.
uint64_t expiry_for(uint64_t deadline, uint64_t timeout) {
  if (timeout < kSecNs) return deadline;
  const uint64_t now = deadline - std::min(deadline, timeout);
  return std::min(round_up_sec(deadline), now + kMaxTimeoutNs);
}

}  // namespace

void set_deadline(Request* rq) { rq->deadline_ns = blk_time_get_ns(to_impl(rq->q)) + rq_timeout_ns(rq); }

uint64_t timer_expiry(const Request* rq) { return expiry_for(rq->deadline_ns, rq_timeout_ns(rq)); }

uint64_t start_timer(Request* rq) {
  const uint64_t timeout = rq_timeout_ns(rq);
  rq->deadline_ns = blk_time_get_ns(to_impl(rq->q)) + timeout;
  return expiry_for(rq->deadline_ns, timeout);
}

void arm_timer_for(Request* rq) { arm_queue_timer(to_impl(rq->q), timer_expiry(rq)); }

void add_timer(Request* rq) {
  set_deadline(rq);
  arm_timer_for(rq);
}

void timeout_timer_fired(QueueImpl* q) {
  {
    std::lock_guard<std::mutex> g(q->timeout_lock_);
    // seq_cst: pairs with the load in arm_queue_timer.
    q->timeout_expiry_.store(0, std::memory_order_seq_cst);
  }
  kblockd_queue_work(&q->timeout_work_, kWorkCpuUnbound);
}

void timeout_work_fn(Work* w) {
  auto* q = static_cast<QueueImpl*>(w->data);
  const uint64_t now = q->clock_ns();
  std::vector<Request*> inflight;
  std::vector<Tags*> seen;
  for (unsigned i = 0; i < q->nr_hw_queues_; i++) {
    Tags* t = q->hctx(i)->tags;
    if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    seen.push_back(t);
    collect(q, t, &inflight);
  }
  uint64_t next = 0;
  for (Request* rq : inflight) {
    const bool expired = rq->state.load(std::memory_order_acquire) == RqState::in_flight &&
                         !rq->timed_out.load(std::memory_order_relaxed) && rq->deadline_ns <= now;
    if (expired) {
      rq->timed_out.store(1, std::memory_order_relaxed);
      TimeoutResult r = q->ops_->timeout ? q->ops_->timeout(rq) : TimeoutResult::reset_timer;
      if (r == TimeoutResult::reset_timer) {
        rq->timed_out.store(0, std::memory_order_relaxed);
        add_timer(rq);
      }
    } else if (rq->state.load(std::memory_order_acquire) == RqState::in_flight) {
      if (!next || rq->deadline_ns < next) next = rq->deadline_ns;
    }
    rq_unpin(rq);
  }
  if (next) {
    arm_queue_timer(q, std::max(next, q->clock_ns()));
  } else if (q->usage_sum() > 0) {
    // Requests exist but none was seen in flight: one may have been started
    // while this scan ran (start_request publishes its state without a
    // full barrier). Look again within BLK_MAX_TIMEOUT.
    arm_queue_timer(q, q->clock_ns() + kMaxTimeoutNs);
  } else {
    for (unsigned i = 0; i < q->nr_hw_queues_; i++) tag_idle(q->hctx(i));
  }
}

void requeue_work_fn(Work* w) {
  auto* q = static_cast<QueueImpl*>(w->data);
  ListNode rq_list, flush_list;
  q->requeue_lock_.lock();
  rq_list.splice_tail(&q->requeue_list_);
  flush_list.splice_tail(&q->flush_list_);
  q->requeue_lock_.unlock();
  while (!rq_list.empty()) {
    Request* rq = rq_of(rq_list.next);
    ListNode::unlink(&rq->queuelist);
    if (rq->rq_flags & kRqfDontPrep) request_bypass_insert(rq, 0);
    else insert_request(rq, kInsertAtHead);
  }
  while (!flush_list.empty()) {
    Request* rq = rq_of(flush_list.next);
    ListNode::unlink(&rq->queuelist);
    insert_request(rq, 0);
  }
  run_hw_queues_impl(q, false);
}

}  // namespace blkmq
