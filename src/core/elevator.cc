// The elevator framework: registration, the default choice, switching under
// I/O (freeze + quiesce), scheduler tags and nr_requests.
#include <cerrno>
#include <algorithm>
#include <mutex>

#include "base/registry.h"
#include "core/core.h"

// The table CMake generates from the folders of src/sched (base/registry.h
// says why): the core names no scheduler.
extern const blkmq::base::BuiltinTable<blkmq::ElevatorType> blkmq_builtin_elevators;

namespace blkmq {
namespace {

// The required hooks, for built-ins and registrants alike.
Status check_elevator(const ElevatorType& t) {
  if (t.name.empty() || t.name == "none") return Status::invalid("elevator: a name other than 'none' is required");
  if (!t.ops.init_sched || !t.ops.exit_sched || !t.ops.insert_requests || !t.ops.dispatch_request ||
      !t.ops.has_work)
    return Status::invalid("elevator '" + t.name + "': a required hook is missing");
  return Status::OK();
}

base::Registry<ElevatorType>& elevators() {
  static base::Registry<ElevatorType> r("elevator", blkmq_builtin_elevators, &check_elevator);
  return r;
}

const ElevatorType* find_elevator(std::string_view name) { return elevators().find(name); }

constexpr unsigned kBlkdevMinRq = 4;                        // BLKDEV_MIN_RQ
constexpr unsigned kBlkdevDefaultRq = 128;                  // BLKDEV_DEFAULT_RQ
constexpr unsigned kMaxSchedRq = 16 * kBlkdevDefaultRq;     // MAX_SCHED_RQ

// blk_mq_default_nr_requests.
unsigned default_nr_requests(const QueueImpl* q) {
  return 2 * std::min(q->set_->cfg().queue_depth, unsigned{kBlkdevDefaultRq});
}

void free_sched_tags(QueueImpl* q) {
  for (HwCtxImpl* h : q->hctxs_) {
    if (h->sched_tags_store) free_static_rqs(q->set_, h->sched_tags_store.get(), h->queue_num);
    h->sched_tags_store.reset();
    h->sched_tags = nullptr;
  }
  if (q->shared_sched_tags_) free_static_rqs(q->set_, q->shared_sched_tags_.get(), 0);
  q->shared_sched_tags_.reset();
}

Status alloc_sched_tags(QueueImpl* q, unsigned depth) {
  const bool rr = q->set_->cfg().flags & kTagSetTagRR;
  const unsigned resv = q->set_->cfg().reserved_tags;
  if (q->set_->shared_hctx_tags()) {
    q->shared_sched_tags_ = std::make_unique<Tags>(depth + resv, resv, rr);
    if (Status s = alloc_static_rqs(q->set_, q->shared_sched_tags_.get(), 0); !s) return s;
    for (HwCtxImpl* h : q->hctxs_) h->sched_tags = q->shared_sched_tags_.get();
    return Status::OK();
  }
  for (HwCtxImpl* h : q->hctxs_) {
    h->sched_tags_store = std::make_unique<Tags>(depth + resv, resv, rr);
    if (Status s = alloc_static_rqs(q->set_, h->sched_tags_store.get(), h->queue_num); !s) return s;
    h->sched_tags = h->sched_tags_store.get();
  }
  return Status::OK();
}

void exit_current(QueueImpl* q) {
  ElevatorQueue* eq = q->elevator_;
  if (!eq) return;
  const ElevatorOps& ops = eq->type->ops;
  for (HwCtxImpl* h : q->hctxs_)
    if (ops.exit_hctx) ops.exit_hctx(h, h->queue_num);
  ops.exit_sched(eq);
  elv_hash_free(eq);
  q->elevator_ = nullptr;
  q->elevator_store_.reset();
  q->sq_sched_ = false;
  q->stats_enabled_.store(false);
  free_sched_tags(q);
  q->nr_requests_ = q->set_->cfg().queue_depth;
  q->async_depth_ = q->nr_requests_;
}

Status init_new(QueueImpl* q, const ElevatorType* t) {
  q->nr_requests_ = default_nr_requests(q);
  q->async_depth_ = q->nr_requests_;
  if (Status s = alloc_sched_tags(q, q->nr_requests_); !s) {
    free_sched_tags(q);
    return s;
  }
  auto eq = std::make_unique<ElevatorQueue>();
  eq->type = t;
  eq->queue = q;
  elv_hash_alloc(eq.get());
  if (Status s = t->ops.init_sched(q, eq.get()); !s) {
    elv_hash_free(eq.get());
    free_sched_tags(q);
    return s;
  }
  for (HwCtxImpl* h : q->hctxs_) {
    if (!t->ops.init_hctx) continue;
    if (Status s = t->ops.init_hctx(h, h->queue_num); !s) {
      for (HwCtxImpl* g : q->hctxs_) {
        if (g == h) break;
        if (t->ops.exit_hctx) t->ops.exit_hctx(g, g->queue_num);
      }
      t->ops.exit_sched(eq.get());
      elv_hash_free(eq.get());
      free_sched_tags(q);
      return s;
    }
  }
  q->sq_sched_ = t->queue_wide;
  q->elevator_store_ = std::move(eq);
  q->elevator_ = q->elevator_store_.get();
  return Status::OK();
}

// Runs fn with the queue frozen and quiesced: no request exists and no
// dispatch runs, so scheduler state can change hands.
template <typename Fn>
Status with_queue_frozen(QueueImpl* q, Fn&& fn) {
  q->freeze_start();
  q->freeze_wait();
  // Queue::quiesce's protocol: pairs with core.h:QueueImpl::dispatch_enter
  // and quiesced(), see queue.cc:wait_dispatch_idle.
  q->quiesce_depth_.fetch_add(1, std::memory_order_seq_cst);
  q->wait_dispatch_idle();
  Status s = fn();
  if (q->quiesce_depth_.fetch_sub(1) == 1) run_hw_queues_impl(q, true);
  q->unfreeze_impl();
  return s;
}

}  // namespace

Status register_elevator(const ElevatorType* type) { return elevators().add(type); }

std::vector<std::string> registered_elevators() { return elevators().names(); }

// elevator_get_default: none for no_sched, for several hw queues without a
// shared tag bitmap; mq-deadline otherwise (when it is registered).
Status elevator_init_default(QueueImpl* q) {
  q->nr_requests_ = q->set_->cfg().queue_depth;
  q->async_depth_ = q->nr_requests_;
  const uint32_t f = q->set_->cfg().flags;
  if (f & (kTagSetNoSched | kTagSetNoSchedByDefault)) return Status::OK();
  if (q->nr_hw_queues_ != 1 && !(f & kTagSetSharedTags)) return Status::OK();
  const ElevatorType* t = find_elevator("mq-deadline");
  if (!t) return Status::OK();
  std::lock_guard<std::mutex> g(q->sysfs_lock_);
  // The queue is on its set's list already: an update_nr_hw_queues that
  // ends now restarts its requeue work, whose run reads the elevator. As
  // the kernel's elevator_init_mq freezes the new queue, attach frozen and
  // quiesced (no I/O yet: immediate).
  return with_queue_frozen(q, [&] { return init_new(q, t); });
}

Status elevator_switch(QueueImpl* q, std::string_view name) {
  std::string n(name);
  while (!n.empty() && (n.back() == '\n' || n.back() == ' ')) n.pop_back();
  const bool none = n == "none";
  const ElevatorType* t = none ? nullptr : find_elevator(n);
  if (!none && !t) return Status::invalid("queue/scheduler: unknown scheduler '" + n + "'; available: " + elevator_list(q));
  if (!none && (q->set_->cfg().flags & kTagSetNoSched))
    return Status::invalid("queue/scheduler: this tag set has no_sched; only 'none' is possible");
  std::lock_guard<std::mutex> g(q->sysfs_lock_);
  // A new queue created with "none" has no depth yet: the tag-set depth.
  if (none && !q->elevator_ && q->nr_requests_ == 0) {
    q->nr_requests_ = q->set_->cfg().queue_depth;
    q->async_depth_ = q->nr_requests_;
  }
  if ((none && !q->elevator_) || (t && q->elevator_ && q->elevator_->type == t)) return Status::OK();
  return with_queue_frozen(q, [&]() -> Status {
    exit_current(q);
    if (none) return Status::OK();
    return init_new(q, t);
  });
}

void elevator_exit(QueueImpl* q) {
  std::lock_guard<std::mutex> g(q->sysfs_lock_);
  exit_current(q);
}

std::string elevator_list(const QueueImpl* q) {
  const std::string cur = q->elevator_ ? q->elevator_->type->name : "none";
  std::string out = cur == "none" ? "[none]" : "none";
  if (!(q->set_->cfg().flags & kTagSetNoSched)) {
    for (const std::string& n : registered_elevators()) out += n == cur ? " [" + n + "]" : " " + n;
  }
  return out;
}

unsigned rq_ctx_index(const Request* rq) {
  return rq->mq_ctx->index_hw[static_cast<unsigned>(rq->mq_hctx->type)];
}
unsigned hctx_nr_ctx(const HwCtx* hctx) { return static_cast<unsigned>(static_cast<const HwCtxImpl*>(hctx)->ctxs.size()); }
unsigned current_ctx_index(const HwCtx* hctx) {
  const HwCtxImpl* h = static_cast<const HwCtxImpl*>(hctx);
  SwCtx* ctx = h->q->ctx(base::this_cpu());
  return ctx->index_hw[static_cast<unsigned>(h->type)];
}
unsigned queue_nr_requests(const Queue* q) { return to_impl(q)->nr_requests_; }
unsigned queue_async_depth(const Queue* q) { return to_impl(q)->async_depth_; }
void set_queue_async_depth(Queue* q, unsigned depth) {
  QueueImpl* qi = to_impl(q);
  qi->async_depth_ = std::clamp(depth, 1u, qi->nr_requests_);
}
unsigned queue_nr_hw_queues(const Queue* q) { return to_impl(q)->nr_hw_queues_; }
HwCtx* queue_hctx(Queue* q, unsigned idx) { return to_impl(q)->hctx(idx); }
HwCtx* current_hctx(Queue* q, ReqOp op, uint32_t bio_flags) {
  return to_impl(q)->ctx(base::this_cpu())->hctxs[static_cast<unsigned>(hctx_type_for(op, bio_flags))];
}
bool queue_rotational(const Queue* q) { return to_impl(q)->limits_.rotational; }
void set_min_shallow_depth(Queue* q, unsigned depth) {
  for (HwCtxImpl* h : to_impl(q)->hctxs_)
    if (h->sched_tags) h->sched_tags->bitmap_tags.set_min_shallow_depth(depth);
}
void queue_enable_stats(Queue* q) { to_impl(q)->stats_enabled_.store(true); }
ElevatorQueue* queue_elevator(Queue* q) { return to_impl(q)->elevator_; }

// queue/async_depth keeps its proportion of nr_requests when nr_requests
// changes (blk_mq_update_nr_requests): a scheduler that left it at
// nr_requests keeps no limit, kyber's 75 % stays 75 %. Keeping the old
// absolute value instead left writes 2 tags after nr_requests went from 2 to
// 64 on a depth-1 device, and mq-deadline's write batches ended after two.
static unsigned scaled_async_depth(const QueueImpl* q, unsigned nr) {
  if (q->nr_requests_ == 0) return nr;
  const uint64_t scaled = uint64_t(q->async_depth_) * nr / q->nr_requests_;
  return static_cast<unsigned>(std::clamp<uint64_t>(scaled, 1, nr));
}

Status set_nr_requests(QueueImpl* q, unsigned nr) {
  std::lock_guard<std::mutex> g(q->sysfs_lock_);
  if (nr < kBlkdevMinRq) nr = kBlkdevMinRq;  // as the kernel clamps
  if (!q->elevator_) {
    const unsigned depth = q->set_->cfg().queue_depth;
    if (nr > depth) return Status::invalid("queue/nr_requests: at most the queue depth (" + std::to_string(depth) + ") without a scheduler");
    const unsigned resv = q->set_->cfg().reserved_tags;
    if (nr <= resv) return Status::invalid("queue/nr_requests: must exceed the reserved tags (" + std::to_string(resv) + ")");
    return with_queue_frozen(q, [&]() -> Status {
      for (HwCtxImpl* h : q->hctxs_) h->tags->bitmap_tags.resize(nr - h->tags->nr_reserved);
      q->async_depth_ = scaled_async_depth(q, nr);
      q->nr_requests_ = nr;
      return Status::OK();
    });
  }
  if (nr > kMaxSchedRq) return Status::invalid("queue/nr_requests: at most 2048 with a scheduler");
  return with_queue_frozen(q, [&]() -> Status {
    free_sched_tags(q);
    if (Status s = alloc_sched_tags(q, nr); !s) return s;
    q->async_depth_ = scaled_async_depth(q, nr);
    q->nr_requests_ = nr;
    if (q->elevator_->type->ops.depth_updated) q->elevator_->type->ops.depth_updated(q);
    return Status::OK();
  });
}

}  // namespace blkmq
