// Zone write plugging: the zone model a zoned queue learns from its
// driver, the plug table and pool, and the plugs' life (see zone_wplug.h).
#include "core/zone_wplug.h"

#include <algorithm>
#include <bit>
#include <cstdio>

#include "core/core.h"

namespace blkmq {

// The kernel's pool size when the device has no open or active limit
// (BLK_ZONE_WPLUG_DEFAULT_POOL_SIZE).
constexpr unsigned kDefaultPool = 128;
// Zones asked for per report while the queue learns them.
constexpr unsigned kReportBatch = 1024;

// A plug's state word: its zone's number in the high 32 bits, these flags
// in the low. The first two are the kernel's flags, with its values, as
// debugfs zone_wplugs prints them; the others are this implementation's.
enum : uint64_t {
  kWplugPlugged = 1u << 0,       // a write holds the plug (in flight, or its work queued)
  kWplugNeedWpUpdate = 1u << 1,  // a write failed: the pointer is unknown
  kWplugWaiters = 1u << 4,       // bios wait in the plug (head != nullptr)
  kWplugDead = 1u << 5,          // in the pool, in no zone
  kWplugKernelFlags = kWplugPlugged | kWplugNeedWpUpdate,
  kWplugFlags = 0xffffffffu,
};

// The state word of zone zno's plug when it is idle.
constexpr uint64_t idle_state(unsigned zno) { return uint64_t{zno} << 32; }

// The state changes by atomic operations only. A write to an idle plug
// takes it with one compare-and-swap, and its completion gives it back
// with another, with no lock (the common case on a zone being written).
// Every other change is made under the plugs' lock, and still atomically,
// since those two do not take it. A plug is never freed while the queue
// lives, only pooled (dead) and reused: the zone number in the state word
// makes the one compare-and-swap also check that a plug found in the table
// is still its zone's and not dead.
struct ZoneWplug {
  ListNode node;  // in the free list
  std::atomic<uint64_t> state{kWplugDead};
  // The zone's first sector and the end of its capacity, set with the
  // zone (under the lock, before the state's release), read without the
  // lock by the holder and by the completion that gives it back, which
  // may see a later zone's values once it has; atomics for that.
  std::atomic<uint64_t> start{0};
  std::atomic<uint64_t> end{0};
  // The write pointer, a sector. Moved by the holder, or under the lock by
  // a reset, a finish or a report (a reset racing a write to its zone may
  // leave it wrong; the device then fails the write, which marks the plug
  // for a report, as any failed write does).
  std::atomic<uint64_t> wp{0};
  unsigned zone_no = 0;    // under the lock
  Bio* head = nullptr;     // plugged bios, in submission order (bi_next)
  Bio* tail = nullptr;
  unsigned nr_bios = 0;
  Work work;
  ZoneWplugs* owner = nullptr;

