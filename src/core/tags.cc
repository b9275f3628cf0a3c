// Tag maps, request allocation and freeing, driver tags and fair sharing of
// tags between the active queues of a tag set (blk-mq-tag.c, part of blk-mq.c).
#include <algorithm>
#include <cstdlib>
#include <vector>
#include <new>

#include "base/sbitmap.h"
#include "blkmq/plug.h"
#include "core/core.h"
#include "core/trace.h"
#include "core/time.h"

namespace blkmq {

Tags::Tags(unsigned n, unsigned nr_resv, bool rr)
    : nr_tags(n),
      nr_reserved(nr_resv),
      bitmap_tags(n - nr_resv, rr),
      breserved_tags(nr_resv, rr),
      rqs(new std::atomic<Request*>[n]),
      static_rqs(n, nullptr) {
  for (unsigned i = 0; i < n; i++) rqs[i].store(nullptr, std::memory_order_relaxed);
}

Tags::~Tags() {
  for (Request* rq : static_rqs)
    if (rq) rq->~Request();
  std::free(rq_mem);
}

void CtxMap::resize(unsigned bits) {
  bits_ = bits;
  nwords_ = (bits + 63) / 64;
  words_.reset(new std::atomic<uint64_t>[nwords_ ? nwords_ : 1]);
  for (unsigned i = 0; i < (nwords_ ? nwords_ : 1); i++) words_[i].store(0, std::memory_order_relaxed);
}

bool CtxMap::any() const {
  for (unsigned i = 0; i < nwords_; i++)
    if (words_[i].load(std::memory_order_acquire)) return true;
  return false;
}

HctxType hctx_type_for(ReqOp op, uint32_t cmd_flags) {
  if (cmd_flags & kBioPolled) return HctxType::poll;
  if (op == ReqOp::read) return HctxType::read;
  return HctxType::dflt;
}

namespace {

// With hctx-shared tags, activity and in-flight counts are per queue: keep
// them on the first hctx.
HwCtxImpl* active_owner(HwCtxImpl* hctx) {
  return hctx->set && to_impl(hctx->set)->shared_hctx_tags() ? hctx->q->hctx(0) : hctx;
}

bool queue_shared(const HwCtxImpl* hctx) { return hctx->q->set_->queue_shared_.load(std::memory_order_relaxed); }

// Fair sharing (hctx_may_queue): an active queue may hold at most
// The least fair share of driver tags a busy queue keeps, however many
// share them: hctx_may_queue's bare 4U.
constexpr unsigned kFairShareMinDepth = 4;

// max(ceil(depth / users), 4) driver tags while several queues are busy.
bool hctx_may_queue(HwCtxImpl* hctx, const base::SbitmapQueue& bt) {
  if (!queue_shared(hctx) || bt.depth() <= 1) return true;
  HwCtxImpl* owner = active_owner(hctx);
  if (!(owner->state.load(std::memory_order_relaxed) & kHctxTagActive)) return true;
  unsigned users = hctx->tags->active_queues.load(std::memory_order_relaxed);
  if (!users) return true;
  unsigned depth = std::max((bt.depth() + users - 1) / users, unsigned{kFairShareMinDepth});
  return owner->nr_active.load(std::memory_order_relaxed) < depth;
}

void inc_active(HwCtxImpl* hctx) {
  if (queue_shared(hctx)) active_owner(hctx)->nr_active.fetch_add(1, std::memory_order_relaxed);
}
void dec_active(HwCtxImpl* hctx) {
  if (queue_shared(hctx)) active_owner(hctx)->nr_active.fetch_sub(1, std::memory_order_relaxed);
}

int try_get_tag(AllocData& d, Tags* tags) {
  base::SbitmapQueue& bt = d.reserved ? tags->breserved_tags : tags->bitmap_tags;
  if (!d.q->elevator_ && !d.reserved && !hctx_may_queue(d.hctx, bt)) return kNoTag;
  int bit = d.shallow_depth ? bt.get_shallow(d.shallow_depth) : bt.get();
  if (bit < 0) return kNoTag;
  return d.reserved ? bit : bit + static_cast<int>(tags->nr_reserved);
}

Tags* alloc_tags_of(AllocData& d) { return d.q->elevator_ ? d.hctx->sched_tags : d.hctx->tags; }

void pick_hctx(AllocData& d) { d.hctx = d.ctx->hctxs[static_cast<unsigned>(hctx_type_for(d.op, d.cmd_flags))]; }

void pick_ctx(AllocData& d) {
  d.ctx = d.q->ctx(base::this_cpu());
  pick_hctx(d);
}

// The slow path of blk_mq_get_tag: run the queue to free tags, then sleep on
// one of the bitmap's wait queues until a tag frees.
int get_tag_slow(AllocData& d) {
  base::TaskWaiter waiter;
  for (;;) {
    Tags* tags = alloc_tags_of(d);
    base::SbitmapQueue& bt = d.reserved ? tags->breserved_tags : tags->bitmap_tags;
    if (!in_interrupt()) run_hw_queue(d.hctx, false);
    int tag = try_get_tag(d, tags);
    if (tag != kNoTag) return tag;
    base::SbqWaitQueue* wq = bt.wait_ptr(&d.hctx->wait_index);
    waiter.reset();
    bt.add_wait(wq, waiter.entry());
    tag = try_get_tag(d, tags);
    if (tag != kNoTag) {
      bt.remove_wait(wq, waiter.entry());
      return tag;
    }
    // About to sleep: flush this thread's plug as the scheduler would.
    flush_current_plug(true);
    trace_alloc(d.q, d.op, d.cmd_flags, blktrace::kSleepRq);
    waiter.wait(0);
    bt.remove_wait(wq, waiter.entry());
    base::SbitmapQueue* old = &bt;
    pick_ctx(d);  // we may have migrated while asleep
    Tags* nt = alloc_tags_of(d);
    base::SbitmapQueue* nbt = d.reserved ? &nt->breserved_tags : &nt->bitmap_tags;
    if (nbt != old) old->wake_all();  // pass our wake-up on to the old map's waiters
  }
}

void init_rq(AllocData& d, Tags* tags, int tag) {
  Request* rq = tags->static_rqs[static_cast<unsigned>(tag)];
  rq->q = d.q;
  rq->mq_ctx = d.ctx;
  rq->mq_hctx = d.hctx;
  rq->rq_flags = d.rq_flags | (d.reserved ? uint32_t{kRqfResv} : 0u) |
                 (d.q->stats_enabled_.load(std::memory_order_relaxed) ? uint32_t{kRqfStats} : 0u);
  rq->cmd_flags = d.cmd_flags;
  rq->op = d.op;
  if (d.rq_flags & kRqfSchedTags) {
    rq->tag = kNoTag;
    rq->internal_tag = tag;
  } else {
    rq->tag = tag;
    rq->internal_tag = kNoTag;
    inc_active(d.hctx);
  }
  rq->timed_out.store(0, std::memory_order_relaxed);
  rq->acct.store(0, std::memory_order_relaxed);
  rq->flush_seq = 0;
  rq->rq_qos_seen = 0;
  rq->budget_token = -1;
  // bio, data_len, sector, nr_phys_segments and ioc are the bio's
  // (bio_to_request) or, for a passthrough command, Queue::alloc_request's:
  // not written twice on the I/O path, as blk_mq_rq_ctx_init leaves them.
  rq->timeout_ms = 0;
  rq->deadline_ns = 0;
  rq->start_time_ns = 0;
  rq->io_start_time_ns = 0;
  rq->status = BlkStatus::ok;
  rq->end_io = nullptr;
  rq->end_io_data = nullptr;
  rq->requeue_count = 0;
  rq->submit_cpu = d.ctx->cpu;
  rq->elv_priv[0] = rq->elv_priv[1] = rq->elv_priv[2] = nullptr;
  rq->fifo_time = 0;
  if ((d.rq_flags & kRqfUseSched) && d.q->elevator_->type->ops.prepare_request)
    d.q->elevator_->type->ops.prepare_request(rq);
  // Published last: a tag iterator that pins the request sees it whole.
  rq->ref.store(1, std::memory_order_release);
}

}  // namespace

void tag_busy(HwCtxImpl* hctx) {
  if (!queue_shared(hctx)) return;
  HwCtxImpl* owner = active_owner(hctx);
  if (owner->state.load(std::memory_order_relaxed) & kHctxTagActive) return;
  if (owner->state.fetch_or(kHctxTagActive) & kHctxTagActive) return;
  unsigned users = hctx->tags->active_queues.fetch_add(1) + 1;
  hctx->tags->bitmap_tags.recalculate_wake_batch(users);
}

void tag_idle(HwCtxImpl* hctx) {
  HwCtxImpl* owner = active_owner(hctx);
  if (!(owner->state.fetch_and(~kHctxTagActive) & kHctxTagActive)) return;
  unsigned users = hctx->tags->active_queues.fetch_sub(1) - 1;
  hctx->tags->bitmap_tags.recalculate_wake_batch(users ? users : 1);
}

bool rq_pin(Request* rq) {
  int r = rq->ref.load(std::memory_order_relaxed);
  while (r > 0)
    if (rq->ref.compare_exchange_weak(r, r + 1, std::memory_order_acquire)) return true;
  return false;
}

void rq_unpin(Request* rq) {
  // A reference drop: release publishes this holder's use of rq, acquire
  // lets the last dropper see the others'. Pairs with the other drops,
  // tags.cc:free_request and complete.cc:end_request_batch.
  if (rq->ref.fetch_sub(1, std::memory_order_acq_rel) == 1) free_request_ref(rq);
}

void count_inflight(const QueueImpl* q, uint64_t out[2]) {
  out[0] = out[1] = 0;
  // The walk holds a usage reference, as blk_mq_queue_tag_busy_iter holds
  // q_usage_counter: a scheduler switch or an update of the hw queues
  // (both frozen) cannot swap or free the tags under it. While a freeze is
  // under way nothing is counted.
  QueueImpl* mq = const_cast<QueueImpl*>(q);
  if (!mq->enter(true)) return;
  std::vector<const Tags*> seen;
  for (unsigned i = 0; i < q->nr_hw_queues_; i++) {
    const HwCtxImpl* h = q->hctx(i);
    const Tags* t = q->elevator_ ? h->sched_tags : h->tags;
    if (!t || std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    seen.push_back(t);
    auto visit = [&](unsigned tag) {
      Request* rq = t->static_rqs[tag];
      if (!rq_pin(rq)) return true;
      if (rq->q == q) {
        const uint8_t a = rq->acct.load(std::memory_order_relaxed);
        if (a) out[a - 1]++;
      }
      rq_unpin(rq);
      return true;
    };
    t->breserved_tags.bitmap().for_each_set(visit);
    t->bitmap_tags.bitmap().for_each_set([&](unsigned b) { return visit(b + t->nr_reserved); });
  }
  mq->exit_ref();
}

Request* alloc_request(AllocData& d) {
  QueueImpl* q = d.q;
  if (d.ctx) pick_hctx(d);
  else pick_ctx(d);
  if (q->elevator_) {
    d.rq_flags |= kRqfSchedTags;
    if (d.op != ReqOp::flush && !(d.rq_flags & kRqfPassthrough)) {
      d.rq_flags |= kRqfUseSched;
      if (q->elevator_->type->ops.limit_depth) {
        AllocLimit lim;
        q->elevator_->type->ops.limit_depth(q, d.op, d.cmd_flags, &lim);
        d.shallow_depth = lim.shallow_depth;
      }
    }
  } else {
    tag_busy(d.hctx);
  }
  Tags* tags = alloc_tags_of(d);
  if (d.nr_tags > 1 && d.cached && !d.shallow_depth && !d.reserved && !queue_shared(d.hctx)) {
    unsigned off = 0;
    uint64_t mask = tags->bitmap_tags.get_batch(d.nr_tags, &off);
    if (mask) {
      Request* first = nullptr;
      unsigned extra = 0;
      while (mask) {
        int bit = __builtin_ctzll(mask);
        mask &= mask - 1;
        int tag = static_cast<int>(off) + bit + static_cast<int>(tags->nr_reserved);
        init_rq(d, tags, tag);
        Request* rq = tags->static_rqs[static_cast<unsigned>(tag)];
        if (!first) {
          first = rq;
        } else {
          d.cached->push_back(rq);
          extra++;
        }
      }
      q->enter_many(extra, d.ctx->cpu);  // each cached request holds a usage reference
      return first;
    }
  }
  int tag = try_get_tag(d, tags);
  if (tag == kNoTag) {
    if (d.nowait) return nullptr;
    tag = get_tag_slow(d);
    tags = alloc_tags_of(d);
  }
  init_rq(d, tags, tag);
  return tags->static_rqs[static_cast<unsigned>(tag)];
}

bool get_driver_tag(Request* rq) {
  HwCtxImpl* hctx = to_impl(rq->mq_hctx);
  Tags* tags = hctx->tags;
  if (rq->tag == kNoTag) {
    // A scheduler's request becomes a user of the shared driver tags here
    // (__blk_mq_alloc_driver_tag marks the hctx busy too).
    tag_busy(hctx);
    int tag;
    if (rq->rq_flags & kRqfResv) {
      tag = tags->breserved_tags.get();
    } else {
      if (!hctx_may_queue(hctx, tags->bitmap_tags)) return false;
      tag = tags->bitmap_tags.get();
      if (tag >= 0) tag += static_cast<int>(tags->nr_reserved);
    }
    if (tag < 0) return false;
    rq->tag = tag;
    inc_active(hctx);
  }
  tags->rqs[static_cast<unsigned>(rq->tag)].store(rq, std::memory_order_release);
  return true;
}

static void put_tag(Tags* tags, SwCtx* ctx, int tag) {
  if (static_cast<unsigned>(tag) < tags->nr_reserved)
    tags->breserved_tags.clear(static_cast<unsigned>(tag), ctx->cpu);
  else
    tags->bitmap_tags.clear(static_cast<unsigned>(tag) - tags->nr_reserved, ctx->cpu);
}

void put_driver_tag(Request* rq) {
  if (rq->tag == kNoTag || rq->internal_tag == kNoTag) return;
  HwCtxImpl* hctx = to_impl(rq->mq_hctx);
  dec_active(hctx);
  put_tag(hctx->tags, rq->mq_ctx, rq->tag);
  rq->tag = kNoTag;
}

// The last reference is gone: return the tags and the usage reference
// (on the counter of `cpu`, the caller's).
void free_request_ref(Request* rq, unsigned cpu) {
  QueueImpl* q = to_impl(rq->q);
  HwCtxImpl* hctx = to_impl(rq->mq_hctx);
  SwCtx* ctx = rq->mq_ctx;
  const int sched_tag = rq->internal_tag;
  if (rq->tag != kNoTag) {
    dec_active(hctx);
    put_tag(hctx->tags, ctx, rq->tag);
  }
  if (sched_tag != kNoTag) put_tag(hctx->sched_tags, ctx, sched_tag);
  sched_restart(hctx);
  q->exit_ref_on(cpu, 1);
}

void free_request_ref(Request* rq) { free_request_ref(rq, base::this_cpu()); }

void free_tags_batch(HwCtxImpl* hctx, const int* tags, unsigned nr, unsigned cpu) {
  if (!nr) return;
  if (queue_shared(hctx)) active_owner(hctx)->nr_active.fetch_sub(nr, std::memory_order_relaxed);
  hctx->tags->bitmap_tags.clear_batch(tags, nr, static_cast<int>(hctx->tags->nr_reserved), cpu);
  sched_restart(hctx);
  hctx->q->exit_ref_on(cpu, nr);
}

void free_request(Request* rq) { free_request(rq, base::this_cpu()); }

void free_request(Request* rq, unsigned cpu) {
  QueueImpl* q = to_impl(rq->q);
  if (rq->rq_flags & kRqfUseSched) {
    if (q->elevator_ && q->elevator_->type->ops.finish_request)
      q->elevator_->type->ops.finish_request(rq);
    rq->rq_flags &= ~kRqfUseSched;
  }
  rq->state.store(RqState::idle, std::memory_order_relaxed);
  // Pairs with tags.cc:rq_unpin (a tag iterator's pin): see there.
  if (rq->ref.fetch_sub(1, std::memory_order_acq_rel) == 1) free_request_ref(rq, cpu);
}

}  // namespace blkmq
