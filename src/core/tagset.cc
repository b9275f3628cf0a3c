// Tag sets: validation, tag maps and static requests per hctx, the CPU to
// hctx maps, and update_nr_hw_queues.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "base/percpu.h"
#include "core/core.h"

namespace blkmq {
namespace {

size_t rq_size_for(unsigned cmd_size) { return (sizeof(Request) + cmd_size + 63) & ~size_t{63}; }

}  // namespace

Status alloc_static_rqs(TagSetImpl* set, Tags* tags, unsigned hctx_idx) {
  tags->rq_size = rq_size_for(set->cfg().cmd_size);
  tags->rq_mem = std::aligned_alloc(64, tags->rq_size * tags->nr_tags);
  if (!tags->rq_mem) return Status::error(ENOMEM, "out of memory allocating requests");
  std::memset(tags->rq_mem, 0, tags->rq_size * tags->nr_tags);
  for (unsigned i = 0; i < tags->nr_tags; i++) {
    auto* rq = new (static_cast<char*>(tags->rq_mem) + i * tags->rq_size) Request();
    tags->static_rqs[i] = rq;
    if (set->cfg().ops->init_request) {
      if (int err = set->cfg().ops->init_request(set, rq, hctx_idx))
        return Status::error(err < 0 ? -err : err, "driver init_request failed");
    }
  }
  return Status::OK();
}

void free_static_rqs(TagSetImpl* set, Tags* tags, unsigned hctx_idx) {
  if (!set->cfg().ops->exit_request) return;
  for (Request* rq : tags->static_rqs)
    if (rq) set->cfg().ops->exit_request(set, rq, hctx_idx);
}

Status TagSetImpl::alloc_tags(unsigned nr_hw) {
  const bool rr = cfg_.flags & kTagSetTagRR;
  std::vector<std::unique_ptr<Tags>> owned;
  std::vector<Tags*> tags(nr_hw, nullptr);
  std::unique_ptr<Tags> shared;
  if (shared_hctx_tags()) {
    shared = std::make_unique<Tags>(cfg_.queue_depth, cfg_.reserved_tags, rr);
    if (Status s = alloc_static_rqs(this, shared.get(), 0); !s) return s;
    for (auto& t : tags) t = shared.get();
  } else {
    for (unsigned i = 0; i < nr_hw; i++) {
      owned.push_back(std::make_unique<Tags>(cfg_.queue_depth, cfg_.reserved_tags, rr));
      if (Status s = alloc_static_rqs(this, owned.back().get(), i); !s) return s;
      tags[i] = owned.back().get();
    }
  }
  // The old maps may still be referenced by kblockd work of retired hctxs:
  // keep them until the set dies.
  for (auto& t : owned_tags_) retired_tags_.push_back(std::move(t));
  if (shared_tags_) retired_tags_.push_back(std::move(shared_tags_));
  owned_tags_ = std::move(owned);
  shared_tags_ = std::move(shared);
  tags_ = std::move(tags);
  nr_hw_queues_ = nr_hw;
  return Status::OK();
}

// Spreads CPUs over each type's queues in contiguous groups; a type without
// queues uses the default map.
void TagSetImpl::map_queues() {
  const unsigned ncpu = base::possible_cpus();
  unsigned offset = 0;
  for (unsigned t = 0; t < kNrHctxTypes; t++) {
    QueueMap& m = maps_[t];
    m.mq_map.assign(ncpu, 0);
    m.nr_queues = cfg_.nr_queues[t];
    if (!m.nr_queues) {
      m = maps_[0];
      continue;
    }
    m.queue_offset = offset;
    for (unsigned c = 0; c < ncpu; c++) m.mq_map[c] = offset + (c * m.nr_queues) / ncpu;
    offset += m.nr_queues;
  }
}

// Caller holds lock_. The kernel freezes every queue of the set around the
// change (blk_mq_update_tag_set_shared); so do we, except the queue being
// added or removed, which has no I/O.
void TagSetImpl::set_queue_shared(bool shared, QueueImpl* except) {
  if (queue_shared_.load() == shared) return;
  for (QueueImpl* q : queues_)
    if (q != except) q->freeze_start();
  for (QueueImpl* q : queues_)
    if (q != except) q->freeze_wait();
  queue_shared_.store(shared);
  for (QueueImpl* q : queues_)
    if (q != except) q->unfreeze_impl();
}

Status TagSetImpl::init() {
  if (!cfg_.ops || !cfg_.ops->queue_rq) return Status::invalid("tag set: ops with queue_rq are required");
  if (cfg_.nr_queues[0] < 1) return Status::invalid("tag set: at least one default hw queue is required");
  if (cfg_.queue_depth < 1 || cfg_.queue_depth > kMaxQueueDepth)
    return Status::invalid("tag set: queue_depth must be 1.." + std::to_string(kMaxQueueDepth));
  if (cfg_.reserved_tags >= cfg_.queue_depth)
    return Status::invalid("tag set: reserved_tags must be below queue_depth");
  if ((cfg_.ops->get_budget == nullptr) != (cfg_.ops->put_budget == nullptr))
    return Status::invalid("tag set: get_budget and put_budget must be defined as a pair");
  const unsigned ncpu = base::possible_cpus();
  if (cfg_.nr_queues[1] == 0 && cfg_.nr_queues[2] == 0 && cfg_.nr_queues[0] > ncpu) cfg_.nr_queues[0] = ncpu;
  if (!cfg_.timeout_ms) cfg_.timeout_ms = kDefaultTimeoutMs;
  map_queues();
  return alloc_tags(cfg_.nr_queues[0] + cfg_.nr_queues[1] + cfg_.nr_queues[2]);
}

TagSetImpl::~TagSetImpl() {
  if (shared_tags_) free_static_rqs(this, shared_tags_.get(), 0);
  for (size_t i = 0; i < owned_tags_.size(); i++) free_static_rqs(this, owned_tags_[i].get(), static_cast<unsigned>(i));
  for (auto& t : retired_tags_) free_static_rqs(this, t.get(), 0);
}

TagSet::~TagSet() = default;

Result<std::unique_ptr<TagSet>> TagSet::create(const TagSetConfig& cfg) {
  auto set = std::make_unique<TagSetImpl>(cfg);
  if (Status s = set->init(); !s) return s;
  return std::unique_ptr<TagSet>(std::move(set));
}

const TagSetConfig& TagSet::config() const { return static_cast<const TagSetImpl*>(this)->cfg_; }
unsigned TagSet::nr_hw_queues() const { return static_cast<const TagSetImpl*>(this)->nr_hw_queues_; }

Status update_nr_hw_queues_locked(TagSetImpl* set, unsigned nr_default, unsigned nr_poll);

// Freezes every queue of the set (so no request exists), rebuilds tags and
// hctxs for the new count, and unfreezes. On an init_hctx failure the old
// count is restored.
Status TagSet::update_nr_hw_queues(unsigned nr_default, unsigned nr_poll) {
  TagSetImpl* set = static_cast<TagSetImpl*>(this);
  if (nr_default < 1) return Status::invalid("nr_hw_queues: at least one default queue");
  std::unique_lock<std::shared_mutex> ul(set->update_lock_);
  // Scheduler state is per hctx: detach each queue's scheduler first and
  // attach it again afterwards, as the kernel does (blk_mq_elv_switch_none).
  std::vector<std::pair<QueueImpl*, std::string>> saved;
  {
    std::lock_guard<std::mutex> l(set->lock_);
    for (QueueImpl* q : set->queues_)
      if (q->elevator_) saved.emplace_back(q, q->elevator_->type->name);
  }
  // Switching to none only frees the scheduler: it cannot fail.
  for (auto& [q, name] : saved) (void)elevator_switch(q, "none");
  Status st = update_nr_hw_queues_locked(set, nr_default, nr_poll);
  for (auto& [q, name] : saved) {
    Status back = elevator_switch(q, name);
    if (!back && st) st = back;
  }
  return st;
}

Status update_nr_hw_queues_locked(TagSetImpl* set, unsigned nr_default, unsigned nr_poll) {
  std::lock_guard<std::mutex> l(set->lock_);
  const unsigned ncpu = base::possible_cpus();
  if (set->cfg_.nr_queues[1] == 0 && nr_poll == 0 && nr_default > ncpu) nr_default = ncpu;
  for (QueueImpl* q : set->queues_) q->freeze_start();
  for (QueueImpl* q : set->queues_) q->freeze_wait();
  for (QueueImpl* q : set->queues_) q->quiesce();
  // Frozen, nothing is in flight, so nothing re-arms these until the end.
  for (QueueImpl* q : set->queues_) q->stop_hctx_walkers();
  const unsigned old[kNrHctxTypes] = {set->cfg_.nr_queues[0], set->cfg_.nr_queues[1], set->cfg_.nr_queues[2]};
  auto apply = [&](unsigned d, unsigned p) -> Status {
    set->cfg_.nr_queues[0] = d;
    set->cfg_.nr_queues[2] = p;
    set->map_queues();
    if (Status s = set->alloc_tags(d + set->cfg_.nr_queues[1] + p); !s) return s;
    for (QueueImpl* q : set->queues_) {
      q->exit_hctxs();
      if (Status s = q->init_hctxs(set->nr_hw_queues_); !s) return s;
      q->map_swqueues();
    }
    return Status::OK();
  };
  Status st = apply(nr_default, nr_poll);
  if (!st) {
    Status back = apply(old[0], old[2]);
    if (!back) st = Status::error(st.code(), st.message() + "; restoring the old count failed too: " + back.message());
  }
  for (QueueImpl* q : set->queues_) q->unquiesce();
  for (QueueImpl* q : set->queues_) q->unfreeze_impl();
  for (QueueImpl* q : set->queues_) q->restart_hctx_walkers();
  return st;
}

}  // namespace blkmq