  uint32_t flags() const { return static_cast<uint32_t>(state.load(std::memory_order_relaxed)); }
  uint64_t wp_offset() const { return wp.load(std::memory_order_relaxed) - start.load(std::memory_order_relaxed); }
  void set_wp_offset(uint64_t off) {
    wp.store(start.load(std::memory_order_relaxed) + off, std::memory_order_relaxed);
  }
};

namespace {

unsigned zone_of(uint64_t sector, unsigned shift) { return static_cast<unsigned>(sector >> shift); }

void fail_now(Bio* bio) {
  bio->status = BlkStatus::ioerr;
  bio_endio(bio);
}

}  // namespace

ZoneWplugs::ZoneWplugs(QueueImpl* q) : q_(q) {}

Result<std::unique_ptr<ZoneWplugs>> ZoneWplugs::create(QueueImpl* q, unsigned* max_open) {
  std::unique_ptr<ZoneWplugs> z(new ZoneWplugs(q));
  if (Status st = z->learn_zones(max_open); !st) return st;
  return z;
}

ZoneWplugs::~ZoneWplugs() {
  // A work item may still be in its last lines after releasing its plug.
  for (auto& p : store_) kblockd_flush_work(&p->work);
}

bool ZoneWplugs::is_conventional(uint64_t sector) const {
  const unsigned zno = zone_of(sector, zone_shift_);
  return zno < nr_zones_ && (conv_[zno / 64] >> (zno % 64) & 1);
}

Status ZoneWplugs::learn_zone(const Zone& z, unsigned idx, bool last) {
  const QueueLimits& l = q_->limits_;
  const uint64_t want_len = last ? l.capacity_sectors - zone_start(idx) : l.chunk_sectors;
  if (z.start != zone_start(idx) || z.len != want_len)
    return Status::invalid("zone " + std::to_string(idx) + ": start " + std::to_string(z.start) + " length " +
                           std::to_string(z.len) + ", expected " + std::to_string(zone_start(idx)) + " and " +
                           std::to_string(want_len));
  if (z.type == ZoneType::conventional) {
    conv_[idx / 64] |= uint64_t{1} << (idx % 64);
    return Status::OK();
  }
  if (z.type != ZoneType::seq_write_req)
    return Status::invalid("zone " + std::to_string(idx) + ": only host-managed (sequential write required) zones");
  if (z.capacity == 0 || z.capacity > z.len)
    return Status::invalid("zone " + std::to_string(idx) + ": capacity " + std::to_string(z.capacity));
  if (last) {
    last_capacity_ = z.capacity;
  } else if (capacity_ == 0) {
    capacity_ = z.capacity;
  } else if (capacity_ != z.capacity) {
    // As blk_revalidate_seq_zone: one capacity for all but the last zone.
    return Status::invalid("zone " + std::to_string(idx) + ": capacity " + std::to_string(z.capacity) +
                           " differs from the other zones' " + std::to_string(capacity_));
  }
  return Status::OK();
}

// blk_revalidate_disk_zones and disk_update_zone_resources.
Status ZoneWplugs::learn_zones(unsigned* max_open) {
  const QueueLimits& l = q_->limits_;
  zone_shift_ = static_cast<unsigned>(std::countr_zero(l.chunk_sectors));
  nr_zones_ = static_cast<unsigned>((l.capacity_sectors + l.chunk_sectors - 1) >> zone_shift_);
  conv_.assign((nr_zones_ + 63) / 64, 0);
  std::vector<std::pair<unsigned, uint64_t>> written;  // zones written part-way: wp offset
  unsigned idx = 0, nr_seq = 0;
  while (idx < nr_zones_) {
    auto r = q_->cfg_.report_zones(zone_start(idx), std::min(kReportBatch, nr_zones_ - idx));
    if (!r) return r.status();
    if (r->empty()) return Status::invalid("the zone report stopped at zone " + std::to_string(idx));
    for (const Zone& z : *r) {
      if (idx == nr_zones_) break;
      if (Status st = learn_zone(z, idx, idx + 1 == nr_zones_); !st) return st;
      if (z.type != ZoneType::conventional) {
        nr_seq++;
        const bool part = z.cond == ZoneCond::imp_open || z.cond == ZoneCond::exp_open || z.cond == ZoneCond::closed;
        if (part) written.emplace_back(idx, z.wp - z.start);
      }
      idx++;
    }
  }
  if (nr_zones_ == 1 || last_capacity_ == 0) last_capacity_ = capacity_;
  if (capacity_ == 0) capacity_ = last_capacity_;
  unsigned pool = std::max(l.max_open_zones, l.max_active_zones);
  if (!pool) pool = kDefaultPool;
  pool = std::max(1u, std::min(pool, nr_seq));
  if (!l.max_open_zones && !l.max_active_zones && nr_seq > kDefaultPool) *max_open = kDefaultPool;
  table_ = std::vector<std::atomic<ZoneWplug*>>(nr_zones_);
  for (unsigned i = 0; i < pool; i++) {
    store_.push_back(std::make_unique<ZoneWplug>());
    free_.push_back(&store_.back()->node);
  }
  std::lock_guard<base::SpinLock> lk(mu_);
  for (auto [zno, wp] : written) get_or_alloc(zno, wp);
  return Status::OK();
}

ZoneWplug* ZoneWplugs::lookup(unsigned zno) const {
  return zno < nr_zones_ ? table_[zno].load(std::memory_order_relaxed) : nullptr;
}

// To the pool, if it is idle: the compare-and-swap fails if a submitter
// took it without the lock meanwhile. With mu_ held.
bool ZoneWplugs::release(ZoneWplug* p) {
  uint64_t idle = idle_state(p->zone_no);
  if (!p->state.compare_exchange_strong(idle, idle | kWplugDead, std::memory_order_acq_rel)) return false;
  table_[p->zone_no].store(nullptr, std::memory_order_relaxed);
  free_.push_back(&p->node);
  return true;
}

// A plug from the pool, or a new one when the pool is empty (the kernel's
// mempool falls back to the allocator too): no bio fails for want of one.
ZoneWplug* ZoneWplugs::get_or_alloc(unsigned zno, uint64_t wp_offset) {
  if (ZoneWplug* p = lookup(zno)) return p;
  ZoneWplug* p;
  if (!free_.empty()) {
    p = list_entry<ZoneWplug, &ZoneWplug::node>(free_.next);
    ListNode::unlink(&p->node);
  } else {
    store_.push_back(std::make_unique<ZoneWplug>());
    p = store_.back().get();
  }
  p->zone_no = zno;
  p->start.store(zone_start(zno), std::memory_order_relaxed);
  p->end.store(zone_start(zno) + capacity_of(zno), std::memory_order_relaxed);
  p->set_wp_offset(wp_offset);
  p->head = p->tail = nullptr;
  p->nr_bios = 0;
  if (!p->owner) {
    p->owner = this;
    p->work.init(q_->rt_, work_fn, p);
  }
  // Release: a submitter that takes the plug from the table without the
  // lock (acquire) sees its zone and pointer.
  p->state.store(idle_state(zno), std::memory_order_release);
  table_[zno].store(p, std::memory_order_release);
  return p;
}

// disk_should_remove_zone_wplug: nothing holds it, nothing waits in it,
// the pointer is known, and the zone is empty or full.
void ZoneWplugs::remove_if_done(ZoneWplug* p) {
  if (p->flags() != 0 || p->head) return;
  const uint64_t wp = p->wp.load(std::memory_order_relaxed);
  if (wp != p->start.load(std::memory_order_relaxed) && wp < p->end.load(std::memory_order_relaxed)) return;
  release(p);
}

// blk_zone_wplug_prepare_bio: a write must start at the pointer of a zone
// that is not full and whose pointer is known; an append is sent as a
// write there. The pointer moves past it.
inline bool ZoneWplugs::prepare(ZoneWplug* p, Bio* bio) {
  if (p->flags() & kWplugNeedWpUpdate) return false;
  const uint64_t wp = p->wp.load(std::memory_order_relaxed);
  if (wp >= p->end.load(std::memory_order_relaxed)) return false;
  if (bio->op == ReqOp::zone_append) {
    bio->sector = wp;
    bio->op = ReqOp::write;
    if (!(bio->flags & kBioNomerge)) bio->zwp_flags |= kZwpSetNomerge;
    bio->flags |= kBioNomerge;
    bio->zwp_flags |= kZwpEmulatedAppend;
  } else if (bio->sector != wp) {
    return false;
  }
  p->wp.store(wp + (bio->size >> kSectorShift), std::memory_order_relaxed);
  bio->zwp_flags |= kZwpPlugging;
  return true;
}

void ZoneWplugs::abort_bios(ZoneWplug* p, Bio** aborted) {
  if (!p->head) return;
  p->tail->bi_next = *aborted;
  *aborted = p->head;
  p->head = p->tail = nullptr;
  p->nr_bios = 0;
  p->state.fetch_and(~kWplugWaiters, std::memory_order_relaxed);
}

void ZoneWplugs::set_wp_offset(ZoneWplug* p, uint64_t off, Bio** aborted) {
  p->state.fetch_and(~kWplugNeedWpUpdate, std::memory_order_relaxed);
  p->set_wp_offset(off);
  abort_bios(p, aborted);
  remove_if_done(p);
}

void ZoneWplugs::fail_aborted(Bio* list) {
  while (Bio* bio = list) {
    list = bio->bi_next;
    bio->bi_next = nullptr;
    fail_now(bio);
    q_->exit_ref();  // the reference it held while plugged
  }
}

// The write holding the plug is done: the next plugged bio goes from
// kblockd (a completion context may not submit), or the plug is free.
void ZoneWplugs::unplug(ZoneWplug* p) {
  if (p->head) {
    kblockd_queue_work(&p->work, kWorkCpuUnbound);
    return;
  }
  p->state.fetch_and(~(kWplugPlugged | kWplugWaiters), std::memory_order_release);
  remove_if_done(p);
}

bool ZoneWplugs::handle_reset_or_finish(Bio* bio) {
  const unsigned zno = zone_of(bio->sector, zone_shift_);
  // blk_zone_wplug_handle_reset_or_finish: a conventional zone has no
  // pointer to move.
  if (is_conventional(bio->sector)) {
    fail_now(bio);
    return true;
  }
  Bio* aborted = nullptr;
  {
    std::lock_guard<base::SpinLock> lk(mu_);
    if (ZoneWplug* p = lookup(zno))
      set_wp_offset(p, bio->op == ReqOp::zone_reset ? 0 : capacity_of(zno), &aborted);
  }
  fail_aborted(aborted);
  return false;
}

// A native append does not go through the plug, so its zone's pointer is
// no longer known to it: writes waiting there are aborted (a mix of the
// two has no order), and the plug goes, or, while a write holds it, is
// marked as after a failure. The kernel removes it either way.
void ZoneWplugs::handle_native_append(Bio* bio) {
  Bio* aborted = nullptr;
  {
    std::lock_guard<base::SpinLock> lk(mu_);
    ZoneWplug* p = lookup(zone_of(bio->sector, zone_shift_));
    if (!p) return;
    abort_bios(p, &aborted);
    // Held, or taken without the lock just now: marked instead.
    if (!release(p)) p->state.fetch_or(kWplugNeedWpUpdate, std::memory_order_relaxed);
  }
  fail_aborted(aborted);
}

// Appends, resets, finishes and reset-all (writes take plug_write).
bool ZoneWplugs::plug_other(Bio* bio) {
  switch (bio->op) {
    case ReqOp::zone_reset:
    case ReqOp::zone_finish:
      return handle_reset_or_finish(bio);
    case ReqOp::zone_reset_all: {
      Bio* aborted = nullptr;
      {
        std::lock_guard<base::SpinLock> lk(mu_);
        for (unsigned z = 0; z < nr_zones_; z++)
          if (ZoneWplug* p = lookup(z)) set_wp_offset(p, 0, &aborted);
      }
      fail_aborted(aborted);
      return false;
    }
    case ReqOp::zone_append:
      if (q_->limits_.max_zone_append_sectors) {
        if (!is_conventional(bio->sector)) handle_native_append(bio);
        bio->zwp_flags |= kZwpNativeAppend;
        return false;
      }
      return plug_write_slow(bio, zone_of(bio->sector, zone_shift_), nullptr);
    case ReqOp::write:
      return plug_write(bio);
    default:
      return false;
  }
}

// Every write to a zoned queue comes here. The common case, a zone whose
// plug exists and is idle, takes it with one compare-and-swap and no lock;
// the write must then start at the pointer of a zone not full (a plug
// marked for a pointer update is never idle).
bool ZoneWplugs::plug_write(Bio* bio) {
  const unsigned zno = zone_of(bio->sector, zone_shift_);
  ZoneWplug* p = table_[zno].load(std::memory_order_acquire);
  uint64_t idle = idle_state(zno);
  if (!p || !p->state.compare_exchange_strong(idle, idle | kWplugPlugged, std::memory_order_acquire)) [[unlikely]]
    return plug_write_slow(bio, zno, nullptr);
  const uint64_t wp = p->wp.load(std::memory_order_relaxed);
  if (bio->sector != wp || wp >= p->end.load(std::memory_order_relaxed)) [[unlikely]]
    return plug_write_slow(bio, zno, p);
  p->wp.store(wp + (bio->size >> kSectorShift), std::memory_order_relaxed);
  bio->zwp_flags |= kZwpPlugging;
  return false;
}

// A write to a conventional zone (no plug), or, with the lock, a zone
// without a plug, a plug held by another write (the bio waits in it), or
// a write to refuse; appends come here straight. `taken`: a plug the fast
// path took and must give back first (it refused the write). Out of line
// and tail-called, so the fast path saves no registers for it.
[[gnu::noinline]] bool ZoneWplugs::plug_write_slow(Bio* bio, unsigned zno, ZoneWplug* taken) {
  if (conv_[zno / 64] >> (zno % 64) & 1) {
    if (bio->op != ReqOp::zone_append) return false;
    fail_now(bio);
    return true;
  }
  mu_.lock();
  if (taken) unplug(taken);
  ZoneWplug* p = lookup(zno);
  // A zone with no plug is empty or full (or never seen written): the
  // first write tells where its pointer is, as the kernel trusts it.
  if (!p) p = get_or_alloc(zno, bio->op == ReqOp::zone_append ? 0 : bio->sector - zone_start(zno));
  uint64_t s = p->state.load(std::memory_order_acquire);
  for (;;) {
    if (s & kWplugPlugged) {
      // Marked before the holder's completion can give the plug back
      // without the lock; if it did meanwhile, the bio takes the plug.
      if (!p->state.compare_exchange_weak(s, s | kWplugWaiters, std::memory_order_acq_rel)) continue;
      // It waits in the plug, issued later from kblockd, which may sleep.
      bio->flags &= ~kBioNowait;
      bio->bi_next = nullptr;
      if (p->tail) p->tail->bi_next = bio;
      else p->head = bio;
      p->tail = bio;
      p->nr_bios++;
      q_->enter_many(1, base::this_cpu());
      mu_.unlock();
      return true;
    }
    if (p->state.compare_exchange_weak(s, s | kWplugPlugged, std::memory_order_acq_rel)) break;
  }
  if (!prepare(p, bio)) {
    unplug(p);
    mu_.unlock();
    fail_now(bio);
    return true;
  }
  mu_.unlock();
  return false;
}

void ZoneWplugs::bio_merged(Bio* bio) {
  std::lock_guard<base::SpinLock> lk(mu_);
  ZoneWplug* p = lookup(zone_of(bio->sector, zone_shift_));
  if (!p) return;  // cannot be: the request it merged into holds the plug
  p->wp.fetch_add(bio->size >> kSectorShift, std::memory_order_relaxed);
  bio->zwp_flags |= kZwpPlugging;
}

void ZoneWplugs::init_request(Request* rq) {
  std::lock_guard<base::SpinLock> lk(mu_);
  ZoneWplug* p = lookup(zone_of(rq->sector, zone_shift_));
  if (!p) return;
  while (Bio* bio = p->head) {
    if (bio->op != ReqOp::write || bio->sector != rq->end_sector()) break;
    // Off the plug's list before it joins rq's chain: both link through
    // bi_next.
    Bio* rest = bio->bi_next;
    bio->bi_next = nullptr;
    if (!back_merge_plugged(q_, rq, bio, bio_segments(bio))) {
      bio->bi_next = rest;
      break;
    }
    p->head = rest;
    if (!rest) {
      p->tail = nullptr;
      p->state.fetch_and(~kWplugWaiters, std::memory_order_relaxed);
    }
    p->nr_bios--;
    // prepare cannot fail: the bio is at the pointer (rq's end) of a zone
    // rq is still writing.
    p->wp.fetch_add(bio->size >> kSectorShift, std::memory_order_relaxed);
    bio->zwp_flags |= kZwpPlugging;
    q_->exit_ref();  // rq's reference serves it now
  }
}

void ZoneWplugs::end_request(Request* rq, BlkStatus st) {
  const unsigned zno = zone_of(rq->sector, zone_shift_);
  ZoneWplug* p = table_[zno].load(std::memory_order_acquire);  // rq holds it: in the table
  // The common end: it went well and nothing waits. The plug is given back
  // with no lock (release: the next holder sees the pointer this write
  // moved), and pooled if its zone is now empty or full (read after the
  // release, the zone may be another's by then: pool_if_done checks). The
  // rest is out of line and tail-called, so this path saves no registers.
  uint64_t held = idle_state(zno) | kWplugPlugged;
  if (st != BlkStatus::ok || !p->state.compare_exchange_strong(held, idle_state(zno), std::memory_order_release))
      [[unlikely]]
    return end_request_locked(p, st);
  const uint64_t wp = p->wp.load(std::memory_order_relaxed);
  if (wp != p->start.load(std::memory_order_relaxed) && wp < p->end.load(std::memory_order_relaxed)) [[likely]]
    return;
  return pool_if_done(p, zno);
}

// A zone that ended empty or full: its plug to the pool, unless another
// write took it meanwhile.
[[gnu::noinline]] void ZoneWplugs::pool_if_done(ZoneWplug* p, unsigned zno) {
  std::lock_guard<base::SpinLock> lk(mu_);
  if (lookup(zno) == p) remove_if_done(p);
}

// A failed write, or bios waiting behind the one that ended.
[[gnu::noinline]] void ZoneWplugs::end_request_locked(ZoneWplug* p, BlkStatus st) {
  Bio* aborted = nullptr;
  {
    std::lock_guard<base::SpinLock> lk(mu_);
    if (st != BlkStatus::ok) {
      // disk_zone_wplug_set_error: what waits would only fail at the
      // device; the pointer is unknown until a report, reset or finish.
      p->state.fetch_or(kWplugNeedWpUpdate, std::memory_order_relaxed);
      abort_bios(p, &aborted);
    }
    unplug(p);
  }
  fail_aborted(aborted);
}

void ZoneWplugs::unissued_bio_failed(Bio* bio) {
  std::lock_guard<base::SpinLock> lk(mu_);
  const unsigned zno = zone_of(bio->sector, zone_shift_);
  bio->zwp_flags &= ~kZwpPlugging;
  if (bio->zwp_flags & kZwpEmulatedAppend) {
    bio->op = ReqOp::zone_append;
    bio->sector = zone_start(zno);
    if (bio->zwp_flags & kZwpSetNomerge) bio->flags &= ~kBioNomerge;
  }
  bio->zwp_flags = 0;
  ZoneWplug* p = lookup(zno);
  if (!p) return;
  p->wp.fetch_sub(bio->size >> kSectorShift, std::memory_order_relaxed);
  unplug(p);
}

void ZoneWplugs::sync_from_report(const std::vector<Zone>& zones) {
  Bio* aborted = nullptr;
  {
    std::lock_guard<base::SpinLock> lk(mu_);
    for (const Zone& z : zones) {
      const unsigned zno = zone_of(z.start, zone_shift_);
      ZoneWplug* p = lookup(zno);
      if (!p || !(p->flags() & kWplugNeedWpUpdate)) continue;
      const bool has_wp = z.cond != ZoneCond::full && z.wp != kZoneInvalidWp && z.wp >= z.start;
      set_wp_offset(p, has_wp ? z.wp - z.start : capacity_of(zno), &aborted);
    }
  }
  fail_aborted(aborted);
}

void ZoneWplugs::work_fn(Work* w) {
  auto* p = static_cast<ZoneWplug*>(w->data);
  p->owner->issue_next(p);
}

// blk_zone_wplug_bio_work: the next plugged bio that can go, issued with
// the usage reference it holds; the ones whose place is wrong end here.
// The plug is not touched after it is released.
void ZoneWplugs::issue_next(ZoneWplug* p) {
  for (;;) {
    std::unique_lock<base::SpinLock> lk(mu_);
    Bio* bio = p->head;
    if (!bio) {
      p->state.fetch_and(~(kWplugPlugged | kWplugWaiters), std::memory_order_release);
      remove_if_done(p);
      return;
    }
    p->head = bio->bi_next;
    if (!p->head) {
      p->tail = nullptr;
      p->state.fetch_and(~kWplugWaiters, std::memory_order_relaxed);
    }
    p->nr_bios--;
    bio->bi_next = nullptr;
    if (!prepare(p, bio)) {
      lk.unlock();
      fail_now(bio);
      q_->exit_ref();
      continue;
    }
    bio->zwp_flags |= kZwpFromPlug;
    lk.unlock();
    submit_plugged_bio(q_, bio);
    return;
  }
}

std::string ZoneWplugs::show() const {
  std::string out;
  std::lock_guard<base::SpinLock> lk(mu_);
  for (unsigned z = 0; z < nr_zones_; z++) {
    const ZoneWplug* p = lookup(z);
    if (!p) continue;
    // ref: the table's, and the writer's while one holds it.
    const uint32_t flags = p->flags() & kWplugKernelFlags;
    const unsigned ref = 1 + ((flags & kWplugPlugged) ? 1 : 0);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%u 0x%x %u %llu %u\n", p->zone_no, flags, ref,
                  static_cast<unsigned long long>(p->wp_offset()), p->nr_bios);
    out += buf;
  }
  return out;
}

}  // namespace blkmq
