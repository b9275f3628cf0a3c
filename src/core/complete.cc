// Completion: routing (inline, softirq, IPI-style handoff), ending bios and
// requests, I/O accounting, batches, and driver-initiated requeue.
#include "base/clock.h"
#include "core/core.h"
#include "core/trace.h"
#include "core/time.h"

namespace blkmq {
namespace {

// io_ticks: time the device had I/O in flight. The stamp moves in ticks of
// 2^22 ns (~4 ms, the jiffy of a HZ=250 kernel), so the shared stamp is
// written at most once per tick, and only then are requests counted.
constexpr unsigned kTickShift = 22;

// A new tick: the one thread that moves the stamp counts the time since.
[[gnu::noinline]] void update_io_ticks_slow(QueueImpl* q, uint64_t now, uint64_t stamp, bool end) {
  if (!q->stamp_ns_.compare_exchange_strong(stamp, now)) return;
  bool busy = end;
  if (!busy) {
    uint64_t in[2];
    count_inflight(q, in);
    busy = in[0] + in[1] > 0;
  }
  if (busy) q->io_ticks_ns_.fetch_add((now - stamp) << kTickShift, std::memory_order_relaxed);
}

}  // namespace

// Inline in the core: twice per I/O, and almost always within the tick.
void update_io_ticks(QueueImpl* q, uint64_t now_ns, bool end) {
  const uint64_t now = now_ns >> kTickShift;
  const uint64_t stamp = q->stamp_ns_.load(std::memory_order_relaxed);
  if (now > stamp) update_io_ticks_slow(q, now, stamp, end);
}

namespace {

void account_io_done(Request* rq, uint64_t now, unsigned cpu) {
  QueueImpl* q = to_impl(rq->q);
  PartStat& st = q->stats_[cpu];
  const unsigned g = stat_group(rq->op);
  st.ios[g].fetch_add(1, std::memory_order_relaxed);
  st.nsecs[g].fetch_add(now > rq->start_time_ns ? now - rq->start_time_ns : 0, std::memory_order_relaxed);
  rq->acct.store(0, std::memory_order_relaxed);
  update_io_ticks(q, now, true);
}

// queue/rq_affinity=2: QUEUE_FLAG_SAME_FORCE, complete on the submitting
// CPU even when this one shares its cache (1 is QUEUE_FLAG_SAME_COMP).
constexpr unsigned kRqAffinitySameForce = 2;

bool need_ipi(const QueueImpl* q, unsigned cpu, unsigned submit_cpu) {
  const unsigned aff = q->tun_.rq_affinity.load(std::memory_order_relaxed);
  if (aff == 0 || cpu == submit_cpu) return false;
  if (aff != kRqAffinitySameForce && cpus_share_cache(cpu, submit_cpu)) return false;
  return cpu_online(submit_cpu);
}

// blk_mq_complete_request_remote: true if the completion was handed off.
bool complete_remote(Request* rq) {
  QueueImpl* q = to_impl(rq->q);
  const HwCtxImpl* h = to_impl(rq->mq_hctx);
  const unsigned cpu = base::this_cpu();
  if ((h->ctxs.size() == 1 && cpu == rq->submit_cpu) || (rq->cmd_flags & kBioPolled)) return false;
  if (need_ipi(q, cpu, rq->submit_cpu)) {
    send_completion_ipi(rq, rq->submit_cpu);
    return true;
  }
  if (q->nr_hw_queues_ == 1) {
    // Seed 002: from task context, complete in place instead of raising the
    // softirq (which would wake ksoftirqd).
    if (q->tun_.task_completion.load(std::memory_order_relaxed) == TaskCompletion::local && !in_interrupt())
      return false;
    raise_block_softirq(rq);
    return true;
  }
  return false;
}

// blk_update_request for all that is left of rq: every bio still on it
// ends with st, and its bytes count as done, in one pass.
// Forced inline (as release_request): on every request's completion.
[[gnu::always_inline]] inline void end_all_bios(Request* rq, BlkStatus st, unsigned cpu) {
  if (!rq->bio) return;
  if ((rq->rq_flags & kRqfIoStat) && rq->data_len)
    to_impl(rq->q)->stats_[cpu].sectors[stat_group(rq->op)].fetch_add(rq->data_len >> kSectorShift,
                                                                       std::memory_order_relaxed);
  while (Bio* bio = rq->bio) {
    rq->bio = bio->bi_next;
    bio->bi_next = nullptr;
    bio->done_bytes = bio->size;
    if (st != BlkStatus::ok && bio->status == BlkStatus::ok) bio->status = st;
    bio_endio(bio);  // the bio may be reused from here on
  }
  rq->biotail = nullptr;
  rq->data_len = 0;
}

// __blk_mq_end_request: accounting, the scheduler's completion hooks, the
// request's own end_io, then its tags.
[[gnu::always_inline]] inline void release_request(Request* rq, BlkStatus st, unsigned cpu) {
  uint64_t now = 0;
  QueueImpl* q = to_impl(rq->q);
  if (rq->rq_flags & kRqfIoStat) {
    now = blk_time_get_ns(q);
    account_io_done(rq, now, cpu);
  }
  if ((rq->rq_flags & kRqfUseSched) && q->elevator_ && q->elevator_->type->ops.completed_request)
    q->elevator_->type->ops.completed_request(rq, now ? now : q->clock_ns());
  // Once per request, before its own end_io may keep or reuse it (the
  // kernel's __blk_mq_end_request and blk_mq_free_request).
  rq_qos_done(q, rq);
  if (rq->end_io) {
    if (rq->rq_flags & kRqfUseSched) {
      if (q->elevator_ && q->elevator_->type->ops.finish_request) q->elevator_->type->ops.finish_request(rq);
      rq->rq_flags &= ~kRqfUseSched;
    }
    if (!rq->end_io(rq, st)) return;
  }
  free_request(rq, cpu);
}

}  // namespace

void account_flush(Request* frq) {
  if (!frq->start_time_ns) return;
  QueueImpl* q = to_impl(frq->q);
  const uint64_t now = blk_time_get_ns(q);
  PartStat& st = q->stats_[base::this_cpu()];
  st.ios[kStatFlush].fetch_add(1, std::memory_order_relaxed);
  st.nsecs[kStatFlush].fetch_add(now > frq->start_time_ns ? now - frq->start_time_ns : 0, std::memory_order_relaxed);
}

void account_io_start(Request* rq) {
  QueueImpl* q = to_impl(rq->q);
  if (!q->tun_.iostats.load(std::memory_order_relaxed)) return;
  rq->rq_flags |= kRqfIoStat;
  rq->start_time_ns = blk_time_get_ns(q);
  // io_ticks first, then in flight, as blk_account_io_start: a start that
  // moves the stamp must not find its own request in flight, or the
  // interval before it (since the clock's zero, for the first) counts as
  // busy.
  update_io_ticks(q, rq->start_time_ns, false);
  rq->acct.store(rq->is_write() ? 2 : 1, std::memory_order_relaxed);
}

void start_request(Request* rq) {
  HwCtxImpl* h = to_impl(rq->mq_hctx);
  QueueImpl* q = h->q;
  if (rq->rq_flags & kRqfStats) rq->io_start_time_ns = q->clock_ns();
  // The kernel calls it inside its QUEUE_FLAG_STATS branch, which every
  // policy with an issue hook turns on; blkmq's stats flag follows the
  // scheduler, so the hook is called whenever the chain has a policy.
  rq_qos_issue(q, rq);
  const uint64_t expiry = start_timer(rq);
  if (rq->tag >= 0) h->tags->rqs[static_cast<unsigned>(rq->tag)].store(rq, std::memory_order_relaxed);
  trace_rq(rq, blktrace::kIssue);
  rq->state.store(RqState::in_flight, std::memory_order_release);
  // From here the timeout handler may end rq (a driver that completes from
  // it, as null's fake timeouts do), so only locals are used. The timer is
  // armed after the request is visible in flight, so its scan sees it.
  arm_queue_timer(q, expiry);
}

bool update_request(Request* rq, BlkStatus st, uint32_t bytes) {
  if (!rq->bio) return false;
  if (rq->rq_flags & kRqfIoStat) {
    QueueImpl* q = to_impl(rq->q);
    q->stats_[base::this_cpu()].sectors[stat_group(rq->op)].fetch_add(bytes >> kSectorShift,
                                                                       std::memory_order_relaxed);
  }
  uint32_t done = 0;
  while (rq->bio && bytes) {
    Bio* bio = rq->bio;
    const uint32_t remain = bio->size - bio->done_bytes;
    if (st != BlkStatus::ok && bio->status == BlkStatus::ok) bio->status = st;
    if (bytes < remain) {
      bio->done_bytes += bytes;
      done += bytes;
      bytes = 0;
      break;
    }
    bytes -= remain;
    done += remain;
    rq->bio = bio->bi_next;
    bio->bi_next = nullptr;
    bio->done_bytes = bio->size;
    bio_endio(bio);  // the bio may be reused from here on
  }
  if (!rq->bio) {
    rq->biotail = nullptr;
    rq->data_len = 0;
    return false;
  }
  rq->data_len -= done;
  rq->sector += done >> kSectorShift;
  return true;
}

// Before its bios end: a native append's bio takes the sector the driver
// wrote it at (rq->sector, blk_zone_update_request_bio), and the plug a
// write holds moves on.
// Inline: under an unlikely branch of end_request, and a call of its own
// cost a tenth of the plug's work.
[[gnu::always_inline]] inline void zoned_end_request(Request* rq, BlkStatus st) {
  if (rq->rq_flags & kRqfZoneAppend) {
    if (st == BlkStatus::ok)
      for (Bio* b = rq->bio; b; b = b->bi_next) b->sector = rq->sector;
  } else {
    to_impl(rq->q)->zwp_->end_request(rq, st);
  }
  // The flags stay: end_request is the request's last end, and the next
  // allocation sets rq_flags afresh.
}

void end_request(Request* rq, BlkStatus st) {
  rq->state.store(RqState::complete, std::memory_order_relaxed);
  trace_rq(rq, blktrace::kComplete, st);
  // A step of the flush sequence: the machinery decides what comes next and
  // ends the bios when the whole sequence is done.
  if (rq->rq_flags & kRqfFlushSeq) {
    rq->end_io(rq, st);
    return;
  }
  if (rq->rq_flags & (kRqfZoneWplug | kRqfZoneAppend)) [[unlikely]]
    zoned_end_request(rq, st);
  // One CPU read serves all of this request's per-CPU counters. Every bio
  // is finished, including empty ones (a flush bio has no bytes).
  const unsigned cpu = base::this_cpu();
  end_all_bios(rq, st, cpu);
  release_request(rq, st, cpu);
}

void complete_rq_now(Request* rq) {
  QueueImpl* q = to_impl(rq->q);
  if (q->ops_->complete) q->ops_->complete(rq);
  else end_request(rq, rq->status);
}

bool complete_request(Request* rq, BlkStatus st) {
  RqState expected = RqState::in_flight;
  // One completer wins (the RMW decides, blk_mq_complete_request's
  // cmpxchg). Acquire pairs with complete.cc:start_request's release of
  // in_flight: the completer sees the request as its dispatcher set it
  // up. Release pairs with timeout.cc's acquire reads of the state
  // (collect, timeout_work_fn): a scan that sees complete skips it.
  if (!rq->state.compare_exchange_strong(expected, RqState::complete, std::memory_order_acq_rel))
    return false;
  rq->status = st;
  if (complete_remote(rq)) return true;
  complete_rq_now(rq);
  return true;
}

void complete_request_direct(Request* rq, void (*fn)(Request*)) {
  rq->state.store(RqState::complete, std::memory_order_release);
  fn(rq);
}

// As blk_mq_add_to_batch: errors, scheduler requests and requests with an
// end_io callback take the ordinary path.
bool add_to_batch(Request* rq, IoCompBatch* iob, BlkStatus st) {
  if (!iob || st != BlkStatus::ok || rq->end_io ||
      (rq->rq_flags & (kRqfSchedTags | kRqfResv | kRqfFlushSeq | kRqfZoneWplug | kRqfZoneAppend)))
    return false;
  rq->status = st;
  iob->reqs.push_back(rq);
  return true;
}

bool complete_request_batched(Request* rq, BlkStatus st, IoCompBatch* iob) {
  RqState expected = RqState::in_flight;
  // As complete_request: see there for the orders.
  if (!rq->state.compare_exchange_strong(expected, RqState::complete, std::memory_order_acq_rel))
    return false;
  rq->status = st;
  if (complete_remote(rq) || add_to_batch(rq, iob, st)) return true;
  complete_rq_now(rq);
  return true;
}

// blk_mq_end_request_batch. One clock read for the batch, as the kernel's
// (its iob->need_ts): every request of a batch ended at the same moment.
void end_request_batch(IoCompBatch* iob) {
  if (iob->reqs.empty()) return;
  constexpr unsigned kTagCompBatch = 32;
  int tags[kTagCompBatch];
  unsigned nr = 0;
  HwCtxImpl* cur = nullptr;
  const unsigned cpu = base::this_cpu();
  uint64_t now = 0;
  while (Request* rq = iob->reqs.pop_front()) {
    rq->state.store(RqState::complete, std::memory_order_relaxed);
    trace_rq(rq, blktrace::kComplete, rq->status);
    end_all_bios(rq, rq->status, cpu);
    if (rq->rq_flags & kRqfIoStat) {
      if (!now) now = blk_time_get_ns(to_impl(rq->q));
      account_io_done(rq, now, cpu);
    }
    rq_qos_done(to_impl(rq->q), rq);
    rq->state.store(RqState::idle, std::memory_order_relaxed);
    // A tag iterator holds it: the last drop frees. Pairs with tags.cc:
    // rq_unpin, see there.
    if (rq->ref.fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
    HwCtxImpl* h = to_impl(rq->mq_hctx);
    if (nr == kTagCompBatch || (cur && cur != h)) {
      free_tags_batch(cur, tags, nr, cpu);
      nr = 0;
    }
    cur = h;
    tags[nr++] = rq->tag;
  }
  if (cur) free_tags_batch(cur, tags, nr, cpu);
}

void requeue_request(Request* rq, bool kick) {
  QueueImpl* q = to_impl(rq->q);
  requeue_rq_internal(rq);
  rq->requeue_count++;
  if ((rq->rq_flags & kRqfUseSched) && q->elevator_ && q->elevator_->type->ops.requeue_request)
    q->elevator_->type->ops.requeue_request(rq);
  q->requeue_lock_.lock();
  q->requeue_list_.push_back(&rq->queuelist);
  q->requeue_lock_.unlock();
  if (kick) kick_requeue_list(q);
}

void kick_requeue_list(Queue* q) { to_impl(q)->requeue_work_.mod(kWorkCpuUnbound, 0); }

void delay_kick_requeue_list(Queue* q, unsigned msecs) {
  to_impl(q)->requeue_work_.mod(kWorkCpuUnbound, static_cast<uint64_t>(msecs) * base::kNsPerMs);
}

Request* tag_to_rq(HwCtx* hctx, int tag) {
  Tags* t = to_impl(hctx)->tags;
  if (tag < 0 || static_cast<unsigned>(tag) >= t->nr_tags) return nullptr;
  return t->rqs[static_cast<unsigned>(tag)].load(std::memory_order_acquire);
}

void* queue_data(const Queue* q) { return to_impl(q)->cfg_.queuedata; }

}  // namespace blkmq
