// Bio-into-request merging without a scheduler: into the plug's last
// request and into the software queue (blk-merge.c, the ctx-list scan).
#include <algorithm>

#include "core/core.h"
#include "core/trace.h"

namespace blkmq {
namespace {

constexpr unsigned kCtxMergeScan = 8;

enum class MergeResult : uint8_t { none, ok, failed };

bool merge_allowed(QueueImpl* q, Request* rq, const Bio* bio) {
  if (!rq_mergeable(rq) || rq->op != bio->op || rq->ioprio != bio->ioprio) return false;
  if (q->elevator_ && q->elevator_->type->ops.allow_merge &&
      !q->elevator_->type->ops.allow_merge(q, rq, bio))
    return false;
  return true;
}

void account_merge(QueueImpl* q, Request* rq) {
  if (!(rq->rq_flags & kRqfIoStat)) return;
  PartStat& st = q->stats_[base::this_cpu()];
  st.merges[stat_group(rq->op)].fetch_add(1, std::memory_order_relaxed);
}

// The size cap of one request of this op (blk_queue_get_max_sectors):
// discards and zeroing have their own limits, everything else max_sectors.
uint64_t max_request_bytes(const QueueImpl* q, ReqOp op) {
  const QueueLimits& l = q->limits_;
  uint64_t sectors = l.max_sectors;
  if (op == ReqOp::discard) sectors = l.max_discard_sectors;
  else if (op == ReqOp::write_zeroes) sectors = l.max_write_zeroes_sectors;
  // A request's length is 32 bits (data_len, the kernel's __data_len).
  const uint64_t cap = UINT32_MAX / l.logical_block_size * l.logical_block_size;
  return std::min<uint64_t>(sectors << kSectorShift, cap);
}

// Whether [start, end) crosses a multiple of chunk_sectors (a zone's
// end): no request may (blk_rq_get_max_sectors).
bool crosses_chunk(const QueueImpl* q, uint64_t start, uint64_t end) {
  const uint64_t chunk = q->limits_.chunk_sectors;
  return chunk && ((start ^ (end - 1)) & ~(chunk - 1));
}

// Size and segment limits; a request that fails them takes no more merges.
bool fits(QueueImpl* q, Request* rq, const Bio* bio, unsigned nr_segs) {
  const uint64_t max_bytes = max_request_bytes(q, rq->op);
  if (rq->data_len + static_cast<uint64_t>(bio->size) > max_bytes ||
      rq->nr_phys_segments + nr_segs > q->limits_.max_segments) {
    rq->rq_flags |= kRqfNoMerge;
    return false;
  }
  return !crosses_chunk(q, std::min(rq->sector, bio->sector), std::max(rq->end_sector(), bio->end_sector()));
}

void link_back(QueueImpl* q, Request* rq, Bio* bio) {
  trace_bio(q, bio, blktrace::kBackMerge);
  rq->biotail->bi_next = bio;
  rq->biotail = bio;
}

bool adjacent(const Request* rq, const Bio* bio) {
  return rq->end_sector() == bio->sector || rq->sector == bio->end_sector();
}

// What every bio merged into rq adds to it.
void merged(QueueImpl* q, Request* rq, Bio* bio, unsigned nr_segs) {
  rq_qos_merge(q, rq, bio);
  bio_set_cookie(bio, rq->mq_hctx->queue_num);
  rq->data_len += bio->size;
  rq->nr_phys_segments = static_cast<uint16_t>(rq->nr_phys_segments + nr_segs);
  account_merge(q, rq);
}

// attempt_bio_merge once the positions touch.
[[gnu::noinline]] MergeResult merge_adjacent(QueueImpl* q, Request* rq, Bio* bio, unsigned nr_segs) {
  if (!merge_allowed(q, rq, bio)) return MergeResult::none;
  if (rq->end_sector() == bio->sector) {
    if (!fits(q, rq, bio, nr_segs)) return MergeResult::failed;
    link_back(q, rq, bio);
    // It writes at the pointer of the zone rq holds: the plug moves on.
    if (rq->rq_flags & kRqfZoneWplug) [[unlikely]]
      q->zwp_->bio_merged(bio);
  } else if (rq->sector == bio->end_sector()) {
    // In front of a zone's write at its pointer is behind the pointer.
    if (rq->rq_flags & kRqfZoneWplug) [[unlikely]]
      return MergeResult::none;
    if (!fits(q, rq, bio, nr_segs)) return MergeResult::failed;
    trace_bio(q, bio, blktrace::kFrontMerge);
    bio->bi_next = rq->bio;
    rq->bio = bio;
    rq->sector = bio->sector;
  } else {
    return MergeResult::none;
  }
  merged(q, rq, bio, nr_segs);
  return MergeResult::ok;
}

// Position first, inline: it is the cheap test and random I/O fails it.
MergeResult attempt_bio_merge(QueueImpl* q, Request* rq, Bio* bio, unsigned nr_segs) {
  return adjacent(rq, bio) ? merge_adjacent(q, rq, bio, nr_segs) : MergeResult::none;
}

// Newest requests first, at most kCtxMergeScan of them: a merge is most
// likely with what was just queued, and the scan stays bounded under a lock.
bool list_merge(QueueImpl* q, ListNode* list, Bio* bio, unsigned nr_segs) {
  unsigned scanned = 0;
  for (ListNode* n = list->prev; n != list && scanned < kCtxMergeScan; n = n->prev, scanned++) {
    Request* rq = list_entry<Request, &Request::queuelist>(n);
    MergeResult r = attempt_bio_merge(q, rq, bio, nr_segs);
    if (r == MergeResult::none) continue;
    return r == MergeResult::ok;
  }
  return false;
}

// Reads, writes and discards merge, as the kernel's rq_mergeable has it;
// flushes, zeroing, appends and zone management never do.
bool mergeable_op(ReqOp op) { return op == ReqOp::read || op == ReqOp::write || op == ReqOp::discard; }

}  // namespace

bool bio_mergeable(const Bio* bio) {
  return mergeable_op(bio->op) && !(bio->flags & (kBioNomerge | kBioPreflush | kBioFua));
}

bool back_merge_plugged(QueueImpl* q, Request* rq, Bio* bio, unsigned nr_segs) {
  if (!bio_mergeable(bio) || rq->end_sector() != bio->sector || !merge_allowed(q, rq, bio) ||
      !fits(q, rq, bio, nr_segs))
    return false;
  link_back(q, rq, bio);
  merged(q, rq, bio, nr_segs);
  return true;
}

bool rq_mergeable(const Request* rq) {
  return mergeable_op(rq->op) && !(rq->cmd_flags & (kBioNomerge | kBioPreflush | kBioFua)) &&
         !(rq->rq_flags & (kRqfNoMerge | kRqfFlushSeq));
}

unsigned bio_segments(const Bio* bio) { return bio->nr_vecs ? bio->nr_vecs : 1; }

bool attempt_plug_merge(QueueImpl* q, Bio* bio, unsigned nr_segs) {
  PlugState* p = current_plug_state();
  if (!p || p->mq_list.empty()) return false;
  Request* last = p->mq_list.tail;
  if (last->q == q) return attempt_bio_merge(q, last, bio, nr_segs) == MergeResult::ok;
  if (!p->multiple_queues) return false;
  for (Request* rq = p->mq_list.head; rq; rq = rq->rq_next) {
    if (rq->q != q) continue;
    return attempt_bio_merge(q, rq, bio, nr_segs) == MergeResult::ok;
  }
  return false;
}

namespace {

[[gnu::noinline]] bool ctx_list_merge(QueueImpl* q, SwCtx* ctx, unsigned ht, Bio* bio, unsigned nr_segs) {
  ctx->lock.lock();
  const bool merged = list_merge(q, &ctx->rq_lists[ht], bio, nr_segs);
  ctx->lock.unlock();
  return merged;
}

}  // namespace

bool ctx_bio_merge(QueueImpl* q, SwCtx* ctx, HctxType type, Bio* bio, unsigned nr_segs) {
  // The ctx's bit in its hctx's ctx_map is set (under ctx->lock) whenever
  // the list is non-empty: an empty list is skipped without the lock, in
  // the inlined part.
  HwCtxImpl* h = ctx->hctxs[static_cast<unsigned>(type)];
  const unsigned ht = static_cast<unsigned>(h->type);
  return h->ctx_map.test(ctx->index_hw[ht]) && ctx_list_merge(q, ctx, ht, bio, nr_segs);
}

bool bio_list_merge(Queue* q, ListNode* list, Bio* bio, unsigned nr_segs) {
  return list_merge(to_impl(q), list, bio, nr_segs);
}

}  // namespace blkmq

