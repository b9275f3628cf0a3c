// Bio submission: checks, splitting to the queue limits, merging, request
// allocation, and the choice between plugging, inserting and issuing
// directly (blk_mq_submit_bio and __submit_bio).
#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "base/event.h"
#include "blkmq/plug.h"
#include "core/core.h"
#include "core/trace.h"
#include "qos/blkcg.h"
#include "qos/throtl.h"

namespace blkmq {
namespace {

void fail_bio(Bio* bio, BlkStatus st) {
  bio->status = st;
  bio_endio(bio);
}

// A write, discard or zeroing to a read-only device fails with `readonly`;
// a flush without data passes, as the kernel's bio_check_ro lets it. The
// kernel only warns here (old lvm tools write to read-only devices);
// blkmq refuses, so that an image exported read-only stays unchanged.
bool writes_to_read_only(const QueueImpl* q, const Bio* bio) {
  if (bio->op == ReqOp::read || (bio->op == ReqOp::flush && bio->size == 0)) return false;
  return q->tun_.read_only.load(std::memory_order_relaxed);
}

// What the kernel would not let a bio be built from: no vectors or more
// than BIO_MAX_VECS, a null buffer, an address or length the device's DMA
// alignment refuses (blkdev_dio_invalid), lengths that do not add up.
// *max_vec gets the longest vector, for the split check. Forced inline:
// on every data bio's path, and a call here costs a tenth of its work.
[[gnu::always_inline]] inline bool data_vectors_ok(const Bio* bio, uint32_t dma_mask, size_t* max_vec) {
  if (!bio->vec || !bio->nr_vecs || bio->nr_vecs > kBioMaxVecs) return false;
  uint64_t total = 0;
  size_t longest = 0;
  for (uint16_t i = 0; i < bio->nr_vecs; i++) {
    const iovec& v = bio->vec[i];
    if (!v.iov_base && v.iov_len) return false;
    if ((reinterpret_cast<uintptr_t>(v.iov_base) | v.iov_len) & dma_mask) return false;
    total += v.iov_len;
    longest = std::max(longest, v.iov_len);
  }
  *max_vec = longest;
  return total == bio->size;
}

// PREFLUSH and FUA order and persist written data, so only a write may
// carry them, and the empty flush (the kernel's data-less WRITE|PREFLUSH,
// with FUA too), as submit_bio_noacct allows. On a read, discard or
// zeroing they would send the op through the flush machinery, which runs
// its data step as a write: a read would store its buffer, a discard
// would be acknowledged undone. The kernel ends such a bio with its
// default BLK_STS_IOERR; blkmq uses `inval`, its status for a malformed
// bio (docs/ARCHITECTURE.md, departures).
bool flush_flags_ok(const Bio* bio) {
  if (!(bio->flags & (kBioPreflush | kBioFua))) return true;
  return bio->op == ReqOp::write || bio->op == ReqOp::flush;
}

// blk_check_zone_append: at a zone's start, within the zone, within what
// one request takes (an append is never split: it would not be one
// append), on a device that has zones. The kernel's status for each.
[[gnu::noinline]] BlkStatus check_zone_append(const QueueImpl* q, const Bio* bio, size_t* max_vec) {
  const QueueLimits& l = q->limits_;
  if (!l.zoned) return BlkStatus::notsupp;
  if (!data_vectors_ok(bio, l.dma_alignment, max_vec)) return BlkStatus::inval;
  const uint64_t mask = l.chunk_sectors - 1;
  if ((bio->sector & mask) || ((bio->size >> kSectorShift) > l.chunk_sectors)) return BlkStatus::ioerr;
  const uint32_t max_append = l.max_zone_append_sectors ? l.max_zone_append_sectors : l.max_sectors;
  if ((bio->size >> kSectorShift) > std::min(max_append, l.max_sectors) || bio->nr_vecs > l.max_segments ||
      *max_vec > l.max_segment_size)
    return BlkStatus::ioerr;
  return BlkStatus::ok;
}

// Reset, open, close and finish name a zone by its first sector and carry
// nothing; reset-all names none. On a device without zones they are not
// supported (submit_bio_noacct).
[[gnu::noinline]] BlkStatus check_zone_mgmt(const QueueImpl* q, const Bio* bio) {
  const QueueLimits& l = q->limits_;
  if (!l.zoned) return BlkStatus::notsupp;
  if (bio->size || bio->nr_vecs) return BlkStatus::inval;
  if (bio->op == ReqOp::zone_reset_all) return bio->sector ? BlkStatus::inval : BlkStatus::ok;
  if ((bio->sector & (l.chunk_sectors - 1)) || bio->sector >= l.capacity_sectors) return BlkStatus::inval;
  return BlkStatus::ok;
}

// Bad input gets a clear status and touches nothing. For a data bio,
// *max_vec gets its longest vector.
BlkStatus check_bio(const QueueImpl* q, const Bio* bio, size_t* max_vec) {
  if (!flush_flags_ok(bio)) return BlkStatus::inval;
  if (writes_to_read_only(q, bio)) return BlkStatus::readonly;
  const QueueLimits& l = q->limits_;
  // A power of two (checked at queue creation): masks, not divisions.
  const uint64_t lbs_mask = l.logical_block_size - 1;
  switch (bio->op) {
    case ReqOp::flush:
      return bio->size ? BlkStatus::inval : BlkStatus::ok;
    case ReqOp::discard:
      if (!l.max_discard_sectors) return BlkStatus::notsupp;
      break;
    case ReqOp::write_zeroes:
      if (!l.max_write_zeroes_sectors) return BlkStatus::notsupp;
      break;
    case ReqOp::read:
    case ReqOp::write:
      if (!data_vectors_ok(bio, l.dma_alignment, max_vec)) return BlkStatus::inval;
      break;
    case ReqOp::zone_append:
      if (BlkStatus st = check_zone_append(q, bio, max_vec); st != BlkStatus::ok) return st;
      break;
    default:
      if (!op_is_zone_mgmt(bio->op)) return BlkStatus::notsupp;
      return check_zone_mgmt(q, bio);
  }
  if (bio->size == 0 || ((bio->size | (bio->sector << kSectorShift)) & lbs_mask)) return BlkStatus::inval;
  if (bio->end_sector() > l.capacity_sectors || bio->end_sector() < bio->sector) return BlkStatus::inval;
  if ((bio->flags & kBioPolled) && !l.poll) return BlkStatus::notsupp;
  return BlkStatus::ok;
}

// A bio too large for one request is split into children that end into the
// parent (bio_split_to_limits). Not on the fast path: allocates.
struct SplitParent {
  Bio* orig;
  std::atomic<int> remaining;
  std::atomic<uint8_t> status{static_cast<uint8_t>(BlkStatus::ok)};
  std::vector<iovec> vecs;
  std::vector<Bio> children;
};

void split_child_end_io(Bio* child) {
  auto* sp = static_cast<SplitParent*>(child->private_data);
  if (child->status != BlkStatus::ok) {
    uint8_t ok = static_cast<uint8_t>(BlkStatus::ok);
    sp->status.compare_exchange_strong(ok, static_cast<uint8_t>(child->status));
  }
  // Pairs with the other children's drops (this function on their
  // threads): each releases its status CAS above, the last one acquires
  // them all before it ends the parent (bio_endio's __bi_remaining).
  if (sp->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  Bio* orig = sp->orig;
  orig->status = static_cast<BlkStatus>(sp->status.load());
  delete sp;
  bio_endio(orig);
}

// The most bytes one discard or zeroing request may cover (0: no limit
// applies, the op is data-less and not one of these).
uint64_t nodata_max_bytes(const QueueImpl* q, const Bio* bio) {
  const QueueLimits& l = q->limits_;
  uint64_t sectors = 0;
  if (bio->op == ReqOp::discard) sectors = l.max_discard_sectors;
  else if (bio->op == ReqOp::write_zeroes) sectors = l.max_write_zeroes_sectors;
  const uint64_t bytes = sectors << kSectorShift;
  return bytes / l.logical_block_size * l.logical_block_size;
}

// max_vec: the bio's longest vector (from check_bio). Forced inline, as
// data_vectors_ok: every bio asks.
[[gnu::always_inline]] inline bool needs_split(const QueueImpl* q, const Bio* bio, size_t max_vec) {
  if (!op_has_data(bio->op)) {
    const uint64_t max = nodata_max_bytes(q, bio);
    return max && bio->size > max;
  }
  const QueueLimits& l = q->limits_;
  const uint64_t max_bytes = static_cast<uint64_t>(l.max_sectors) << kSectorShift;
  return bio->size > max_bytes || bio->nr_vecs > l.max_segments || max_vec > l.max_segment_size ||
         (l.chunk_sectors && ((bio->sector ^ (bio->end_sector() - 1)) & ~uint64_t{l.chunk_sectors - 1}));
}

// The most bytes a child starting at `sector` may have: max_sectors, and
// no further than the next multiple of chunk_sectors (a zone's end), in
// whole logical blocks (get_max_io_size).
uint64_t child_max_bytes(const QueueLimits& l, uint64_t sector) {
  uint64_t sectors = l.max_sectors;
  if (l.chunk_sectors) sectors = std::min<uint64_t>(sectors, l.chunk_sectors - (sector & (l.chunk_sectors - 1)));
  return (sectors << kSectorShift) / l.logical_block_size * l.logical_block_size;
}

// A discard or zeroing bio over more than the device takes in one request
// becomes children of at most that size (bio_split_discard,
// bio_split_write_zeroes); they carry no data, only a range.
std::unique_ptr<SplitParent> split_nodata_bio(const QueueImpl* q, Bio* bio) {
  auto sp = std::make_unique<SplitParent>();
  sp->orig = bio;
  const uint64_t max = nodata_max_bytes(q, bio);
  if (max == 0) return nullptr;  // a block-size cap below one block: cannot split
  sp->children.resize((bio->size + max - 1) / max);
  uint64_t sector = bio->sector, left = bio->size;
  for (Bio& ch : sp->children) {
    ch.op = bio->op;
    ch.flags = bio->flags;
    ch.ioprio = bio->ioprio;
    ch.ioc = bio->ioc;
    ch.size = static_cast<uint32_t>(std::min(left, max));
    ch.sector = sector;
    sector += ch.size >> kSectorShift;
    left -= ch.size;
    ch.end_io = split_child_end_io;
    ch.private_data = sp.get();
  }
  sp->remaining.store(static_cast<int>(sp->children.size()));
  return sp;
}

// Cuts the data vector into children within max_sectors, max_segments and
// max_segment_size, each a multiple of the logical block size. Returns null
// if the vector cannot be expressed within the limits.
std::unique_ptr<SplitParent> split_bio(const QueueImpl* q, Bio* bio) {
  if (!op_has_data(bio->op)) return split_nodata_bio(q, bio);
  auto sp = std::make_unique<SplitParent>();
  sp->orig = bio;
  const QueueLimits& l = q->limits_;
  std::vector<std::pair<size_t, size_t>> ranges;  // first vec, count
  uint16_t vi = 0;
  size_t voff = 0;
  uint64_t child_sector = bio->sector;
  while (vi < bio->nr_vecs) {
    const uint64_t max_bytes = child_max_bytes(l, child_sector);
    const size_t first = sp->vecs.size();
    uint64_t bytes = 0;
    while (vi < bio->nr_vecs && bytes < max_bytes && sp->vecs.size() - first < l.max_segments) {
      size_t n = std::min<uint64_t>({bio->vec[vi].iov_len - voff, l.max_segment_size, max_bytes - bytes});
      sp->vecs.push_back(iovec{static_cast<char*>(bio->vec[vi].iov_base) + voff, n});
      bytes += n;
      voff += n;
      if (voff == bio->vec[vi].iov_len) {
        vi++;
        voff = 0;
      }
    }
    // Give back a partial trailing block to the next child.
    uint64_t rem = bytes % l.logical_block_size;
    while (rem) {
      iovec& lastv = sp->vecs.back();
      size_t take = std::min<size_t>(rem, lastv.iov_len);
      lastv.iov_len -= take;
      rem -= take;
      bytes -= take;
      if (voff == 0) {  // step the cursor back into the previous vec
        vi--;
        voff = bio->vec[vi].iov_len;
      }
      voff -= take;
      if (lastv.iov_len == 0) sp->vecs.pop_back();
    }
    if (bytes == 0) return nullptr;
    child_sector += bytes >> kSectorShift;
    ranges.emplace_back(first, sp->vecs.size() - first);
  }
  sp->children.resize(ranges.size());
  uint64_t sector = bio->sector;
  for (size_t c = 0; c < ranges.size(); c++) {
    Bio& ch = sp->children[c];
    ch.op = bio->op;
    ch.flags = bio->flags;
    ch.ioprio = bio->ioprio;
    ch.ioc = bio->ioc;
    ch.vec = &sp->vecs[ranges[c].first];
    ch.nr_vecs = static_cast<uint16_t>(ranges[c].second);
    uint64_t bytes = 0;
    for (size_t k = 0; k < ranges[c].second; k++) bytes += ch.vec[k].iov_len;
    ch.size = static_cast<uint32_t>(bytes);
    ch.sector = sector;
    sector += bytes >> kSectorShift;
    ch.end_io = split_child_end_io;
    ch.private_data = sp.get();
  }
  sp->remaining.store(static_cast<int>(ranges.size()));
  return sp;
}

// Forced inline (as try_bio_merge): one caller, on every bio's path. As
// blk_mq_peek_cached_request: the same queue, the hctx the bio maps to
// (through the request's own software queue, so a read type that falls
// back to the default hctx matches), and scheduler tags exactly when a
// scheduler is attached.
[[gnu::always_inline]] inline bool cached_rq_usable(QueueImpl* q, const Request* rq, const Bio* bio) {
  if (rq->q != q || bio->op == ReqOp::flush) return false;
  return rq->mq_ctx->hctxs[static_cast<unsigned>(hctx_type_for(bio->op, bio->flags))] == rq->mq_hctx &&
         bool(rq->rq_flags & kRqfSchedTags) == (q->elevator_ != nullptr);
}

[[gnu::always_inline]] inline bool try_bio_merge(QueueImpl* q, SwCtx* ctx, Bio* bio, unsigned nr_segs) {
  const unsigned nomerges = q->tun_.nomerges.load(std::memory_order_relaxed);
  if (nomerges >= 2 || !bio_mergeable(bio)) return false;
  if (attempt_plug_merge(q, bio, nr_segs)) return true;
  if (q->elevator_) {
    const ElevatorOps& e = q->elevator_->type->ops;
    return e.bio_merge && e.bio_merge(q, bio, nr_segs);
  }
  if (nomerges == 1) return false;  // only the one-hit (plug) merge
  return ctx_bio_merge(q, ctx, hctx_type_for(bio->op, bio->flags), bio, nr_segs);
}

// A zoned queue's request from its first bio, where that bio is more
// than a write holding its zone's plug: one released from the plug takes
// the plugged bios that follow, a native append reports where it wrote
// when it ends.
[[gnu::noinline]] void zoned_prep_request(QueueImpl* q, Request* rq, Bio* bio) {
  if (bio->zwp_flags & kZwpPlugging) {
    rq->rq_flags |= kRqfZoneWplug;
    if (bio->zwp_flags & kZwpFromPlug) q->zwp_->init_request(rq);
  } else if (bio->zwp_flags & kZwpNativeAppend) {
    rq->rq_flags |= kRqfZoneAppend;
  }
}

// The rest of blk_mq_submit_bio once bio has its request: accounting,
// then the flush machinery, the plug, the scheduler or the driver.
[[gnu::always_inline]] inline void issue_new_request(QueueImpl* q, Request* rq, Bio* bio, RqQos* qos,
                                                     unsigned nr_segs, PlugState* plug) {
  trace_bio(q, bio, blktrace::kGetRq);
  if (qos) [[unlikely]] {
    rq->rq_qos_seen = 1;  // issue, requeue and done follow
    rq_qos_track_slow(qos, rq, bio);
  }
  bio_to_request(rq, bio, nr_segs);
  if (bio->zwp_flags) [[unlikely]] {
    if (bio->zwp_flags == kZwpPlugging) rq->rq_flags |= kRqfZoneWplug;
    else zoned_prep_request(q, rq, bio);
  }
  if ((bio->op == ReqOp::flush || (bio->flags & (kBioPreflush | kBioFua))) && insert_flush(rq)) return;

  HwCtxImpl* h = to_impl(rq->mq_hctx);
  const bool seed_b_direct = (q->set_->cfg().flags & kTagSetNoSched) && q->nr_hw_queues_ == 1 &&
                             q->tun_.plug_direct_issue.load(std::memory_order_relaxed);
  if (plug && !seed_b_direct) {
    add_rq_to_plug(plug, rq);
    return;
  }
  const bool is_sync = bio->op == ReqOp::read || (bio->flags & (kBioSync | kBioFua | kBioPreflush));
  // Once inserted, the request may be dispatched and freed by another
  // thread, and with it the usage reference that kept the hctxs in place:
  // without the dispatch epoch around insert and run, update_nr_hw_queues
  // could replace `h` before the run reads it (its scheduler data then
  // null). Its quiesce waits for the epoch.
  if (rq->rq_flags & kRqfUseSched) {
    q->dispatch_enter();
    insert_request(rq, 0);
    // Seed 000: run from the submitter (sync) or punt to kblockd (async).
    run_hw_queue(h, q->tun_.sched_insert_run.load(std::memory_order_relaxed) == SchedInsertRun::async);
    q->dispatch_exit();
  } else if (h->dispatch_busy.load(std::memory_order_relaxed) && (q->nr_hw_queues_ == 1 || !is_sync)) {
    q->dispatch_enter();
    insert_request(rq, 0);
    run_hw_queue(h, true);
    q->dispatch_exit();
  } else {
    q->dispatch_enter();
    try_issue_directly(h, rq);
    q->dispatch_exit();
  }
}

// No request for bio: what it took is given back, and it ends with st.
[[gnu::noinline]] void fail_unissued(QueueImpl* q, RqQos* qos, Bio* bio, BlkStatus st) {
  if (qos) rq_qos_cleanup_slow(qos, bio);
  if (bio->zwp_flags & kZwpPlugging) q->zwp_->unissued_bio_failed(bio);
  q->exit_ref();
  fail_bio(bio, st);
}

// blk_mq_submit_bio for a bio within the limits. The CPU is read at most
// once: the kernel's smp_processor_id() is free, here it is a load from
// the rseq area (a system call where rseq is missing, as under valgrind).
// A bio that takes a plug's cached request uses that request's software
// queue, the CPU this thread allocated the plug's batch on, a few bios
// ago: the kernel's submitter may be preempted and moved between reading
// its CPU and using the queue too, and nothing depends on it being exact.
// Inlined into both callers: the common one is a bio within the limits.
[[gnu::always_inline]] inline void submit_one(QueueImpl* q, Bio* bio) {
  PlugState* plug = current_plug_state();
  Request* rq = nullptr;
  const bool use_cached = plug && !plug->cached_rqs.empty() && cached_rq_usable(q, plug->cached_rqs.head, bio);
  SwCtx* ctx = use_cached ? plug->cached_rqs.head->mq_ctx : q->ctx(base::this_cpu());
  if (!use_cached && !q->enter(bio->flags & kBioNowait)) {
    fail_bio(bio, q->dying_.load() ? BlkStatus::ioerr : BlkStatus::again);
    return;
  }
  const unsigned nr_segs = bio_segments(bio);
  if (try_bio_merge(q, ctx, bio, nr_segs)) {
    if (!use_cached) q->exit_ref();
    return;
  }
  // After the merge, as the kernel: a write that merged rode on its zone's
  // plug already.
  if (q->zwp_) [[unlikely]] {
    if (q->zwp_->plug_bio(bio)) {
      if (!use_cached) q->exit_ref();
      return;
    }
  }
  // One read of the chain for throttle, cleanup and track: it changes only
  // with the queue frozen, and this submitter holds a usage reference. A
  // bio no policy wants skips all of them (rq_qos_wants).
  RqQos* qos = rq_qos_head(q);
  if (qos && !rq_qos_wants(q, bio)) [[likely]]
    qos = nullptr;
  if (use_cached) {
    rq = plug->cached_rqs.pop_front();
    rq_qos_throttle(qos, q, bio);  // blk_mq_use_cached_rq
  } else {
    // Before a tag is taken: a policy may make the submitter sleep here,
    // and it must not sleep on a tag others wait for.
    rq_qos_throttle(qos, q, bio);
    AllocData d{q, bio->flags, bio->op};
    d.nowait = bio->flags & kBioNowait;
    d.ctx = ctx;
    if (plug) {
      d.nr_tags = plug->nr_ios;
      d.cached = &plug->cached_rqs;
      plug->nr_ios = 1;
    }
    rq = alloc_request(d);
    if (!rq) {
      fail_unissued(q, qos, bio, BlkStatus::again);
      return;
    }
  }
  issue_new_request(q, rq, bio, qos, nr_segs, plug);
}

// Each part after the first went back through submit_bio_noacct in the
// kernel, so io.max counts an I/O for it (not its bytes, charged with the
// whole bio: BIO_BPS_THROTTLED). The part takes a reference on the bio's
// blkg, dropped when it ends. True if io.max holds it.
bool throtl_split_part(QueueImpl* q, const Bio* bio, Bio* part) {
  if (!throtl_active(q->throtl_)) return false;
  part->blkg = bio->blkg;
  part->blkg->ref.fetch_add(1, std::memory_order_relaxed);
  part->throtl_flags = kThrotlBpsDone | kThrotlSplitPart;
  return throtl_bio_slow(q, part);
}

[[gnu::noinline]] void submit_split(QueueImpl* q, Bio* bio) {
  std::unique_ptr<SplitParent> sp = split_bio(q, bio);
  if (!sp) {
    fail_bio(bio, BlkStatus::inval);
    return;
  }
  SplitParent* raw = sp.release();  // freed by the last child's end_io
  const size_t n = raw->children.size();
  blkcg_bio_count_splits(bio, static_cast<unsigned>(n - 1));
  for (size_t i = 0; i < n; i++) {
    // The kernel splits off one front part at a time and resubmits the
    // rest: X names each front part and where the rest starts.
    if (i + 1 < n) trace_split(q, &raw->children[i], raw->children[i + 1].sector);
    if (i > 0 && bio->blkg && throtl_split_part(q, bio, &raw->children[i])) continue;
    submit_one(q, &raw->children[i]);
  }
}

// Forced inline: Queue::submit_bio's copy is the fast path, and a second
// caller (submit_bio_throttled) must not turn it into a call.
[[gnu::always_inline]] inline void submit_checked(QueueImpl* q, Bio* bio, size_t max_vec) {
  if (needs_split(q, bio, max_vec)) submit_split(q, bio);
  else submit_one(q, bio);
}

}  // namespace

void bio_endio(Bio* bio) {
  if (bio->qos_queue) [[unlikely]]
    rq_qos_done_bio(bio);
  // blk_zone_write_plug_bio_endio: an append sent as a write is an append
  // again, with its sector where it was written.
  if (bio->zwp_flags) [[unlikely]] {
    if (bio->zwp_flags & kZwpEmulatedAppend) [[unlikely]] {
      bio->op = ReqOp::zone_append;
      if (bio->zwp_flags & kZwpSetNomerge) bio->flags &= ~kBioNomerge;
    }
    bio->zwp_flags = 0;
  }
  blkcg_bio_end(bio);
  bio->end_io(bio);
}

void submit_plugged_bio(QueueImpl* q, Bio* bio) {
  RqQos* qos = rq_qos_head(q);
  if (qos && !rq_qos_wants(q, bio)) qos = nullptr;
  rq_qos_throttle(qos, q, bio);
  AllocData d{q, bio->flags, bio->op};
  Request* rq = alloc_request(d);
  if (!rq) {
    fail_unissued(q, qos, bio, BlkStatus::ioerr);  // only a dying queue refuses a waiting allocation
    return;
  }
  issue_new_request(q, rq, bio, qos, bio_segments(bio), current_plug_state());
}

void submit_bio_throttled(QueueImpl* q, Bio* bio) {
  if (bio->throtl_flags & kThrotlSplitPart) {
    submit_one(q, bio);
    return;
  }
  blkcg_bio_account(bio);
  trace_bio(q, bio, blktrace::kQueue);
  size_t max_vec = 0;
  for (uint16_t i = 0; i < bio->nr_vecs; i++) max_vec = std::max(max_vec, bio->vec[i].iov_len);
  submit_checked(q, bio, max_vec);
}

void bio_to_request(Request* rq, Bio* bio, unsigned nr_segs) {
  rq->op = bio->op;
  rq->cmd_flags = bio->flags | (bio->op == ReqOp::read ? uint32_t{kBioSync} : 0u);
  rq->sector = bio->sector;
  rq->data_len = bio->size;
  rq->bio = rq->biotail = bio;
  rq->nr_phys_segments = static_cast<uint16_t>(nr_segs);
  rq->ioprio = bio->ioprio;
  rq->ioc = bio->ioc ? bio->ioc : current_io_context();
  bio_set_cookie(bio, rq->mq_hctx->queue_num);
  account_io_start(rq);
}

void Queue::submit_bio(Bio* bio) {
  QueueImpl* q = to_impl(this);
  bio->bi_next = nullptr;
  bio->done_bytes = 0;
  bio->status = BlkStatus::ok;
  // bio->blkg and bio->qos_queue are null here: bio_endio clears them.
  size_t max_vec = 0;
  if (BlkStatus st = check_bio(q, bio, &max_vec); st != BlkStatus::ok) {
    fail_bio(bio, st);
    return;
  }
  // Charged to its context's group once checked, before any split
  // (blk_cgroup_bio_start in submit_bio_noacct_nocheck). The root group
  // is not counted per bio; while no context is in another group, this
  // is one load and a branch.
  // io.max runs here too, before the queue (blk_throtl_bio): a bio it
  // holds takes no request, tag or usage reference while it waits. Only a
  // group's bios can be limited, so the fast path pays nothing more.
  if (io_group_members_any()) [[unlikely]]
    if (blkcg_bio_start_ioc(q, bio)) return;
  trace_bio(q, bio, blktrace::kQueue);
  // __submit_bio once wrapped every bio in a plug; queue/submit_plug=implicit
  // brings that back (seed 000's "before").
  std::optional<Plug> implicit;
  if (!current_plug_state() && q->tun_.submit_plug_implicit.load(std::memory_order_relaxed)) implicit.emplace();
  submit_checked(q, bio, max_vec);
}

namespace {

struct SyncWait {
  base::Completion done;
};

void sync_end_io(Bio* bio) { static_cast<SyncWait*>(bio->private_data)->done.complete(); }

}  // namespace

BlkStatus submit_bio_wait(Queue* q, Bio* bio) {
  SyncWait w;
  bio->end_io = sync_end_io;
  bio->private_data = &w;
  bio->flags |= kBioSync;
  q->submit_bio(bio);
  flush_current_plug(true);  // about to sleep
  w.done.wait();
  return bio->status;
}

BlkStatus Queue::read_sync(void* buf, uint64_t offset, uint32_t len) {
  if (offset % kSectorSize) return BlkStatus::inval;
  iovec v{buf, len};
  Bio bio;
  bio.op = ReqOp::read;
  bio.sector = offset >> kSectorShift;
  bio.size = len;
  bio.vec = &v;
  bio.nr_vecs = 1;
  return submit_bio_wait(this, &bio);
}

BlkStatus Queue::write_sync(const void* buf, uint64_t offset, uint32_t len, uint32_t flags) {
  if (offset % kSectorSize) return BlkStatus::inval;
  iovec v{const_cast<void*>(buf), len};
  Bio bio;
  bio.op = ReqOp::write;
  bio.flags = flags;
  bio.sector = offset >> kSectorShift;
  bio.size = len;
  bio.vec = &v;
  bio.nr_vecs = 1;
  return submit_bio_wait(this, &bio);
}

BlkStatus Queue::flush_sync() {
  Bio bio;
  bio.op = ReqOp::flush;
  bio.flags = kBioPreflush;
  return submit_bio_wait(this, &bio);
}

}  // namespace blkmq

namespace blkmq {

Request* Queue::alloc_request(ReqOp op, bool reserved, bool nowait) {
  QueueImpl* q = to_impl(this);
  if (reserved && !q->set_->cfg().reserved_tags) return nullptr;
  if (!q->enter(nowait)) return nullptr;
  AllocData d{q, kBioSync, op};
  d.reserved = reserved;
  d.nowait = nowait;
  d.rq_flags = kRqfPassthrough;
  Request* rq = blkmq::alloc_request(d);
  if (!rq) {
    q->exit_ref();
    return nullptr;
  }
  // What bio_to_request sets for a bio's request (init_rq leaves them).
  rq->bio = rq->biotail = nullptr;
  rq->data_len = 0;
  rq->sector = 0;
  rq->nr_phys_segments = 0;
  rq->ioc = nullptr;
  return rq;  // with a scheduler: scheduler tags, but never the scheduler itself
}

void Queue::execute_request_nowait(Request* rq) {
  HwCtxImpl* h = to_impl(rq->mq_hctx);
  insert_request(rq, kInsertAtHead);
  run_hw_queue(h, false);
}

namespace {
struct ExecWait {
  base::Completion done;
  BlkStatus st = BlkStatus::ok;
};
bool exec_end_io(Request* rq, BlkStatus st) {
  auto* w = static_cast<ExecWait*>(rq->end_io_data);
  w->st = st;
  w->done.complete();
  return true;
}
}  // namespace

BlkStatus Queue::execute_request(Request* rq) {
  ExecWait w;
  rq->end_io = exec_end_io;
  rq->end_io_data = &w;
  flush_current_plug(true);
  execute_request_nowait(rq);
  w.done.wait();
  return w.st;
}

void Queue::free_request(Request* rq) { blkmq::free_request(rq); }

}  // namespace blkmq
