// Bio-into-request merging without a scheduler: into the plug's last
// request and into the software queue (blk-merge.c, the ctx-list scan).
#include "core/core.h"

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

// Size and segment limits; a request that fails them takes no more merges.
bool fits(QueueImpl* q, Request* rq, const Bio* bio, unsigned nr_segs) {
  const uint64_t max_bytes = static_cast<uint64_t>(q->limits_.max_sectors) << kSectorShift;
  if (rq->data_len + static_cast<uint64_t>(bio->size) > max_bytes ||
      rq->nr_phys_segments + nr_segs > q->limits_.max_segments) {
    rq->rq_flags |= kRqfNoMerge;
    return false;
  }
  return true;
}

MergeResult attempt_bio_merge(QueueImpl* q, Request* rq, Bio* bio, unsigned nr_segs) {
  if (!merge_allowed(q, rq, bio)) return MergeResult::none;
  if (rq->end_sector() == bio->sector) {
    if (!fits(q, rq, bio, nr_segs)) return MergeResult::failed;
    rq->biotail->bi_next = bio;
    rq->biotail = bio;
  } else if (rq->sector == bio->end_sector()) {
    if (!fits(q, rq, bio, nr_segs)) return MergeResult::failed;
    bio->bi_next = rq->bio;
    rq->bio = bio;
    rq->sector = bio->sector;
  } else {
    return MergeResult::none;
  }
  bio->cookie = rq->mq_hctx->queue_num;
  rq->data_len += bio->size;
  rq->nr_phys_segments = static_cast<uint16_t>(rq->nr_phys_segments + nr_segs);
  account_merge(q, rq);
  return MergeResult::ok;
}

}  // namespace

bool bio_mergeable(const Bio* bio) {
  return op_has_data(bio->op) && !(bio->flags & (kBioNomerge | kBioPreflush | kBioFua));
}

bool rq_mergeable(const Request* rq) {
  return op_has_data(rq->op) && !(rq->cmd_flags & (kBioNomerge | kBioPreflush | kBioFua)) &&
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

bool ctx_bio_merge(QueueImpl* q, SwCtx* ctx, HctxType type, Bio* bio, unsigned nr_segs) {
  // The ctx's bit in its hctx's ctx_map is set (under ctx->lock) whenever
  // the list is non-empty: an empty list is skipped without the lock.
  HwCtxImpl* h = ctx->hctxs[static_cast<unsigned>(type)];
  const unsigned ht = static_cast<unsigned>(h->type);
  if (!h->ctx_map.test(ctx->index_hw[ht])) return false;
  ListNode& list = ctx->rq_lists[ht];
  bool merged = false;
  ctx->lock.lock();
  unsigned scanned = 0;
  for (ListNode* n = list.prev; n != &list && scanned < kCtxMergeScan; n = n->prev, scanned++) {
    Request* rq = list_entry<Request, &Request::queuelist>(n);
    MergeResult r = attempt_bio_merge(q, rq, bio, nr_segs);
    if (r == MergeResult::none) continue;
    merged = r == MergeResult::ok;
    break;
  }
  ctx->lock.unlock();
  return merged;
}

}  // namespace blkmq
