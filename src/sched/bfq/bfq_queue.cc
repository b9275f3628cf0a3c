// bfq's per-queue bookkeeping: finding or creating the queue of a request,
// the busy/idle switch with weight raising, think time and seekiness, the
// budget feedback and expiration, and the idling decision. The request
// path and the elevator hooks are in bfq_iosched.cc.
#include "sched/bfq/bfq_queue.h"

#include <algorithm>
#include <bit>

namespace blkmq::bfq {
namespace {

Class class_of(uint16_t ioprio) {
  switch (ioprio_class(ioprio)) {
    case IoprioClass::rt: return kRt;
    case IoprioClass::idle: return kIdle;
    default: return kBe;
  }
}

// The weight a context's queue gets: the ioprio weight scaled by the
// context weight (the default, 100, leaves the kernel's ioprio weights as
// is).
unsigned weight_of(const IoContext* ioc) {
  const unsigned level = ioprio_class(ioc->ioprio) == IoprioClass::none ? kIoprioNorm : ioprio_level(ioc->ioprio);
  const unsigned w = ioprio_weight(level) * (ioc->weight ? ioc->weight : kIoWeightDefault) / kIoWeightDefault;
  return w ? w : 1;
}

bool totally_seeky(const BfqQueue* q) { return q->seek_history == UINT32_MAX; }

}  // namespace

bool is_seeky(const BfqQueue* q) { return static_cast<unsigned>(std::popcount(q->seek_history)) > kSeekyThresh; }

uint64_t serv_to_charge(const Request* rq, const BfqQueue* q) {
  const uint64_t sectors = rq->data_len >> kSectorShift;
  const uint64_t s = sectors ? sectors : 1;
  return (q->sync || q->wr_coeff > 1) ? s : s * kAsyncChargeFactor;
}

uint64_t budget_left(const BfqQueue* q) { return q->budget > q->service ? q->budget - q->service : 0; }

QKey key_for(const IoContext* ioc, bool sync, const IoGroup* g) {
  if (sync) return QKey{ioc->id, 0};
  return QKey{g ? kGroupTag | reinterpret_cast<uintptr_t>(g) : 0, (uint32_t{ioc->weight} << 16) | ioc->ioprio};
}

BfqQueue* find_queue(BfqData* bfqd, const IoContext* ioc, bool sync, const IoGroup* g) {
  auto it = bfqd->queues.find(key_for(ioc, sync, g));
  return it == bfqd->queues.end() ? nullptr : it->second;
}

// Reads the context's ioprio and weight (bfq_check_ioprio_change): a change
// takes effect at the queue's next (re)activation, as in the kernel.
void check_prio_change(BfqQueue* q, const IoContext* ioc) {
  const Class c = class_of(ioc->ioprio);
  const unsigned w = weight_of(ioc);
  if (c != q->new_cls || w != q->new_orig_weight) {
    q->new_cls = c;
    q->new_orig_weight = w;
    q->prio_changed = true;
  }
}

BfqQueue* get_queue(BfqData* bfqd, const IoContext* ioc, bool sync, IoGroup* g, uint64_t now) {
  if (BfqQueue* q = find_queue(bfqd, ioc, sync, g)) {
    if (sync) {
      check_prio_change(q, ioc);
      // The context moved to another group since its last request
      // (bfq_bic_update_cgroup): its queue follows it.
      if (q->iog != g) [[unlikely]] move_queue(bfqd, q, group_for(bfqd, g), now);
    }
    return q;
  }
  auto* q = new BfqQueue();
  q->key = key_for(ioc, sync, g);
  queue_set_group(bfqd, q, group_for(bfqd, g));
  q->uid = bfqd->next_uid++;
  q->sync = sync;
  q->cls = q->new_cls = q->tree_cls = class_of(ioc->ioprio);
  q->orig_weight = q->new_orig_weight = q->weight = weight_of(ioc);
  q->max_budget = 2 * bfqd->max_budget() / 3;
  q->budget = q->max_budget;
  q->short_ttime = sync && q->cls != kIdle;
  q->last_end_request = now;
  q->io_start_time = now;
  q->decrease_time = now;
  q->soft_rt_next_start = now;  // bfq_smallest_from_now()
  bfqd->queues.emplace(q->key, q);
  bfqd->stats.queues_created++;
  bfqd->stats.queues_alive++;
  return q;
}

void put_queue_if_idle(BfqData* bfqd, BfqQueue* q, uint64_t now) {
  if (q->refs == 0 && !q->busy && q != bfqd->in_service) q->empty_since = now;
}

bool queue_unused(const BfqData* bfqd, const BfqQueue* q) {
  return q->refs == 0 && !q->busy && q != bfqd->in_service && q->dispatched == 0;
}

void free_queue(BfqData* bfqd, BfqQueue* q) {
  auto& bl = bfqd->burst_list;
  bl.erase(std::remove(bl.begin(), bl.end(), q), bl.end());
  if (q->tree != BfqQueue::kActive) forget_entity(q);
  if (q->in_weights) weights_remove(bfqd, q);
  groups_pending_remove(bfqd, q);
  queue_put_group(bfqd, q);
  bfqd->queues.erase(q->key);
  bfqd->stats.queues_freed++;
  bfqd->stats.queues_alive--;
  delete q;
}

// Queues are kept for a while after their last request so that a context
// that pauses keeps its history (think time, weight raising, budget); one
// unused for bfq_wr_min_idle_time would start over as a new queue anyway
// (it counts as idle for long), so it is freed then.
// A removed group's unused queues go at once: no request can come back to
// them (a context left the group before it could be removed).
void sweep(BfqData* bfqd, uint64_t now, bool all) {
  if (!all && now < bfqd->last_sweep + kSweepIntervalNs) return;
  bfqd->last_sweep = now;
  if (!bfqd->groups.empty()) sweep_groups(bfqd);
  for (auto it = bfqd->queues.begin(); it != bfqd->queues.end();) {
    BfqQueue* q = (it++)->second;
    if (queue_unused(bfqd, q) && (all || now >= q->empty_since + kQueueFreeGraceNs || !q->bfqg->linked))
      free_queue(bfqd, q);
  }
}

void weights_add(BfqData* bfqd, BfqQueue* q) {
  groups_pending_add(bfqd, q);
  if (q->in_weights) return;
  q->in_weights = true;
  q->weights_key = q->orig_weight;
  bfqd->weights[q->weights_key]++;
}

void weights_remove(BfqData* bfqd, BfqQueue* q) {
  groups_pending_remove(bfqd, q);
  if (!q->in_weights) return;
  q->in_weights = false;
  auto it = bfqd->weights.find(q->weights_key);
  if (it != bfqd->weights.end() && --it->second == 0) bfqd->weights.erase(it);
}

// bfq_asymmetric_scenario: queues of different weights (and this one not
// of the smallest), several classes busy, or requests of more than one
// group pending (idling then keeps each group's share).
bool asymmetric_scenario(const BfqData* bfqd, const BfqQueue* q) {
  const bool smallest = q && !bfqd->weights.empty() && q->orig_weight <= bfqd->weights.begin()->first;
  const bool varied = !smallest && bfqd->weights.size() > 1;
  unsigned classes = 0;
  for (unsigned b : bfqd->busy_queues) classes += b > 0;
  return varied || classes > 1 || bfqd->groups_with_pending > 1;
}

bool idling_boosts_thr_without_issues(const BfqData* bfqd, const BfqQueue* q) {
  const bool rot_without_queueing = bfqd->rotational && bfqd->hw_tag == 0;
  const bool seq_io_bound = !is_seeky(q) && q->io_bound && q->short_ttime;
  const bool boosts = rot_without_queueing || ((bfqd->rotational || bfqd->hw_tag == 0) && seq_io_bound);
  return boosts && bfqd->wr_busy_queues == 0;
}

// A queue that is the only busy one is idled for as well: whoever comes
// next finds the device busy with it anyway, and a heavier queue keeps its
// slot when a lighter one drains for a moment (all its requests completed,
// its process not yet back) instead of expiring and handing over a slot.
bool idling_needed_for_service_guarantees(const BfqData* bfqd, const BfqQueue* q) {
  return (q->wr_coeff > 1 &&
          (bfqd->wr_busy_queues < bfqd->tot_busy() || bfqd->rq_in_driver >= q->dispatched + 4)) ||
         asymmetric_scenario(bfqd, q) || bfqd->tot_busy() == 1;
}

bool better_to_idle(const BfqData* bfqd, const BfqQueue* q) {
  if (bfqd->tun.slice_idle_ns == 0 || !q->sync || q->cls == kIdle) return false;
  if (bfqd->tun.strict_guarantees) return true;
  return idling_boosts_thr_without_issues(bfqd, q) || idling_needed_for_service_guarantees(bfqd, q);
}

bool budget_timed_out(const BfqQueue* q, uint64_t now) { return q->budget_timeout && now > q->budget_timeout; }

bool may_expire_for_budget_timeout(const BfqQueue* q, uint64_t now) {
  return (!q->wait_request || budget_left(q) >= q->budget / 3) && budget_timed_out(q, now);
}

// bfq_update_io_intensity, on each new request of a sync queue: time with
// nothing queued or in flight counts as idle, and a queue idle for more
// than a fifth of the window is not I/O bound (not worth idling for to
// boost throughput). The window halves past 200 ms so that it follows the
// recent past. A new queue's first requests do not judge it: their first
// few microseconds would read as mostly idle.
void update_io_intensity(BfqQueue* q, uint64_t now) {
  const uint64_t tot = now > q->io_start_time ? now - q->io_start_time : 0;
  if (q->sort.empty() && q->dispatched == 0 && now > q->last_end_request) q->tot_idle_time += now - q->last_end_request;
  if (q->just_created) return;
  q->io_bound = q->tot_idle_time * 5 <= tot;
  if (tot > kIoIntensityWindowNs) {
    q->io_start_time = now - tot / 2;
    q->tot_idle_time /= 2;
  }
}

// Think time (bfq_update_io_thinktime), sampled only when the queue had
// nothing pending, so it measures the process, not the device.
void update_thinktime(BfqData* bfqd, BfqQueue* q, uint64_t now) {
  if (!q->sync || q->dispatched || q->queued[0] || q->queued[1]) return;
  uint64_t elapsed = now > q->last_end_request ? now - q->last_end_request : 0;
  const uint64_t cap = 2 * bfqd->tun.slice_idle_ns;
  if (elapsed > cap) elapsed = cap;
  q->ttime_samples = (7 * q->ttime_samples + 256) / 8;
  q->ttime_total = (7 * q->ttime_total + 256 * elapsed) / 8;
  q->ttime_mean = (q->ttime_total + 128) / q->ttime_samples;
  if (q->cls != kIdle)
    q->short_ttime = q->ttime_samples <= kTtimeMinSamples || q->ttime_mean <= bfqd->tun.slice_idle_ns;
}

void update_seek(BfqData* bfqd, BfqQueue* q, const Request* rq) {
  const uint64_t d = rq->sector > q->last_request_pos ? rq->sector - q->last_request_pos : q->last_request_pos - rq->sector;
  const bool seeky = d > kSeekThr && (bfqd->rotational || (rq->data_len >> kSectorShift) < kSectThrNonrot);
  q->seek_history = (q->seek_history << 1) | (seeky ? 1 : 0);
  q->last_request_pos = rq->end_sector();
}

// Large-burst detection (bfq_handle_burst): sync queues created within
// 180 ms of each other form a burst. When the 8th joins, the burst is large:
// every queue of it is marked, so none is raised as interactive and the
// raising of those already raised ends at their next dispatch
// (update_wr_data). Later queues join the large burst while it lasts.
void handle_burst(BfqData* bfqd, BfqQueue* q, uint64_t now) {
  if (q->budget_timeout != 0 && !q->in_large_burst) {
    // Only newly created queues join bursts.
    return;
  }
  if (now > bfqd->last_ins_in_burst + kBurstIntervalNs) {
    bfqd->burst_size = 1;
    bfqd->large_burst = false;
    bfqd->burst_list.clear();
    bfqd->burst_list.push_back(q);
  } else if (bfqd->large_burst) {
    bfqd->burst_size++;
  } else if (++bfqd->burst_size >= kBurstThresh) {
    bfqd->large_burst = true;
    for (BfqQueue* b : bfqd->burst_list) b->in_large_burst = true;
    bfqd->burst_list.clear();
  } else {
    bfqd->burst_list.push_back(q);
  }
  bfqd->last_ins_in_burst = now;
  q->in_large_burst = bfqd->large_burst;
}

void end_wr(BfqData* bfqd, BfqQueue* q, uint64_t now) {
  if (q->wr_coeff == 1) return;
  if (q->busy) bfqd->wr_busy_queues--;
  q->wr_coeff = 1;
  q->wr_cur_max_time = 0;
  q->last_wr_start_finish = now;
  q->prio_changed = true;
}

void start_wr(BfqData* bfqd, BfqQueue* q, unsigned coeff, uint64_t dur, uint64_t now) {
  if (q->wr_coeff == 1) {
    bfqd->stats.wr_started++;
    if (q->busy) bfqd->wr_busy_queues++;
  }
  q->wr_coeff = coeff;
  q->wr_cur_max_time = dur;
  q->last_wr_start_finish = now;
  q->service_from_wr = 0;
  q->prio_changed = true;
}

uint64_t softrt_next_start(const BfqData* bfqd, const BfqQueue* q, uint64_t now) {
  const uint64_t a = q->soft_rt_next_start;
  const uint64_t b = q->last_idle_bklogged + base::kNsPerSec * q->service_from_backlogged / kWrMaxSoftRtRate;
  const uint64_t c = now + bfqd->tun.slice_idle_ns + 4 * kMs;
  return std::max(a, std::max(b, c));
}

// bfq_update_bfqq_wr_on_rq_arrival.
void update_wr_on_arrival(BfqData* bfqd, BfqQueue* q, bool interactive, bool soft_rt, bool in_burst,
                          uint64_t now) {
  if (q->wr_coeff == 1) {
    if (interactive) {
      start_wr(bfqd, q, kWrCoeff, wr_duration(bfqd), now);
    } else {
      start_wr(bfqd, q, kWrCoeff * kSoftRtWeightFactor, kWrRtMaxTimeNs, now);
    }
    q->budget = std::min(q->budget, 2 * bfqd->min_budget());
    return;
  }
  if (interactive) {
    start_wr(bfqd, q, kWrCoeff, wr_duration(bfqd), now);
  } else if (in_burst) {
    end_wr(bfqd, q, now);
  } else if (soft_rt && q->wr_cur_max_time != kWrRtMaxTimeNs) {
    start_wr(bfqd, q, kWrCoeff * kSoftRtWeightFactor, kWrRtMaxTimeNs, now);
  }
}

// bfq_bfqq_higher_class_or_weight.
bool higher_class_or_weight(const BfqQueue* q, const BfqQueue* in_serv) {
  if (in_serv->cls == kIdle && q->cls != kIdle) return true;
  if (q->cls != in_serv->cls) return q->new_cls < in_serv->cls;
  return q->new_orig_weight * q->wr_coeff > in_serv->weight;
}

// A queue with a new request after having none: the busy switch
// (bfq_bfqq_handle_idle_busy_switch + bfq_add_bfqq_busy). Returns true if
// the in-service queue must be preempted.
bool add_busy(BfqData* bfqd, BfqQueue* q, const Request* rq, uint64_t now) {
  const bool is_new = q->budget_timeout == 0;
  q->just_created = false;
  if (q->sync) handle_burst(bfqd, q, now);
  const bool in_burst = q->in_large_burst;
  const bool idle_for_long = is_new || now > q->budget_timeout + kWrMinIdleTimeNs;
  // Raising is for queues of the default weight only (the kernel checks
  // new_weight == 40): a queue whose weight was set by its ioprio or
  // cgroup already has the share it asked for.
  const bool default_weight = q->new_orig_weight == ioprio_weight(kIoprioNorm);
  const bool soft_rt = !totally_seeky(q) && !in_burst && now > q->soft_rt_next_start && q->dispatched == 0 &&
                       default_weight && q->new_cls == kBe;
  const bool interactive = !in_burst && idle_for_long && default_weight;
  const bool deserves = bfqd->tun.low_latency && (q->wr_coeff > 1 || (q->sync && (interactive || soft_rt)));

  // bfq_bfqq_update_budg_for_activation: a queue that left empty mid-slot
  // and is back within 3 x slice_idle of its last completion resumes what
  // was left of its budget and may take the device back; any other starts
  // a fresh budget.
  const bool in_time = now <= q->last_end_request + 3 * bfqd->tun.slice_idle_ns;
  const bool resumes = q->non_blocking_wait_rq && in_time && q->budget > q->service;
  if (resumes) q->budget = std::min(q->budget - q->service, q->max_budget);
  else q->budget = std::max(q->max_budget, serv_to_charge(rq, q));
  q->service = 0;
  if (deserves) update_wr_on_arrival(bfqd, q, interactive, soft_rt, in_burst, now);
  if (bfqd->tun.low_latency && q->wr_coeff == 1) {
    q->last_idle_bklogged = now;
    q->service_from_backlogged = 0;
    q->softrt_update = false;
  }

  q->busy = true;
  bfqd->busy_queues[q->new_cls]++;
  if (q->wr_coeff > 1) bfqd->wr_busy_queues++;
  activate_entity(bfqd, q, resumes);
  q->non_blocking_wait_rq = false;
  if (!q->dispatched) weights_add(bfqd, q);

  BfqQueue* in_serv = bfqd->in_service;
  if (!in_serv || in_serv == q) return false;
  // Preempt (bfq_bfqq_handle_idle_busy_switch) for a queue resuming its
  // slot, unless the in-service one is raised more; for a higher class or
  // weight; or when idling is not worth it for the in-service queue:
  // plugging dispatch for it would lose throughput for nothing.
  return (resumes && q->wr_coeff >= in_serv->wr_coeff) || higher_class_or_weight(q, in_serv) ||
         !better_to_idle(bfqd, in_serv);
}

void del_busy(BfqData* bfqd, BfqQueue* q, bool in_service, uint64_t now) {
  q->busy = false;
  bfqd->busy_queues[q->cls]--;
  if (q->wr_coeff > 1) bfqd->wr_busy_queues--;
  if (!q->dispatched) weights_remove(bfqd, q);
  deactivate_entity(bfqd, q, in_service);
  put_queue_if_idle(bfqd, q, now);
}

// bfq_bfqq_is_slow. The slot runs from its start to now, or for an idle
// timer expiry to when idling started (the idle time is not the queue's).
// Under 1 ms the slot is too short to measure: it is charged as one seek
// on a rotational device (bfq_slice_idle's default, 8 ms) or BFQ_MIN_TT
// (2 ms) otherwise, and the queue is slow if seeky. Over 20 ms it is slow
// if it got under half of max_budget, seeky or not. Charging short slots
// in full is what keeps a low-weight seeky queue that gets a slot of a few
// microseconds each time a heavier one pauses from being charged nothing.
bool is_slow(const BfqData* bfqd, const BfqQueue* q, uint64_t now, bool compensate, uint64_t* charge_ns) {
  bool slow = is_seeky(q);
  *charge_ns = 0;
  if (!q->sync) return false;
  const uint64_t end = compensate ? bfqd->last_idling_start : now;
  const uint64_t slot_us = end > q->slot_start ? (end - q->slot_start) / 1000 : 0;
  if (slot_us < 1000) {
    *charge_ns = bfqd->rotational ? kDefaultSliceIdleNs : kMinTtNs;
    return slow;
  }
  *charge_ns = slot_us / 1000 * kMs;  // whole milliseconds, as the kernel counts
  if (slot_us > kRateSlowIntervalNs / 1000) slow = q->service < bfqd->max_budget() / 2;
  return slow;
}

// bfq_bfqq_charge_time: max_budget x elapsed / timeout, at least what it got.
void charge_time(BfqData* bfqd, BfqQueue* q, uint64_t slot_ns) {
  uint64_t charge = bfqd->max_budget();
  if (slot_ns < bfqd->tun.timeout_ns) charge = charge * slot_ns / bfqd->tun.timeout_ns;
  if (charge < q->service) charge = q->service;
  if (charge > q->budget) q->budget = charge;
  entity_served(bfqd, q, charge - q->service);
}

// __bfq_bfqq_recalc_budget.
void recalc_budget(BfqData* bfqd, BfqQueue* q, Expire reason) {
  const uint64_t max = bfqd->max_budget();
  const uint64_t min = bfqd->min_budget();
  uint64_t budget = q->wr_coeff == 1 ? q->max_budget : 2 * min;
  if (q->sync && q->wr_coeff == 1) {
    switch (reason) {
      case Expire::too_idle:
        if (q->dispatched > 0) budget = std::min(budget * 2, max);
        else budget = budget > 5 * min ? budget - 4 * min : min;
        break;
      case Expire::budget_timeout: budget = std::min(budget * 2, max); break;
      case Expire::budget_exhausted: budget = std::min(budget * 4, max); break;
      case Expire::no_more_requests: budget = std::max(q->service, min); break;
      default: break;
    }
  } else if (!q->sync) {
    budget = max;
  }
  q->max_budget = std::min(budget, max);
  // Only a queue with a next request gets its next budget now; an empty
  // one keeps the budget of the slot it leaves, so that back in time it
  // resumes what is left of it (add_busy).
  if (!q->sort.empty()) q->budget = std::max(q->max_budget, serv_to_charge(q->sort.first(), q));
}

void expire(BfqData* bfqd, BfqQueue* q, Expire reason, uint64_t now, bool compensate) {
  uint64_t slot_ns = 0;
  const bool slow = is_slow(bfqd, q, now, compensate, &slot_ns);
  if (q->wr_coeff == 1 && (slow || (reason == Expire::budget_timeout && budget_left(q) >= q->budget / 3)))
    charge_time(bfqd, q, slot_ns);
  q->last_charge = q->service;
  if (bfqd->tun.low_latency && q->wr_coeff == 1) q->last_wr_start_finish = now;
  if (bfqd->tun.low_latency && q->sort.empty()) {
    if (q->dispatched == 0) q->soft_rt_next_start = softrt_next_start(bfqd, q, now);
    else q->softrt_update = true;
  }
  bfqd->stats.expired[static_cast<unsigned>(reason)]++;
  bfqd->rqs_injected = bfqd->wait_dispatch = false;
  bfqd->waited_rq = nullptr;
  recalc_budget(bfqd, q, reason);
  // __bfq_bfqq_expire
  bfqd->in_service = nullptr;
  bfqd->idle_deadline = 0;
  q->wait_request = false;
  // A preempted queue that idling would have kept (guarantees) stays busy
  // with no requests, so it keeps its place among the weights.
  if (q->sort.empty() && !(reason == Expire::preempted && idling_needed_for_service_guarantees(bfqd, q))) {
    // Left empty for a reason other than its budget: its service stays, so
    // that coming back in time it resumes the budget it had left.
    const bool budget_reason = reason == Expire::budget_timeout || reason == Expire::budget_exhausted;
    q->non_blocking_wait_rq = !budget_reason;
    del_busy(bfqd, q, true, now);
    if (budget_reason) q->service = 0;
  } else {
    if (q->new_cls != q->cls) {  // the class changes at requeue
      bfqd->busy_queues[q->cls]--;
      bfqd->busy_queues[q->new_cls]++;
    }
    requeue_entity(bfqd, q);
  }
}

BfqQueue* set_in_service(BfqData* bfqd, uint64_t now) {
  BfqQueue* q = get_next_queue(bfqd, now);
  bfqd->in_service = q;
  if (!q) return nullptr;
  q->fifo_checked = false;
  q->next_rq = nullptr;  // the slot starts with a FIFO check
  q->wait_request = false;
  q->slot_start = now;
  bfqd->budgets_assigned = (bfqd->budgets_assigned * 7 + 256) / 8;
  const unsigned coeff = (q->wr_coeff == 1 || q->wr_cur_max_time == kWrRtMaxTimeNs) ? 1 : q->weight / q->orig_weight;
  q->budget_timeout = now + bfqd->tun.timeout_ns * (coeff ? coeff : 1);
  return q;
}

// bfq_arm_slice_timer: the in-service queue is empty and worth waiting for.
void arm_slice_timer(BfqData* bfqd, BfqQueue* q, uint64_t now) {
  uint64_t sl = bfqd->tun.slice_idle_ns;
  if (is_seeky(q) && q->wr_coeff == 1 && !asymmetric_scenario(bfqd, q)) sl = std::min(sl, kMinTtNs);
  else if (q->wr_coeff > 1) sl = std::max(sl, kWrLongIdleMinNs);
  q->wait_request = true;
  bfqd->last_idling_start = now;
  bfqd->idle_deadline = now + sl;
  bfqd->stats.idle_timer_armed++;
  bfqd->idle_timer.arm_after(sl);
}

// bfq_update_wr_data: raising ends after its time, or for interactive
// raising after max_service_from_wr sectors.
void update_wr_data(BfqData* bfqd, BfqQueue* q, uint64_t charge, uint64_t now) {
  if (q->wr_coeff == 1) return;
  q->service_from_wr += charge;
  if (!bfqd->tun.low_latency || q->in_large_burst || now > q->last_wr_start_finish + q->wr_cur_max_time ||
      (q->wr_cur_max_time != kWrRtMaxTimeNs && q->service_from_wr > kMaxServiceFromWr)) {
    end_wr(bfqd, q, now);
  }
}

// bfq_update_hw_tag: is the device queueing (NCQ)?
void update_hw_tag(BfqData* bfqd) {
  if (bfqd->rq_in_driver > bfqd->max_rq_in_driver) bfqd->max_rq_in_driver = bfqd->rq_in_driver;
  if (bfqd->hw_tag == 1) return;
  BfqQueue* q = bfqd->in_service;
  if (q && q->short_ttime && q->dispatched + q->queued[0] + q->queued[1] < kHwQueueThreshold &&
      bfqd->rq_in_driver < kHwQueueThreshold)
    return;
  if (bfqd->hw_tag_samples++ < kHwQueueSamples) return;
  bfqd->hw_tag = bfqd->max_rq_in_driver >= kHwQueueThreshold ? 1 : 0;
  bfqd->max_rq_in_driver = 0;
  bfqd->hw_tag_samples = 0;
}

// bfq_reset_inject_limit: probe again from no baseline. A queue that
// thinks (no short think time) may inject one request meanwhile.
void reset_inject_limit(BfqData* bfqd, BfqQueue* q, uint64_t now) {
  q->last_serv_time_ns = 0;
  bfqd->waited_rq = nullptr;
  q->inject_limit = q->short_ttime ? 0 : 1;
  q->decrease_time = now;
}

// bfq_update_inject_limit, when the probed request (waited_rq) completes:
// `tot_ns` is the time from the queue getting a request with the driver
// empty to this completion; `alone` says it was the only request in the
// driver. Above 1.5 x the baseline injection is cut, below it may grow.
void update_inject_limit(BfqData* bfqd, BfqQueue* q, uint64_t tot_ns, bool alone, uint64_t now) {
  const unsigned old = q->inject_limit;
  if (q->last_serv_time_ns > 0 && bfqd->rqs_injected) {
    const uint64_t threshold = q->last_serv_time_ns * 3 / 2;
    if (tot_ns >= threshold && old > 0) {
      q->inject_limit--;
      q->decrease_time = now;
    } else if (tot_ns < threshold && old <= bfqd->max_rq_in_driver) {
      q->inject_limit++;
    }
  }
  if ((q->last_serv_time_ns == 0 && alone) || tot_ns < q->last_serv_time_ns) {
    if (q->last_serv_time_ns == 0) q->inject_limit = std::max(1u, old);
    q->last_serv_time_ns = tot_ns;
  } else if (!bfqd->rqs_injected && alone) {
    q->last_serv_time_ns = tot_ns;
  }
  bfqd->waited_rq = nullptr;
  bfqd->rqs_injected = false;
}

void end_all_wr(BfqData* bfqd) {
  const uint64_t now = now_ns(bfqd);
  for (auto& [k, q] : bfqd->queues) end_wr(bfqd, q, now);
}

}  // namespace blkmq::bfq
