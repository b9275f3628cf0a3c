// io.max's algorithm (blk-throttle): per group and direction, time slices
// in which a limit allows `limit x elapsed` bytes and I/Os; a bio over the
// allowance waits in its group, the first waiting bio of each direction
// sets when the group may dispatch next, and one delayed work per queue
// releases what is due, level by level up the group tree.
#include "qos/throtl.h"

#include <algorithm>
#include <atomic>

#include "core/core.h"
#include "qos/blkcg.h"

namespace blkmq {
namespace {

// The kernel's DFL_THROTL_SLICE (HZ/10): its SSD/HD split went with
// THROTTLING_LOW, and every queue now uses 100 ms.
constexpr uint64_t kSliceNs = 100'000'000;
constexpr uint64_t kNsPerSecond = 1'000'000'000;
// io_disp counts whole I/Os, as the kernel's: a trim drops the fraction of
// an I/O the trimmed time allowed (0.6 at 256 iops), which is why 256 I/Os
// at 256 iops take 1 s there and here despite the first slice's credit.
// Larger units (kept in) would finish 0.1 s early.
constexpr uint64_t kIoUnit = 1;
// THROTL_GRP_QUANTUM (3/4 of it for reads) and THROTL_QUANTUM: a group
// gives up the release after these many, so one group cannot fill a round.
constexpr unsigned kGroupQuantum = 8;
constexpr unsigned kReadQuantum = kGroupQuantum * 3 / 4;
constexpr unsigned kRoundQuantum = 32;
// Within a direction, sync bios (reads, and writes marked sync, FUA or
// PREFLUSH) go first, but an async one goes after this many syncs
// in a row, so that a stream of syncs cannot starve it (the ratio of the
// linux-block patch that split the queues, THROTL_SYNC_FACTOR).
constexpr unsigned kSyncPerAsync = 4;

uint64_t round_up(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

// `limit` per second over ns, in `unit`s; saturates (no limit: all).
int64_t allowed(uint64_t limit, uint64_t ns, uint64_t unit) {
  if (limit == kThrotlNoLimit) return INT64_MAX;
  // Per bio: a 64-bit division where the product fits (it does for any
  // limit below about 90 G/s over a slice), 128 bits only past that.
  if (uint64_t p; !__builtin_mul_overflow(limit * unit, ns, &p) && limit <= UINT64_MAX / unit) {
    const uint64_t v = p / kNsPerSecond;
    return v > INT64_MAX ? INT64_MAX : static_cast<int64_t>(v);
  }
  const unsigned __int128 v = static_cast<unsigned __int128>(limit) * unit * ns / kNsPerSecond;
  return v > INT64_MAX ? INT64_MAX : static_cast<int64_t>(v);
}

unsigned bio_dir(const Bio* b) { return op_is_write(b->op) ? 1 : 0; }
bool bio_sync(const Bio* b) {
  return b->op == ReqOp::read || (b->flags & (kBioSync | kBioFua | kBioPreflush));
}
// A discard counts as one sector, as throtl_bio_data_size: its range is
// not data moved.
uint64_t bio_bytes(const Bio* b) { return b->op == ReqOp::discard ? kSectorSize : b->size; }

bool slice_used(const ThrotlDir& s, uint64_t now) { return now < s.slice_start || now > s.slice_end; }

// Credit given out in one go (THROTL's batching has no kernel name: the
// kernel takes its queue lock per bio). At least kMinCredit I/Os (and
// their bytes at 4 KiB) so that a limit low enough to bind often is paced
// bio by bio under the lock, as before; at most half the slice's room.
constexpr int64_t kMinCredit = 16;
constexpr int64_t kMaxCredit = 4096;
constexpr int64_t kUnlimitedBytes = INT64_MAX / 4;

// Takes what is left of s's credit off its counts (it was charged when
// given out): before a bio waits, so credit never passes a waiting bio,
// and before a limit changes. Under the lock.
void reclaim_credit(ThrotlDir& s) {
  const int64_t ios = s.credit_ios.exchange(0, std::memory_order_relaxed);
  const int64_t bytes = s.credit_bytes.exchange(0, std::memory_order_relaxed);
  if (ios > 0 && s.iops != kThrotlNoLimit) s.io_disp -= std::min<uint64_t>(s.io_disp, ios);
  if (bytes > 0 && s.bps != kThrotlNoLimit) s.bytes_disp -= std::min<uint64_t>(s.bytes_disp, bytes);
}

void start_slice(ThrotlDir& s, uint64_t now, bool clear_carry) {
  // The old slice's credit was counted there; it goes with it.
  s.credit_ios.store(0, std::memory_order_relaxed);
  s.credit_bytes.store(0, std::memory_order_relaxed);
  s.bytes_disp = s.io_disp = 0;
  if (clear_carry) s.carry_bytes = s.carry_ios = 0;
  s.slice_start = now;
  s.slice_end = now + kSliceNs;
}

void set_slice_end(ThrotlDir& s, uint64_t end) { s.slice_end = round_up(end, kSliceNs); }

// How long bio must wait for the byte allowance; 0 if it fits now. The
// allowance counts whole slices, a fresh slice as one.
uint64_t bps_wait(const ThrotlDir& s, const Bio* bio, uint64_t now) {
  if (s.bps == kThrotlNoLimit || (bio->throtl_flags & kThrotlBpsDone)) return 0;
  const uint64_t el = now - s.slice_start;
  const uint64_t el_rnd = round_up(el ? el : kSliceNs, kSliceNs);
  const int64_t ok = sat_add(allowed(s.bps, el_rnd, 1), s.carry_bytes);
  const uint64_t need = s.bytes_disp + bio_bytes(bio);
  if (ok > 0 && need <= static_cast<uint64_t>(ok)) return 0;
  const unsigned __int128 extra = ok > 0 ? need - ok : static_cast<unsigned __int128>(need) - ok;
  const unsigned __int128 w = (extra * kNsPerSecond + s.bps - 1) / s.bps;
  return std::max<uint64_t>(1, w > UINT64_MAX / 2 ? UINT64_MAX / 2 : static_cast<uint64_t>(w)) + (el_rnd - el);
}

// The same for one more I/O: at least until the next slice boundary, and
// long enough for one I/O at the limit.
uint64_t iops_wait(const ThrotlDir& s, uint64_t now) {
  if (s.iops == kThrotlNoLimit) return 0;
  const uint64_t el = now - s.slice_start;
  const uint64_t el_rnd = round_up(el + 1, kSliceNs);
  const int64_t ok = sat_add(allowed(s.iops, el_rnd, kIoUnit), s.carry_ios);
  if (ok > 0 && s.io_disp + kIoUnit <= static_cast<uint64_t>(ok)) return 0;
  return std::max(el_rnd - el, (kNsPerSecond + s.iops - 1) / s.iops);
}

// Whether bio, first in its direction, may leave tg now (tg_may_dispatch);
// else *wait gets how long until it may. Starts or extends the slice.
bool may_dispatch(ThrotlGroup* tg, unsigned d, const Bio* bio, uint64_t now, uint64_t* wait) {
  ThrotlDir& s = tg->dir[d];
  *wait = 0;
  if (tg->canceling || !s.limited()) return true;
  // A new slice only when nothing waits: waiting bios need the one whose
  // allowance they were measured against.
  if (slice_used(s, now) && s.nr_queued == 0) start_slice(s, now, true);
  else if (s.slice_end < now + kSliceNs) set_slice_end(s, now + kSliceNs);
  const uint64_t w = std::max(bps_wait(s, bio, now), iops_wait(s, now));
  if (w == 0) return true;
  if (s.slice_end < now + w) set_slice_end(s, now + w);
  *wait = w;
  return false;
}

void charge(ThrotlDir& s, const Bio* bio) {
  if (!(bio->throtl_flags & kThrotlBpsDone)) s.bytes_disp += bio_bytes(bio);
  s.io_disp += kIoUnit;
}

uint64_t trimmed(uint64_t disp, int64_t trim) {
  return trim <= static_cast<int64_t>(std::min<uint64_t>(disp, INT64_MAX)) ? disp - trim : 0;
}

// Moves the slice's start up to all but the last full slice behind now and
// takes what that time allowed off what was dispatched, so a long slice
// does not bank unused allowance (throtl_trim_slice).
void trim(ThrotlDir& s, uint64_t now) {
  if (slice_used(s, now)) return;
  set_slice_end(s, now + kSliceNs);
  uint64_t el = (now - s.slice_start) / kSliceNs * kSliceNs;
  if (el < 2 * kSliceNs) return;
  el -= kSliceNs;  // one slice kept for a late timer or a rounded wait
  const int64_t bt = sat_add(allowed(s.bps, el, 1), s.carry_bytes);
  const int64_t it = sat_add(allowed(s.iops, el, kIoUnit), s.carry_ios);
  if (bt <= 0 && it <= 0) return;
  s.carry_bytes = s.carry_ios = 0;
  s.bytes_disp = trimmed(s.bytes_disp, bt);
  s.io_disp = trimmed(s.io_disp, it);
  s.slice_start += el;
}

// The bio the direction releases next: syncs first, an async after
// kSyncPerAsync syncs in a row.
Bio* peek(const ThrotlDir& s) {
  if (!s.sync.empty() && (s.async.empty() || s.sync_run < kSyncPerAsync)) return s.sync.head;
  return s.async.head;
}

Bio* pop(ThrotlDir& s) {
  Bio* b = peek(s);
  if (!b) return nullptr;
  if (b == s.sync.head) {
    s.sync.pop();
    s.sync_run = s.async.empty() ? 0 : s.sync_run + 1;
  } else {
    s.async.pop();
    s.sync_run = 0;
  }
  s.nr_queued--;
  return b;
}

void add_bio(ThrotlDir& s, Bio* bio) {
  (bio_sync(bio) ? s.sync : s.async).push(bio);
  s.nr_queued++;
}

// tg_update_disptime: the earlier of its directions' first bios.
void update_disptime(ThrotlGroup* tg, uint64_t now) {
  uint64_t wait = UINT64_MAX;
  for (unsigned d = 0; d < 2; d++) {
    uint64_t w;
    if (const Bio* b = peek(tg->dir[d])) {
      may_dispatch(tg, d, b, now, &w);
      wait = std::min(wait, w);
    }
  }
  tg->disptime = wait == UINT64_MAX ? UINT64_MAX : now + wait;
}

void set_pending(ThrotlData* td, ThrotlGroup* tg) {
  if (tg->pending) return;
  tg->pending = true;
  td->pending.push_back(tg);
}

// Arms the release for the earliest group, unless it is armed earlier.
void schedule_next_locked(ThrotlData* td, uint64_t now) {
  uint64_t first = UINT64_MAX;
  for (const ThrotlGroup* tg : td->pending) first = std::min(first, tg->disptime);
  if (first == UINT64_MAX || first >= td->armed_at) return;
  td->armed_at = first;
  td->dispatch_work.mod(kWorkCpuUnbound, first > now ? first - now : 0);
}

// A parent whose slice ran out starts a new one no earlier than the
// child's, so the time the bio already waited counts (the kernel's
// start_parent_slice_with_credit).
void start_parent_slice(const ThrotlDir& child, ThrotlDir& parent, uint64_t now) {
  if (!slice_used(parent, now)) return;
  const uint64_t start = parent.slice_start;
  start_slice(parent, now, true);
  parent.slice_start = std::max(start, child.slice_start);
}

// tg_dispatch_one_bio: charged here, then into the parent's queue, or out
// to the queue from the top.
void dispatch_one(ThrotlData* td, ThrotlGroup* tg, unsigned d, uint64_t now, BioFifo* out) {
  ThrotlDir& s = tg->dir[d];
  Bio* bio = pop(s);
  charge(s, bio);
  if (ThrotlGroup* p = tg->parent) {
    ThrotlDir& ps = p->dir[d];
    add_bio(ps, bio);
    start_parent_slice(s, ps, now);
    if (ps.nr_queued == 1) {
      update_disptime(p, now);
      set_pending(td, p);
    }
  } else {
    bio->throtl_flags |= kThrotlBpsDone;
    out->push(bio);
  }
  trim(s, now);
}

unsigned dispatch_tg(ThrotlData* td, ThrotlGroup* tg, uint64_t now, BioFifo* out) {
  const unsigned quota[2] = {kReadQuantum, kGroupQuantum - kReadQuantum};
  unsigned n = 0;
  for (unsigned d = 0; d < 2; d++) {
    uint64_t w;
    for (unsigned k = 0; k < quota[d]; k++, n++) {
      const Bio* b = peek(tg->dir[d]);
      if (!b || !may_dispatch(tg, d, b, now, &w)) break;
      dispatch_one(td, tg, d, now, out);
    }
  }
  return n;
}

// One release round: the due groups, earliest first, until none is due or
// the round's quantum is spent (then the work runs again at once).
void select_dispatch(ThrotlData* td, uint64_t now, BioFifo* out) {
  for (unsigned n = 0; n < kRoundQuantum;) {
    auto due = std::min_element(td->pending.begin(), td->pending.end(),
                                [](const ThrotlGroup* a, const ThrotlGroup* b) { return a->disptime < b->disptime; });
    if (due == td->pending.end() || (*due)->disptime > now) return;
    ThrotlGroup* tg = *due;
    n += dispatch_tg(td, tg, now, out);
    if (tg->dir[0].nr_queued || tg->dir[1].nr_queued) {
      update_disptime(tg, now);
    } else {
      tg->pending = false;
      td->pending.erase(std::find(td->pending.begin(), td->pending.end(), tg));
    }
  }
}

// kthrotld's work: releases what is due, re-arms for the next, and sends
// the released bios on into the queue with no lock held (they may wait
// for a tag).
void dispatch_work_fn(Work* w) {
  auto* td = static_cast<ThrotlData*>(w->data);
  BioFifo out;
  {
    std::lock_guard<std::mutex> l(td->lock);
    td->armed_at = UINT64_MAX;
    const uint64_t now = td->q->clock_ns();
    select_dispatch(td, now, &out);
    schedule_next_locked(td, now);
  }
  while (!out.empty()) submit_bio_throttled(td->q, out.pop());
}

// Gives s credit for half the room its slice has left, charged now, if
// that is at least kMinCredit I/Os (and their bytes) and s has none left.
// Under the lock, after a bio passed.
void grant_credit(ThrotlDir& s, uint64_t now) {
  if (s.credit_ios.load(std::memory_order_relaxed) > 0) return;
  const uint64_t el_rnd = round_up(now - s.slice_start + 1, kSliceNs);
  int64_t ios = kMaxCredit, bytes = kUnlimitedBytes;
  if (s.iops != kThrotlNoLimit)
    ios = std::min(kMaxCredit, (sat_add(allowed(s.iops, el_rnd, kIoUnit), s.carry_ios) - int64_t(s.io_disp)) / 2);
  if (s.bps != kThrotlNoLimit)
    bytes = (sat_add(allowed(s.bps, el_rnd, 1), s.carry_bytes) - int64_t(s.bytes_disp)) / 2;
  if (ios < kMinCredit || bytes < kMinCredit * 4096) return;
  if (s.iops != kThrotlNoLimit) s.io_disp += ios;
  if (s.bps != kThrotlNoLimit) s.bytes_disp += bytes;
  s.credit_bytes.store(bytes, std::memory_order_relaxed);
  s.credit_ios.store(ios, std::memory_order_relaxed);
}

// Spends one I/O of credit and the bio's bytes, or nothing. Any thread.
bool take_credit(ThrotlDir& s, uint64_t bytes) {
  int64_t c = s.credit_ios.load(std::memory_order_relaxed);
  do {
    if (c <= 0) return false;
  } while (!s.credit_ios.compare_exchange_weak(c, c - 1, std::memory_order_relaxed));
  int64_t b = s.credit_bytes.load(std::memory_order_relaxed);
  do {
    if (b < int64_t(bytes)) {
      // Still charged: whoever takes it next pays with it.
      s.credit_ios.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  } while (!s.credit_bytes.compare_exchange_weak(b, b - int64_t(bytes), std::memory_order_relaxed));
  return true;
}

// What tg's bios of direction d may do without the lock (ThrotlGroup::
// fast). Under the lock and the tree mutex.
uint8_t fast_mode(const ThrotlGroup* tg, unsigned d) {
  if (tg->canceling) return kThrotlFastNone;
  for (const ThrotlGroup* a = tg->parent; a; a = a->parent)
    if (a->dir[d].limited()) return kThrotlFastNone;
  return tg->dir[d].limited() ? kThrotlFastCredit : kThrotlFastFree;
}

// Whether any level from tg up limits this bio: bytes only count once.
bool rules_apply(const ThrotlGroup* tg, unsigned d, const Bio* bio) {
  const bool bytes = !(bio->throtl_flags & kThrotlBpsDone);
  for (; tg; tg = tg->parent)
    if (tg->dir[d].iops != kThrotlNoLimit || (bytes && tg->dir[d].bps != kThrotlNoLimit)) return true;
  return false;
}

bool tg_limited(const ThrotlGroup* tg) { return tg->dir[0].limited() || tg->dir[1].limited(); }

}  // namespace

void throtl_init_queue(QueueImpl* q) {
  auto* td = new ThrotlData;
  td->q = q;
  td->dispatch_work.init(q->rt_, dispatch_work_fn, td);
  q->throtl_ = td;
}

void throtl_exit_queue(QueueImpl* q) {
  q->throtl_->dispatch_work.cancel_sync();
  delete q->throtl_;
  q->throtl_ = nullptr;
}

ThrotlGroup* throtl_tg_alloc(QueueImpl* q, Blkg* parent) {
  auto* tg = new ThrotlGroup;
  tg->td = q->throtl_;
  tg->parent = parent ? parent->tg : nullptr;
  // Its own limits are none yet; an ancestor's may be set (they are
  // written under the tree mutex too, which the caller holds).
  for (unsigned d = 0; d < 2; d++) tg->fast[d].store(fast_mode(tg, d), std::memory_order_relaxed);
  return tg;
}

void throtl_tg_free(ThrotlGroup* tg) { delete tg; }

namespace {

// The fast path, with no lock: true if bio passes as it is, its direction
// limited at no level, or paid from the group's credit (a limit far above
// the rate costs two compare-and-swaps a bio). A split part's flags need
// the slow path's rules.
bool passes_unlocked(ThrotlGroup* tg, unsigned d, Bio* bio) {
  if (bio->throtl_flags != 0) return false;
  const uint8_t fast = tg->fast[d].load(std::memory_order_relaxed);
  if (fast == kThrotlFastFree) return true;
  if (fast != kThrotlFastCredit || !take_credit(tg->dir[d], bio_bytes(bio))) return false;
  bio->throtl_flags |= kThrotlBpsDone;
  return true;
}

// Climbs from tg while each level lets bio pass, charging each; returns
// the first level that holds it (bios wait there, FIFO, or no allowance
// is left), nullptr if it passed them all. Under the lock.
ThrotlGroup* climb(ThrotlGroup* tg, unsigned d, Bio* bio, uint64_t now) {
  while (tg) {
    uint64_t w;
    ThrotlDir& s = tg->dir[d];
    if (!s.nr_queued && may_dispatch(tg, d, bio, now, &w)) {
      charge(s, bio);
      // Trimmed on the way too, or a group whose bios never wait would
      // keep extending one slice.
      trim(s, now);
    } else if (bio->flags & kBioMeta) {
      // Metadata is never held (bio_issue_as_root_blkg): waiting data may
      // depend on it, a priority inversion. It goes over the limit and is
      // charged, so the group's next bios pay for it.
      charge(s, bio);
    } else if (s.credit_ios.load(std::memory_order_relaxed) > 0) {
      // Credit given out must not pass a waiting bio: taken back, and the
      // level looked at again with it in its allowance.
      reclaim_credit(s);
      continue;
    } else {
      return tg;
    }
    tg = tg->parent;
  }
  return nullptr;
}

}  // namespace

bool throtl_bio_slow(QueueImpl* q, Bio* bio) {
  ThrotlData* td = q->throtl_;
  ThrotlGroup* const bottom = bio->blkg->tg;
  const unsigned d = bio_dir(bio);
  if (passes_unlocked(bottom, d, bio)) return false;
  std::lock_guard<std::mutex> l(td->lock);
  // A dying queue keeps nothing: the bio goes on and the queue refuses it.
  if (td->dying || !rules_apply(bottom, d, bio)) return false;
  const uint64_t now = q->clock_ns();
  ThrotlGroup* tg = climb(bottom, d, bio, now);
  if (!tg) {
    bio->throtl_flags |= kThrotlBpsDone;
    if (bottom->fast[d].load(std::memory_order_relaxed) == kThrotlFastCredit) grant_credit(bottom->dir[d], now);
    return false;
  }
  ThrotlDir& s = tg->dir[d];
  add_bio(s, bio);
  if (s.nr_queued == 1) {
    update_disptime(tg, now);
    set_pending(td, tg);
    schedule_next_locked(td, now);
  }
  return true;
}

void throtl_blkg_offline(Blkg* b) {
  ThrotlGroup* tg = b->tg;
  ThrotlData* td = tg->td;
  std::lock_guard<std::mutex> l(td->lock);
  if (tg_limited(tg)) td->nr_limited.fetch_sub(1, std::memory_order_relaxed);
  for (ThrotlDir& s : tg->dir) {
    reclaim_credit(s);
    s.bps = s.iops = kThrotlNoLimit;
  }
  tg->canceling = true;
  for (auto& f : tg->fast) f.store(kThrotlFastNone, std::memory_order_relaxed);
  if (tg->pending) {
    const uint64_t now = td->q->clock_ns();
    tg->disptime = now;
    schedule_next_locked(td, now);
  }
}

void throtl_cancel_bios(QueueImpl* q) {
  ThrotlData* td = q->throtl_;
  BioFifo dead;
  {
    std::lock_guard<std::mutex> l(td->lock);
    td->dying = true;
    for (ThrotlGroup* tg : td->pending) {
      for (ThrotlDir& s : tg->dir)
        while (Bio* b = pop(s)) dead.push(b);
      tg->pending = false;
    }
    td->pending.clear();
  }
  // Ended with no lock held: an end_io may submit again (to another queue).
  while (!dead.empty()) {
    Bio* b = dead.pop();
    b->status = BlkStatus::ioerr;
    bio_endio(b);
  }
  // A release already running sends its bios on: the dying queue refuses
  // them. Its end is waited for in throtl_exit_queue, not here, so that
  // mark_dead stays callable from any thread.
}

void throtl_iomax_apply(QueueImpl* q, Blkg* b, const ThrotlConf& c) {
  ThrotlGroup* tg = b->tg;
  ThrotlData* td = q->throtl_;
  std::lock_guard<std::mutex> l(td->lock);
  const uint64_t now = q->clock_ns();
  const bool was = tg_limited(tg);
  for (unsigned d = 0; d < 2; d++) {
    ThrotlDir& s = tg->dir[d];
    reclaim_credit(s);  // charged, not spent: out of the counts first
    // What waiting bios were allowed under the old limits carries into the
    // new slice (tg_update_carryover), so a change neither forgives nor
    // double-charges the time they waited.
    if (s.nr_queued) {
      const uint64_t el = now - s.slice_start;
      if (s.bps != kThrotlNoLimit) s.carry_bytes = sat_add(s.carry_bytes, allowed(s.bps, el, 1) - int64_t(s.bytes_disp));
      if (s.iops != kThrotlNoLimit)
        s.carry_ios = sat_add(s.carry_ios, allowed(s.iops, el, kIoUnit) - int64_t(s.io_disp));
    }
    if (c.bps[d] != ThrotlConf::kKeep) s.bps = c.bps[d];
    if (c.iops[d] != ThrotlConf::kKeep) s.iops = c.iops[d];
    start_slice(s, now, false);
  }
  const bool is = tg_limited(tg);
  if (was != is) td->nr_limited.fetch_add(is ? 1 : -1, std::memory_order_relaxed);
  // A limit here changes what every descendant may do without the lock.
  for (Blkg* other : q->blkgs_)
    for (unsigned d = 0; d < 2; d++) other->tg->fast[d].store(fast_mode(other->tg, d), std::memory_order_relaxed);
  if (tg->pending) {
    update_disptime(tg, now);
    schedule_next_locked(td, now);
  }
}

}  // namespace blkmq
