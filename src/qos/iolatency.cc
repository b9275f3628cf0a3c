// io.latency: the kernel's blk-iolatency rebuilt as an rq-qos policy.
//
// Each (group, queue) pair io.latency has seen keeps an IolatGrp (the
// kernel's iolatency_grp, hung on the blkg): an in-flight count with its
// depth limit and sleepers (rq_wait and rq_depth), the latencies of its
// bios in the current window, and, as a parent, the ChildLat its children
// share: the scale cookie. A group with a target checks its window when a
// bio of it ends after the window is over; a miss lowers its parent's
// cookie, and every child of that parent with a looser target or none
// halves its depth when its next bio passes throttle and sees the cookie
// moved. Good windows of the group that caused it (or the timer, once
// nobody did for 5 s) raise the cookie again, and the peers step their
// depth back up, unlimited once the cookie is back at its default.
//
// blkmq makes no blkg for the root group, so the root's ChildLat (the one
// top-level groups share) lives in the queue's BlkIolatency.
#include "qos/iolatency.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <mutex>
#include <utility>

#include "base/event.h"
#include "base/parse.h"
#include "base/spinlock.h"
#include "base/timer.h"
#include "core/core.h"
#include "qos/blkcg.h"
#include "qos/rq_qos.h"

namespace blkmq {
// The policy's types: named (not anonymous) since IolatGrp, which
// blkcg.h names, holds them.
namespace iolat {

constexpr uint64_t kMs = 1000 * 1000;
// Where a cookie starts and where "nobody is scaled down" is.
constexpr uint32_t kDefaultScaleCookie = 1000000;
// A window is the target × 16, within these (BLKIOLATENCY_*_WIN_SIZE).
constexpr uint64_t kMinWinNs = 100 * kMs;
constexpr uint64_t kMaxWinNs = 1000 * kMs;
// Scale events of one parent's children are at least this far apart, so
// a change has time to show in the latencies before the next.
constexpr uint64_t kMinAdjustNs = 500 * kMs;
// A scale up needs this many samples behind it.
constexpr uint64_t kMinGoodSamples = 5;
// The timer's period (the kernel's HZ), and how long a scale-down's cause
// is remembered without a scale event before the timer may scale up.
constexpr uint64_t kTimerNs = 1000 * kMs;
constexpr uint64_t kForgetScaleGrpNs = 5000 * kMs;
constexpr unsigned kUnlimited = UINT_MAX;
// The average latency (rotational devices) decays as the load average
// does: fixed point with 11 bits, the factor picked by window length so
// the decay takes about 1 to 2.5 min of windows.
constexpr unsigned kFixedShift = 11;
constexpr uint64_t kFixed1 = uint64_t{1} << kFixedShift;
constexpr uint64_t kExpFactors[] = {2045, 2039, 2031, 2023, 2014};
constexpr size_t kNrExpFactors = sizeof kExpFactors / sizeof kExpFactors[0];
constexpr uint64_t kExpBucketNs = kMaxWinNs / (kNrExpFactors - 1);

// Latencies of one group over a window (the kernel keeps them per CPU).
struct LatStat {
  uint64_t total = 0;   // samples
  uint64_t missed = 0;  // of them, at or over the target
  uint64_t sum_ns = 0;  // for the mean (rotational devices)
  void add(const LatStat& o) {
    total += o.total;
    missed += o.missed;
    sum_ns += o.sum_ns;
  }
  uint64_t mean() const { return total ? sum_ns / total : 0; }
};

// What the children of one parent share (child_latency_info). Fields
// others read without the lock are atomics.
struct ChildLat {
  base::SpinLock lock;
  uint64_t last_scale_event = 0;  // under lock
  IolatGrp* scale_grp = nullptr;  // under lock; compared, never followed
  std::atomic<uint64_t> scale_lat{0};   // the target that was missed
  std::atomic<uint64_t> nr_samples{0};  // the children's, last summation
  std::atomic<uint32_t> scale_cookie{kDefaultScaleCookie};
};

// A submitter asleep in throttle, granted its slot by whoever wakes it.
struct Waiter {
  Waiter* next = nullptr;
  base::Completion granted;
};

// In-flight bios and the submitters waiting for a slot (rq_wait), FIFO.
struct RqWait {
  std::atomic<unsigned> inflight{0};
  std::atomic<unsigned> nr_sleepers{0};  // in wait_slot's slow path
  std::atomic<unsigned> queued{0};       // of them, asleep in the list
  base::SpinLock lock;
  Waiter* head = nullptr;  // under lock
  Waiter* tail = nullptr;
};

struct BlkIolatency;

}  // namespace iolat

// One group's state on one queue (iolatency_grp), hung on its Blkg
// (Blkg::iolat). In namespace blkmq: blkcg.h names it.
struct IolatGrp {
  using BlkIolatency = iolat::BlkIolatency;
  BlkIolatency* bl = nullptr;
  Blkg* blkg = nullptr;
  IolatGrp* parent = nullptr;  // the parent blkg's; nullptr at the top level
  bool ssd = true;
  std::atomic<uint64_t> min_lat_ns{0};  // the target; 0: none
  std::atomic<uint64_t> cur_win_ns{iolat::kMinWinNs};
  std::atomic<uint64_t> window_start{0};
  std::atomic<uint32_t> scale_cookie{iolat::kDefaultScaleCookie};  // the parent's, last seen
  std::atomic<unsigned> max_depth{iolat::kUnlimited};
  iolat::RqWait rqw;
  base::SpinLock stat_lock;
  iolat::LatStat stat;            // this window; under stat_lock
  iolat::LatStat cur_stat;        // windows since the last scale event; under the parent's ChildLat lock
  std::atomic<uint64_t> nr_samples{0};  // cur_stat's, for the peers' 5 % rule
  std::atomic<uint64_t> lat_avg{0};     // decaying mean (rotational)
  std::atomic<uint64_t> all_samples{0}, all_missed{0};  // since made, for iolatency_info
  iolat::ChildLat child_lat;
};

namespace iolat {

// The policy on one queue (blk_iolatency).
struct BlkIolatency {
  QueueImpl* q = nullptr;
  base::Timer timer;
  std::atomic<bool> timer_armed{false};
  ChildLat root_lat;              // the root's, which has no blkg here
  std::vector<IolatGrp*> grps;    // under iolat_mu()
};

// The functions stay out of blkmq's anonymous namespace: the qos layer
// is one unity translation unit, and blkg.cc has helpers of the same
// names there.
namespace {

// Guards making and freeing IolatGrps and BlkIolatency::grps. Order:
// after q's sysfs lock and the tree mutex, before any spinlock here.
std::mutex& iolat_mu() {
  static auto* m = new std::mutex;  // never destroyed: blkgs may die late
  return *m;
}

BlkIolatency* bl_of(RqQos* r) { return static_cast<BlkIolatency*>(r->data); }

ChildLat& parent_lat(IolatGrp* g) { return g->parent ? g->parent->child_lat : g->bl->root_lat; }

unsigned queue_depth(const BlkIolatency* bl) { return std::max(bl->q->nr_requests_, 1u); }

// ---------------------------------------------------------- the slots ----

// Takes a slot if fewer than the group's limit are in flight.
bool try_inc_below(IolatGrp* g) {
  const unsigned limit = g->max_depth.load(std::memory_order_relaxed);
  unsigned cur = g->rqw.inflight.load(std::memory_order_seq_cst);
  while (cur < limit)
    if (g->rqw.inflight.compare_exchange_weak(cur, cur + 1, std::memory_order_seq_cst)) return true;
  return false;
}

// Grants slots to sleepers in arrival order while the limit allows, then
// wakes them (they hold the slot when they run). Any context.
void wake_waiters(IolatGrp* g) {
  RqWait& w = g->rqw;
  // Pairs with wait_slot's count-then-try: a sleeper that counted itself
  // after this load saw the slot this caller freed.
  if (w.nr_sleepers.load(std::memory_order_seq_cst) == 0) return;
  Waiter* ready = nullptr;
  Waiter** tail = &ready;
  w.lock.lock();
  while (w.head && try_inc_below(g)) {
    Waiter* x = w.head;
    w.head = x->next;
    if (!w.head) w.tail = nullptr;
    x->next = nullptr;
    *tail = x;
    tail = &x->next;
    w.nr_sleepers.fetch_sub(1, std::memory_order_relaxed);
    w.queued.fetch_sub(1, std::memory_order_relaxed);
  }
  w.lock.unlock();
  while (Waiter* x = ready) {
    ready = x->next;
    x->granted.complete();  // x may be gone once this returns
  }
}

// rq_qos_wait: returns holding a slot of g; sleeps, with no tag held, when
// none is free or others wait before it. Task.
void wait_slot(IolatGrp* g) {
  RqWait& w = g->rqw;
  if (w.nr_sleepers.load(std::memory_order_seq_cst) == 0 && try_inc_below(g)) return;
  Waiter me;
  w.lock.lock();
  w.nr_sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (!w.head && try_inc_below(g)) {
    w.nr_sleepers.fetch_sub(1, std::memory_order_relaxed);
    w.lock.unlock();
    return;
  }
  if (w.tail) w.tail->next = &me;
  else w.head = &me;
  w.tail = &me;
  w.queued.fetch_add(1, std::memory_order_relaxed);
  w.lock.unlock();
  me.granted.wait();
}

// ------------------------------------------------------------ scaling ----

unsigned scale_amount(unsigned qd, bool up) { return std::max(up ? qd >> 4 : qd >> 2, 1u); }

// Moves li's cookie one step (scale_cookie_change). Down moves by a
// quarter of the queue depth until it is more than a queue depth below
// the default, then by one, to at most two depths below: deep enough to
// hold through a jagged load, shallow enough to climb out of. Up mirrors
// it by a sixteenth. Under li.lock.
void scale_cookie_change(const BlkIolatency* bl, ChildLat& li, bool up) {
  const unsigned qd = queue_depth(bl);
  const unsigned scale = scale_amount(qd, up);
  const uint32_t old = li.scale_cookie.load(std::memory_order_relaxed);
  const uint32_t diff = old < kDefaultScaleCookie ? kDefaultScaleCookie - old : 0;
  uint32_t next = old;
  if (up) {
    if (uint64_t{scale} + old > kDefaultScaleCookie) next = kDefaultScaleCookie;
    else if (diff > qd) next = old + 1;
    else next = old + scale;
  } else if (diff > qd) {
    if (diff < 2 * qd) next = old - 1;
  } else {
    next = old - scale;
  }
  li.scale_cookie.store(next, std::memory_order_release);
}

// One step of g's depth (scale_change): halved down to 1, or up by a
// sixteenth of the queue depth up to it.
void scale_change(IolatGrp* g, bool up) {
  const unsigned qd = queue_depth(g->bl);
  const unsigned old = std::min(g->max_depth.load(std::memory_order_relaxed), qd);
  if (!up) {
    g->max_depth.store(std::max(old >> 1, 1u), std::memory_order_relaxed);
    return;
  }
  if (old >= qd) return;
  g->max_depth.store(std::min(old + scale_amount(qd, true), qd), std::memory_order_relaxed);
  wake_waiters(g);
}

// At throttle: follows the parent's cookie if it moved since g last
// looked (check_scale_change). A group with a target at least as strict
// as the one missed is not scaled down, nor one that did 5 % or less of
// its siblings' I/O. Task.
void check_scale_change(IolatGrp* g) {
  ChildLat& li = parent_lat(g);
  const uint32_t cur = li.scale_cookie.load(std::memory_order_acquire);
  uint32_t ours = g->scale_cookie.load(std::memory_order_relaxed);
  if (cur == ours) return;
  const bool down = cur < ours;
  if (!g->scale_cookie.compare_exchange_strong(ours, cur)) return;  // another submitter did it
  const uint64_t target = g->min_lat_ns.load(std::memory_order_relaxed);
  if (down && target) {
    const uint64_t missed = li.scale_lat.load(std::memory_order_relaxed);
    if (!missed || target <= missed) return;
    const uint64_t thresh = std::max<uint64_t>(1, li.nr_samples.load(std::memory_order_relaxed) * 5 / 100);
    if (g->nr_samples.load(std::memory_order_relaxed) <= thresh) return;
  }
  // At depth 1 the kernel delays the group's submitters instead
  // (use_delay); blkmq stops here (docs/QOS.md).
  if (down && g->max_depth.load(std::memory_order_relaxed) == 1) return;
  if (cur == kDefaultScaleCookie) {
    g->max_depth.store(kUnlimited, std::memory_order_relaxed);
    wake_waiters(g);
    return;
  }
  scale_change(g, !down);
}

// ------------------------------------------------------------ windows ----

// Whether a summation meets g's target: the device is an SSD if it is not
// rotational, and there at most a tenth of the bios (at least one) may
// miss; on a rotational one the mean must be within it.
bool sum_ok(const IolatGrp* g, const LatStat& s) {
  if (g->ssd) return s.missed < std::max<uint64_t>(s.total / 10, 1);
  return s.mean() <= g->min_lat_ns.load(std::memory_order_relaxed);
}

void record_time(IolatGrp* g, uint64_t lat_ns) {
  const bool miss = lat_ns >= g->min_lat_ns.load(std::memory_order_relaxed);
  g->stat_lock.lock();
  g->stat.total++;
  g->stat.missed += miss;
  g->stat.sum_ns += lat_ns;
  g->stat_lock.unlock();
  g->all_samples.fetch_add(1, std::memory_order_relaxed);
  if (miss) g->all_missed.fetch_add(1, std::memory_order_relaxed);
}

LatStat take_window(IolatGrp* g) {
  g->stat_lock.lock();
  const LatStat s = std::exchange(g->stat, LatStat{});
  g->stat_lock.unlock();
  return s;
}

// calc_load's update of the decaying mean, on rotational devices only.
void update_lat_avg(IolatGrp* g, const LatStat& s) {
  if (g->ssd) return;
  const size_t i = std::min<uint64_t>(kNrExpFactors - 1, g->cur_win_ns.load(std::memory_order_relaxed) / kExpBucketNs);
  const uint64_t e = kExpFactors[i], old = g->lat_avg.load(std::memory_order_relaxed), m = s.mean();
  uint64_t next = old * e + m * (kFixed1 - e);
  if (m >= old) next += kFixed1 - 1;
  g->lat_avg.store(next >> kFixedShift, std::memory_order_relaxed);
}

// After one of g's windows (iolatency_check_latencies): folds the window
// into the summation since the last scale event; a summation that missed
// lowers the parent's cookie (and makes g the group that caused it unless
// a stricter one did), a good one of at least 5 samples raises it again
// if g caused it. At most one event per kMinAdjustNs per parent. The
// caller won the window (one caller per window). Any context.
void check_latencies(IolatGrp* g, uint64_t now) {
  const LatStat stat = take_window(g);
  ChildLat& li = parent_lat(g);
  update_lat_avg(g, stat);
  if (sum_ok(g, stat) && li.scale_cookie.load(std::memory_order_acquire) == kDefaultScaleCookie) return;
  const uint64_t target = g->min_lat_ns.load(std::memory_order_relaxed);
  std::lock_guard<base::SpinLock> l(li.lock);
  g->cur_stat.add(stat);
  const uint64_t mine = g->cur_stat.total;
  li.nr_samples.store(li.nr_samples.load(std::memory_order_relaxed) - g->nr_samples.load(std::memory_order_relaxed) +
                          mine, std::memory_order_relaxed);
  g->nr_samples.store(mine, std::memory_order_relaxed);
  if (li.last_scale_event >= now || now - li.last_scale_event < kMinAdjustNs) return;
  const uint64_t missed = li.scale_lat.load(std::memory_order_relaxed);
  if (sum_ok(g, g->cur_stat) && sum_ok(g, stat)) {
    if (mine < kMinGoodSamples) return;
    if (li.scale_grp == g) {
      li.last_scale_event = now;
      scale_cookie_change(g->bl, li, true);
    }
  } else if (missed == 0 || missed >= target) {
    li.last_scale_event = now;
    if (!li.scale_grp || missed > target) {
      li.scale_lat.store(target, std::memory_order_relaxed);
      li.scale_grp = g;
    }
    scale_cookie_change(g->bl, li, false);
  }
  g->cur_stat = LatStat{};
}

// A parent's scaling starts over (iolatency_clear_scaling): its children
// see the default cookie and go back to unlimited at their next bio.
void clear_scaling(IolatGrp* g) {
  ChildLat& li = parent_lat(g);
  std::lock_guard<base::SpinLock> l(li.lock);
  li.scale_cookie.store(kDefaultScaleCookie, std::memory_order_release);
  li.last_scale_event = 0;
  li.scale_grp = nullptr;
  li.scale_lat.store(0, std::memory_order_relaxed);
}

// One parent at the timer: scales up if nobody caused the scale-down (it
// was cleared or forgotten), forgets the cause after 5 s without an
// event, so an idle cause does not hold its peers down for ever.
void timer_one(const BlkIolatency* bl, ChildLat& li, uint64_t now) {
  if (li.scale_cookie.load(std::memory_order_acquire) >= kDefaultScaleCookie) return;
  std::lock_guard<base::SpinLock> l(li.lock);
  if (li.last_scale_event >= now) return;
  if (!li.scale_grp) scale_cookie_change(bl, li, true);
  else if (now - li.last_scale_event >= kForgetScaleGrpNs) li.scale_grp = nullptr;
}

// blkiolatency_timer_fn: armed by throttle, 1 s out, when not armed.
void timer_fn(BlkIolatency* bl) {
  bl->timer_armed.store(false, std::memory_order_relaxed);
  const uint64_t now = bl->q->clock_ns();
  std::lock_guard<std::mutex> l(iolat_mu());
  timer_one(bl, bl->root_lat, now);
  for (IolatGrp* g : bl->grps) timer_one(bl, g->child_lat, now);
}

// ------------------------------------------------------- group state ----

// b's IolatGrp on bl's queue, made with its ancestors' (pd_alloc and
// pd_init) if missing. A new one follows its parent's current cookie.
// Under iolat_mu().
IolatGrp* make_grp_locked(BlkIolatency* bl, Blkg* b) {
  if (IolatGrp* g = b->iolat.load(std::memory_order_acquire)) return g;
  IolatGrp* parent = b->parent ? make_grp_locked(bl, b->parent) : nullptr;
  auto* g = new IolatGrp;
  g->bl = bl;
  g->blkg = b;
  g->parent = parent;
  g->ssd = !bl->q->limits_.rotational;
  g->window_start.store(bl->q->clock_ns(), std::memory_order_relaxed);
  g->scale_cookie.store((parent ? parent->child_lat : bl->root_lat).scale_cookie.load(), std::memory_order_relaxed);
  bl->grps.push_back(g);
  b->iolat.store(g, std::memory_order_release);
  return g;
}

IolatGrp* grp_of(BlkIolatency* bl, Blkg* b) {
  if (IolatGrp* g = b->iolat.load(std::memory_order_acquire)) [[likely]]
    return g;
  std::lock_guard<std::mutex> l(iolat_mu());
  return make_grp_locked(bl, b);
}

// Sets g's target and window (iolatency_set_min_lat_nsec); a change
// restarts its parent's scaling. Under iolat_mu().
void set_target(IolatGrp* g, uint64_t ns) {
  const uint64_t old = g->min_lat_ns.exchange(ns, std::memory_order_relaxed);
  g->cur_win_ns.store(std::clamp(ns << 4, kMinWinNs, kMaxWinNs), std::memory_order_relaxed);
  if (old != ns) clear_scaling(g);
}

// ------------------------------------------------------------- hooks ----

// blkcg_iolatency_throttle: the bio's group and each ancestor below the
// root, bottom up, follow their cookie and take a slot, sleeping for one
// if their depth is used up. Bios of the root group pass untouched.
void iolat_throttle(RqQos* r, Bio* bio) {
  Blkg* b = bio->blkg;
  if (!b) return;
  BlkIolatency* bl = bl_of(r);
  // The bio's start (bi_issue), and the mark done_bio looks for.
  bio->issue_ns = std::max<uint64_t>(bl->q->clock_ns(), 1);
  for (IolatGrp* g = grp_of(bl, b); g; g = g->parent) {
    check_scale_change(g);
    wait_slot(g);
  }
  if (!bl->timer_armed.load(std::memory_order_relaxed) && !bl->timer_armed.exchange(true))
    bl->timer.arm_after(kTimerNs);
}

// blkcg_iolatency_done_bio: gives back each level's slot, records the
// latency where there is a target (not for a bio that never reached the
// device, BlkStatus::again), and checks the window once it is over.
void iolat_done_bio(RqQos* r, Bio* bio) {
  const uint64_t start = bio->issue_ns;
  if (!start) return;  // merged into another bio's request, not throttled
  bio->issue_ns = 0;
  const uint64_t now = bl_of(r)->q->clock_ns();
  const bool record = bio->status != BlkStatus::again && now > start;
  for (IolatGrp* g = bio->blkg->iolat.load(std::memory_order_acquire); g; g = g->parent) {
    g->rqw.inflight.fetch_sub(1, std::memory_order_seq_cst);
    if (record && g->min_lat_ns.load(std::memory_order_relaxed)) {
      record_time(g, now - start);
      uint64_t ws = g->window_start.load(std::memory_order_relaxed);
      if (now > ws && now - ws >= g->cur_win_ns.load(std::memory_order_relaxed) &&
          g->window_start.compare_exchange_strong(ws, now))
        check_latencies(g, now);
    }
    wake_waiters(g);
  }
}

Status iolat_init(RqQos* r) {
  auto* bl = new BlkIolatency;
  bl->q = to_impl(r->q);
  bl->timer.init(&r->q->runtime().timers(), [bl] { timer_fn(bl); });
  r->data = bl;
  return Status::OK();
}

// The queue is frozen, nothing is in flight: every group's state goes.
void iolat_exit(RqQos* r) {
  BlkIolatency* bl = bl_of(r);
  bl->timer.cancel_sync();
  {
    std::lock_guard<std::mutex> l(iolat_mu());
    for (IolatGrp* g : bl->grps) {
      g->blkg->iolat.store(nullptr, std::memory_order_relaxed);
      delete g;
    }
  }
  delete bl;
  r->data = nullptr;
}

const RqQosType& policy_type() {
  static const RqQosType t = [] {
    RqQosType x;
    x.name = std::string(kIolatencyPolicy);
    x.ops.throttle = iolat_throttle;
    x.ops.done_bio = iolat_done_bio;
    x.ops.exit = iolat_exit;
    x.init = iolat_init;
    return x;
  }();
  return t;
}

// The policy on q, nullptr if it is not on it. Under q's sysfs lock (the
// chain changes under it).
BlkIolatency* policy_on(const QueueImpl* q) {
  RqQos* r = rq_qos_find_locked(const_cast<QueueImpl*>(q), kIolatencyPolicy);
  return r ? bl_of(r) : nullptr;
}

// ---------------------------------------------------------- the file ----

constexpr std::string_view kCgroupDir = "cgroup/";
constexpr std::string_view kFile = "io.latency";

// The group path of an io.latency file; EINVAL for the root's.
Result<std::string_view> group_of_path(std::string_view path) {
  std::string_view p = path.substr(kCgroupDir.size(), path.size() - kCgroupDir.size() - kFile.size());
  if (p.empty() || p == "/")
    return Status::invalid(std::string(path) + ": the root group has no io.latency (as in cgroup v2)");
  return p;
}

// "[MAJ:MIN] target=USEC|max" -> the target in ns, 0 for none.
Result<uint64_t> parse_target(std::string_view path, std::string_view value) {
  const std::string name(path);
  const std::string expected = "[MAJ:MIN] target=USEC (microseconds; max or 0 removes it)";
  size_t i = value.find_first_not_of(" \t\n");
  if (i == std::string_view::npos) return base::invalid_value(name, value, "is empty", expected);
  value.remove_prefix(i);
  value = value.substr(0, value.find_last_not_of(" \t\n") + 1);
  const size_t sp = value.find(' ');
  if (sp != std::string_view::npos && value.substr(0, sp).find(':') != std::string_view::npos) {
    const std::string_view dev = value.substr(0, sp);
    const size_t colon = dev.find(':');
    if (!base::parse_uint(name, dev.substr(0, colon)).ok() || !base::parse_uint(name, dev.substr(colon + 1)).ok())
      return base::invalid_value(name, dev, "is not a device number", expected);
    value = value.substr(value.find_first_not_of(' ', sp));
  }
  if (value.substr(0, 7) != "target=" || value.find(' ') != std::string_view::npos)
    return base::invalid_value(name, value, "is not one key=value pair with the key target", expected);
  const std::string_view v = value.substr(7);
  if (v == "max") return uint64_t{0};
  auto us = base::parse_uint(name + " target", v, 0, UINT64_MAX / 1000, "us, or max");
  if (!us) return us.status();
  return *us * 1000;
}

// g's blkg on q if it has one. Under the tree mutex.
Blkg* iolat_find_blkg(IoGroup* g, const QueueImpl* q) {
  std::lock_guard<base::SpinLock> l(g->blkg_lock);
  for (Blkg* b : g->blkgs)
    if (b->q == q) return b;
  return nullptr;
}

// Adds the policy to q for a first target (blk_iolatency_init).
Status ensure_policy(QueueImpl* q) {
  if (Status st = iolatency_register(); !st) return st;
  Status st = rq_qos_add(q, kIolatencyPolicy);
  return st.ok() || st.code() == EBUSY ? Status::OK() : st;
}

}  // namespace
}  // namespace iolat

Status iolatency_register() {
  using namespace iolat;
  static const Status st = register_rq_qos(&policy_type());
  return st;
}

bool iolatency_attr_is(std::string_view path) {
  using namespace iolat;
  if (path.size() < kCgroupDir.size() + kFile.size() || path.substr(0, kCgroupDir.size()) != kCgroupDir ||
      path.substr(path.size() - kFile.size()) != kFile)
    return false;
  return path.size() == kCgroupDir.size() + kFile.size() || path[path.size() - kFile.size() - 1] == '/';
}

Status iolatency_attr_store(QueueImpl* q, std::string_view path, std::string_view value) {
  using namespace iolat;
  auto group = group_of_path(path);
  if (!group) return group.status();
  auto target = parse_target(path, value);
  if (!target) return target.status();
  if (auto made = io_group_create(*group); !made) return made.status();
  if (*target)
    if (Status st = ensure_policy(q); !st) return st;
  std::lock_guard<std::mutex> sl(q->sysfs_lock_);
  BlkIolatency* bl = policy_on(q);
  if (!bl) {
    if (!*target) return Status::OK();  // nothing set here, nothing to remove
    return Status::error(EAGAIN, std::string(path) + ": io.latency was taken off the queue meanwhile; try again");
  }
  std::lock_guard<std::mutex> tl(blkcg_tree_lock());
  IoGroup* g = io_group_find_locked(*group);
  if (!g) return Status::error(ENOENT, std::string(path) + ": the I/O group was removed");
  Blkg* b = blkg_conf_get_locked(q, g);  // as blkg_conf_prep: made if no bio made it
  std::lock_guard<std::mutex> l(iolat_mu());
  set_target(make_grp_locked(bl, b), *target);
  return Status::OK();
}

Result<std::string> iolatency_attr_show(const QueueImpl* q, std::string_view path) {
  using namespace iolat;
  auto group = group_of_path(path);
  if (!group) return group.status();
  std::lock_guard<std::mutex> tl(blkcg_tree_lock());
  IoGroup* g = io_group_find_locked(*group);
  if (!g) return Status::error(ENOENT, std::string(path) + ": no such I/O group");
  Blkg* b = iolat_find_blkg(g, q);
  std::lock_guard<std::mutex> l(iolat_mu());
  const IolatGrp* ig = b ? b->iolat.load(std::memory_order_acquire) : nullptr;
  const uint64_t ns = ig ? ig->min_lat_ns.load(std::memory_order_relaxed) : 0;
  if (!ns) return std::string();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%u:%u target=%" PRIu64, Queue::kDevMajor, q->minor_, ns / 1000);
  return std::string(buf);
}

std::vector<std::string> iolatency_attr_names() {
  std::vector<std::string> out;
  for (const std::string& p : io_group_list())
    if (p != "/") out.push_back("cgroup" + p + "/io.latency");
  return out;
}

std::string iolatency_stat_keys(const QueueImpl* q, const Blkg* b) {
  using namespace iolat;
  if (!b || !policy_on(q)) return "";
  std::lock_guard<std::mutex> l(iolat_mu());
  IolatGrp* g = b->iolat.load(std::memory_order_acquire);
  if (!g) return "";
  const unsigned d = g->max_depth.load(std::memory_order_relaxed);
  const std::string depth = d == kUnlimited ? "max" : std::to_string(d);
  if (!g->ssd)
    return " depth=" + depth + " avg_lat=" + std::to_string(g->lat_avg.load(std::memory_order_relaxed) / 1000) +
           " win=" + std::to_string(g->cur_win_ns.load(std::memory_order_relaxed) / kMs);
  g->stat_lock.lock();
  const LatStat s = g->stat;
  g->stat_lock.unlock();
  return " missed=" + std::to_string(s.missed) + " total=" + std::to_string(s.total) + " depth=" + depth;
}

void iolatency_blkg_offline(Blkg* b) {
  using namespace iolat;
  if (!b->iolat.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> l(iolat_mu());
  if (IolatGrp* g = b->iolat.load(std::memory_order_acquire)) set_target(g, 0);
}

void iolatency_blkg_free(Blkg* b) {
  using namespace iolat;
  if (!b->iolat.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> l(iolat_mu());
  IolatGrp* g = b->iolat.exchange(nullptr, std::memory_order_acq_rel);
  if (!g) return;  // the policy's exit took it first
  auto& v = g->bl->grps;
  v.erase(std::remove(v.begin(), v.end(), g), v.end());
  delete g;
}

Status iolatency_info(Queue* qp, std::string_view path, IolatencyInfo* out) {
  using namespace iolat;
  QueueImpl* q = to_impl(qp);
  *out = IolatencyInfo{};
  std::lock_guard<std::mutex> sl(q->sysfs_lock_);
  BlkIolatency* bl = policy_on(q);
  out->on_queue = bl != nullptr;
  std::lock_guard<std::mutex> tl(blkcg_tree_lock());
  IoGroup* g = io_group_find_locked(path);
  if (!g) return Status::error(ENOENT, "I/O group '" + std::string(path) + "' does not exist");
  Blkg* b = g->parent ? iolat_find_blkg(g, q) : nullptr;
  std::lock_guard<std::mutex> l(iolat_mu());
  IolatGrp* ig = b ? b->iolat.load(std::memory_order_acquire) : nullptr;
  if (!ig) return Status::OK();
  out->tracked = true;
  out->target_ns = ig->min_lat_ns.load();
  out->window_ns = ig->cur_win_ns.load();
  out->max_depth = ig->max_depth.load();
  out->inflight = ig->rqw.inflight.load();
  out->waiting = ig->rqw.queued.load();
  out->samples = ig->all_samples.load();
  out->missed = ig->all_missed.load();
  out->scale_cookie = parent_lat(ig).scale_cookie.load();
  return Status::OK();
}

}  // namespace blkmq