// ---------------------------------------------------------------------------
// Merging through the elevator (elevator.c's rqhash, blk_mq_sched_try_merge,
// elv_attempt_insert_merge). Called with the scheduler's lock held.

namespace blkmq {
namespace {

constexpr unsigned kElvHashBits = 6;  // ELV_HASH_BITS
// Fibonacci hashing's multiplier, 2^64 / phi. The kernel's hash_64 uses
// GOLDEN_RATIO_64 (0x61C8864680B583EB) instead; either spreads the end
// sectors over the buckets, and which bucket holds a request is not
// visible outside the hash.
constexpr uint64_t kHashMultiplier64 = 0x9E3779B97F4A7C15ull;

struct ElvHash {
  ListNode buckets[1u << kElvHashBits];
};

ElvHash* hash_of(ElevatorQueue* eq) { return static_cast<ElvHash*>(eq->hash); }

ListNode& bucket(ElevatorQueue* eq, uint64_t end) {
  return hash_of(eq)->buckets[(end * kHashMultiplier64) >> (64 - kElvHashBits)];
}

Request* rq_of_hash(ListNode* n) { return list_entry<Request, &Request::hash_node>(n); }

// attempt_merge once the two touch: rq absorbs next.
[[gnu::noinline]] bool merge_touching(QueueImpl* q, Request* rq, Request* next) {
  if (!rq_mergeable(rq) || !rq_mergeable(next) || rq->op != next->op || rq->ioprio != next->ioprio ||
      rq->ioc != next->ioc)
    return false;
  const uint64_t max_bytes = max_request_bytes(q, rq->op);
  if (uint64_t(rq->data_len) + next->data_len > max_bytes ||
      rq->nr_phys_segments + next->nr_phys_segments > q->limits_.max_segments ||
      crosses_chunk(q, rq->sector, next->end_sector()))
    return false;
  // Absorbed, a request holding its zone's plug would never release it.
  if (next->rq_flags & kRqfZoneWplug) return false;
  ElevatorQueue* eq = q->elevator_;
  if (eq->type->ops.allow_merge && next->bio && !eq->type->ops.allow_merge(q, rq, next->bio)) return false;
  trace_rq(next, blktrace::kBackMerge);
  rq->biotail->bi_next = next->bio;
  rq->biotail = next->biotail;
  rq->data_len += next->data_len;
  rq->nr_phys_segments = static_cast<uint16_t>(rq->nr_phys_segments + next->nr_phys_segments);
  for (Bio* b = next->bio; b; b = b->bi_next) bio_set_cookie(b, rq->mq_hctx->queue_num);
  if (next->start_time_ns && next->start_time_ns < rq->start_time_ns) rq->start_time_ns = next->start_time_ns;
  next->bio = next->biotail = nullptr;
  next->data_len = 0;
  // The absorbed request's I/O is now rq's: it is a merge, not an I/O.
  if (next->rq_flags & kRqfIoStat) {
    q->stats_[base::this_cpu()].merges[stat_group(next->op)].fetch_add(1, std::memory_order_relaxed);
    next->rq_flags &= ~kRqfIoStat;
    next->acct.store(0, std::memory_order_relaxed);
  }
  if (eq->type->ops.requests_merged) eq->type->ops.requests_merged(q, rq, next);
  elv_rqhash_del(eq, next);
  if (rq->rq_flags & kRqfElvHashed) {
    elv_rqhash_del(eq, rq);
    elv_rqhash_add(eq, rq);
  }
  eq->last_merge = rq;
  return true;
}

// attempt_merge: rq absorbs next if rq ends where next starts. The position
// test is inline: it is cheap, and random I/O fails it.
bool merge_requests(QueueImpl* q, Request* rq, Request* next) {
  return rq->end_sector() == next->sector && merge_touching(q, rq, next);
}

}  // namespace

void elv_hash_alloc(ElevatorQueue* eq) { eq->hash = new ElvHash(); }
void elv_hash_free(ElevatorQueue* eq) {
  delete hash_of(eq);
  eq->hash = nullptr;
}

void elv_rqhash_add(ElevatorQueue* eq, Request* rq) {
  bucket(eq, rq->end_sector()).push_front(&rq->hash_node);
  rq->rq_flags |= kRqfElvHashed;
}

void elv_rqhash_del(ElevatorQueue* eq, Request* rq) {
  if (rq->rq_flags & kRqfElvHashed) {
    ListNode::unlink(&rq->hash_node);
    rq->rq_flags &= ~kRqfElvHashed;
  }
  if (eq->last_merge == rq) eq->last_merge = nullptr;
}

Request* elv_rqhash_find(ElevatorQueue* eq, uint64_t end_sector) {
  ListNode& b = bucket(eq, end_sector);
  for (ListNode* n = b.next; n != &b;) {
    Request* rq = rq_of_hash(n);
    n = n->next;
    if (!rq_mergeable(rq)) {  // it can take no more merges: forget it
      elv_rqhash_del(eq, rq);
      continue;
    }
    if (rq->end_sector() == end_sector) return rq;
  }
  return nullptr;
}

bool sched_try_merge(Queue* qp, Bio* bio, unsigned nr_segs, Request** absorbed) {
  QueueImpl* q = to_impl(qp);
  ElevatorQueue* eq = q->elevator_;
  *absorbed = nullptr;
  const unsigned nomerges = q->tun_.nomerges.load(std::memory_order_relaxed);
  if (!eq || nomerges >= 2 || !bio_mergeable(bio)) return false;
  Request* rq = nullptr;
  ElvMerge type = ElvMerge::none;
  // The one-hit cache first, then (unless nomerges=1) the hash and the
  // scheduler's front-merge lookup.
  if (Request* lm = eq->last_merge; lm && adjacent(lm, bio) && merge_allowed(q, lm, bio)) {
    type = lm->end_sector() == bio->sector ? ElvMerge::back : ElvMerge::front;
    rq = lm;
  }
  if (!rq && nomerges == 0) {
    Request* h = elv_rqhash_find(eq, bio->sector);
    if (h && merge_allowed(q, h, bio)) {
      rq = h;
      type = ElvMerge::back;
    }
  }
  if (!rq && eq->type->ops.request_merge) {
    Request* f = nullptr;
    ElvMerge t = eq->type->ops.request_merge(q, &f, bio);
    if (t != ElvMerge::none && f && merge_allowed(q, f, bio)) {
      rq = f;
      type = t;
    }
  }
  if (!rq || attempt_bio_merge(q, rq, bio, nr_segs) != MergeResult::ok) return false;
  if (rq->rq_flags & kRqfElvHashed) {
    elv_rqhash_del(eq, rq);
    elv_rqhash_add(eq, rq);
  }
  if (eq->type->ops.request_merged) eq->type->ops.request_merged(q, rq, type);
  eq->last_merge = rq;
  // The grown request may now touch its neighbour.
  if (type == ElvMerge::back && eq->type->ops.next_request) {
    Request* next = eq->type->ops.next_request(q, rq);
    if (next && merge_requests(q, rq, next)) *absorbed = next;
  } else if (type == ElvMerge::front && eq->type->ops.former_request) {
    Request* prev = eq->type->ops.former_request(q, rq);
    if (prev && merge_requests(q, prev, rq)) *absorbed = rq;
  }
  return true;
}

bool sched_try_insert_merge(Queue* qp, Request* rq, ListNode* free_list) {
  QueueImpl* q = to_impl(qp);
  ElevatorQueue* eq = q->elevator_;
  const unsigned nomerges = q->tun_.nomerges.load(std::memory_order_relaxed);
  if (!eq || nomerges >= 2) return false;
  if (eq->last_merge && merge_requests(q, eq->last_merge, rq)) {
    free_list->push_back(&rq->queuelist);
    return true;
  }
  if (nomerges == 1) return false;
  bool merged = false;
  for (;;) {
    Request* prev = elv_rqhash_find(eq, rq->sector);
    if (!prev || prev == rq || !merge_requests(q, prev, rq)) break;
    free_list->push_back(&rq->queuelist);
    merged = true;
    rq = prev;  // the grown request may merge again
  }
  return merged;
}

void free_requests_nonempty(ListNode* list) {
  while (!list->empty()) {
    Request* rq = list_entry<Request, &Request::queuelist>(list->next);
    ListNode::unlink(&rq->queuelist);
    free_request(rq);
  }
}

}  // namespace blkmq
