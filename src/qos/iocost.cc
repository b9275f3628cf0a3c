// io.cost: the kernel's blk-iocost rebuilt as an rq-qos policy.
//
// Device time is vtime: 2^37 a second at 100 %. The device's vtime, vnow,
// runs at vrate from the start of the current period. A group (Iocg) that
// issues is active: its weight joins its siblings' in the active tree, and
// its hweight is its share of the device, the product of its weight over
// its active siblings' at every level. A bio's cost is its absolute cost
// from the linear model divided by that share; the group's vtime cursor
// advances by it, and a bio whose cost would carry the cursor past vnow
// waits in throttle (no tag held) until vnow catches up. A group idle for
// a whole period leaves the tree, its share going to the others; a cursor
// never lags vnow by more than half a period (MARGIN_PCT), so an idle
// group cannot save up budget. At each period's end vrate moves: down
// while requests wait for tags or completions miss the latency targets,
// up while groups wait and the device keeps its targets (busy_level and
// vrate_adj_pct, as the kernel's ioc_timer_fn).
//
// docs/QOS.md, "io.cost", says what is simplified: weight donation
// (inuse < active), the lagging-I/O rule and the autop steps between SSD
// classes are not here.
#include "qos/iocost.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/core.h"
#include "qos/blkcg.h"
#include "qos/iocost_internal.h"
#include "qos/rq_qos.h"

namespace blkmq {
namespace iocost {

std::mutex& iocost_mu() {
  static auto* m = new std::mutex;  // never destroyed: blkgs may die late
  return *m;
}

// g's share of the device (current_hweight), cached until the tree
// changes. Under ioc->lock.
uint32_t hweight_locked(Iocg* g) {
  Ioc* ioc = g->ioc;
  if (g->hweight_gen == ioc->hweight_gen) return g->hweight;
  uint64_t hw = kHweightWhole;
  for (Iocg* n = g; n; n = n->parent) {
    const uint64_t sum = n->parent ? n->parent->child_active_sum : ioc->root_active_sum;
    if (!n->active || !sum) break;  // not in the tree: cost at full share
    hw = hw * n->active / sum;
  }
  g->hweight = static_cast<uint32_t>(std::max<uint64_t>(hw, 1));
  g->hweight_gen = ioc->hweight_gen;
  return g->hweight;
}

// Functions in a namespace of their own: the qos layer is one unity
// translation unit.
namespace {

// Adjustment per period, in percent, indexed by |busy_level|.
constexpr uint8_t kVrateAdjPct[] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2,
                                    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4, 8, 8, 8, 8, 8,
                                    8, 8, 8, 16};
constexpr int kNrAdj = sizeof kVrateAdjPct;

thread_local uint64_t t_throttled_at = 0;  // throttle's exit, for track's rq_wait

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

Ioc* ioc_of(RqQos* r) { return static_cast<Ioc*>(r->data); }

// The device's vtime now (ioc_now). Under ioc->lock.
uint64_t vnow_at(const Ioc* ioc, uint64_t now_ns) {
  const uint64_t elapsed = now_ns > ioc->period_at_ns ? now_ns - ioc->period_at_ns : 0;
  // 128 bits: after hours idle at a high vrate the product passes 2^64.
  const unsigned __int128 v = static_cast<unsigned __int128>(elapsed) * ioc->vrate.load(std::memory_order_relaxed);
  return ioc->period_at_vtime + static_cast<uint64_t>(v / 1000);
}

// How far behind vnow a cursor may lag, in vtime.
uint64_t margin_vt(const Ioc* ioc) { return ioc->margin_ns * ioc->vrate.load(std::memory_order_relaxed) / 1000; }

uint64_t& parent_sum(Ioc* ioc, Iocg* g) { return g->parent ? g->parent->child_active_sum : ioc->root_active_sum; }

// Puts g and its inactive ancestors in the active tree with their weights
// (propagate_weights on activation). Under ioc->lock.
void tree_add(Ioc* ioc, Iocg* g) {
  for (Iocg* n = g; n && !n->active; n = n->parent) {
    n->active = n->weight;
    parent_sum(ioc, n) += n->active;
  }
  ioc->hweight_gen++;
}

// Takes g out of the tree, and each ancestor left with neither bios of its
// own nor active children. Under ioc->lock.
void tree_remove(Ioc* ioc, Iocg* g) {
  for (Iocg* n = g; n && n->active && !n->self_active && !n->child_active_sum; n = n->parent) {
    parent_sum(ioc, n) -= n->active;
    n->active = 0;
  }
  ioc->hweight_gen++;
}

// A period starts at vnow (computed at the rate the last one ran at).
void start_period(Ioc* ioc, uint64_t now_ns, uint64_t vnow) {
  ioc->period_at_vtime = vnow;
  ioc->period_at_ns = now_ns;
  ioc->timer.arm_at(now_ns + ioc->period_ns);
  ioc->running = true;
}

// g issues in this period (iocg_activate): joins the tree with at most a
// margin of budget. Under ioc->lock.
void activate(Iocg* g, uint64_t now_ns) {
  Ioc* ioc = g->ioc;
  g->active_period = ioc->cur_period;
  if (g->self_active) return;
  if (!ioc->running) start_period(ioc, now_ns, vnow_at(ioc, now_ns));
  const uint64_t vnow = vnow_at(ioc, now_ns), margin = margin_vt(ioc);
  if (vnow > margin && g->vtime < vnow - margin) g->vtime = vnow - margin;
  g->self_active = true;
  tree_add(ioc, g);
  ioc->active.push_back(g);
}

void deactivate(Iocg* g) {
  Ioc* ioc = g->ioc;
  g->self_active = false;
  tree_remove(ioc, g);
  auto& v = ioc->active;
  v.erase(std::remove(v.begin(), v.end(), g), v.end());
}

// The linear model's absolute cost of bio for g (calc_vtime_cost): reads
// and writes only; a merge pays its pages and no seek.
uint64_t abs_cost(const Ioc* ioc, const Iocg* g, const Bio* bio, bool merge) {
  if (!bio->size || (bio->op != ReqOp::read && bio->op != ReqOp::write)) return 0;
  const bool w = bio->op == ReqOp::write;
  const uint64_t pages = std::max<uint64_t>(bio->size >> kPageShift, 1);
  uint64_t cost = pages * ioc->lcoefs[w ? kWpage : kRpage];
  if (!merge) {
    const uint64_t seek = g->cursor ? uint64_t(std::llabs(int64_t(bio->sector - g->cursor))) >> (kPageShift - 9) : 0;
    cost += ioc->lcoefs[seek > kRandioPages ? (w ? kWrandio : kRrandio) : (w ? kWseqio : kRseqio)];
  }
  return cost;
}

uint64_t scaled(uint64_t abs, uint32_t hw) { return div_up(abs * kHweightWhole, hw); }

// Pays the waiters at the head of g's queue while its budget allows
// (iocg_kick_waitq), moving them to *ready; arms the wake-up for the next
// one. Under ioc->lock.
void kick_waitq(Iocg* g, uint64_t now_ns, Waiter** ready) {
  Ioc* ioc = g->ioc;
  const uint64_t vnow = vnow_at(ioc, now_ns);
  const uint32_t hw = hweight_locked(g);
  while (Waiter* w = g->head) {
    const uint64_t cost = scaled(w->abs_cost, hw);
    if (ioc->enabled && g->vtime + cost > vnow) {
      const uint64_t need = g->vtime + cost - vnow;
      const uint64_t vrate = std::max<uint64_t>(ioc->vrate.load(std::memory_order_relaxed), 1);
      const uint64_t delay = div_up(need * 1000, vrate);
      g->waitq_timer.arm_at(now_ns + delay + delay * kWaitqTimerMarginPct / 100);
      return;
    }
    if (ioc->enabled) {
      g->vtime += cost;
      g->usage_vt.fetch_add(w->abs_cost, std::memory_order_relaxed);
    }
    g->head = w->next;
    if (!g->head) g->tail = nullptr;
    g->nr_waiting.fetch_sub(1, std::memory_order_relaxed);
    w->next = *ready;
    *ready = w;
  }
}

void waitq_timer_fn(Iocg* g) {
  Waiter* ready = nullptr;
  g->ioc->lock.lock();
  kick_waitq(g, g->ioc->q->clock_ns(), &ready);
  g->ioc->lock.unlock();
  wake_all(ready);
}

// ------------------------------------------------------------ periods ----

// busy_level's next value from the period's signals (ioc_timer_fn).
int next_busy_level(const Ioc* ioc, uint64_t rq_wait_pct, const uint64_t missed_ppm[2], unsigned shortages) {
  const uint64_t rthr = kMillion - ioc->params.qos[kRppm], wthr = kMillion - ioc->params.qos[kWppm];
  int level = ioc->busy_level;
  if (rq_wait_pct > kRqWaitBusyPct || missed_ppm[0] > rthr || missed_ppm[1] > wthr) {
    level = std::max(level, 0) + 1;  // missing the targets: issue less
  } else if (rq_wait_pct <= kRqWaitBusyPct * kUnbusyThrPct / 100 && missed_ppm[0] <= rthr * kUnbusyThrPct / 100 &&
             missed_ppm[1] <= wthr * kUnbusyThrPct / 100) {
    // Targets met with a margin: groups waiting mean the device has room.
    level = shortages ? std::min(level, 0) - 1 : 0;
  } else {
    level = 0;  // within the hysteresis
  }
  return std::clamp(level, -1000, 1000);
}

// vrate one step towards busy_level's way, or back inside its bounds.
void adjust_vrate(Ioc* ioc, uint64_t rq_wait_pct) {
  if (ioc->busy_level == 0) return;
  uint64_t vrate = ioc->vrate.load(std::memory_order_relaxed);
  uint64_t lo = ioc->vrate_min;
  const uint64_t hi = ioc->vrate_max;
  // Waiting for tags is a sure sign: the user's minimum does not hold then.
  if (rq_wait_pct > kRqWaitBusyPct) lo = div_up(kVtimePerUsec * kVrateMinPpm, kMillion);
  if (vrate < lo) {
    vrate = std::min(vrate * (100 + kVrateClampAdjPct) / 100, lo);
  } else if (vrate > hi) {
    vrate = std::max(vrate * (100 - kVrateClampAdjPct) / 100, hi);
  } else {
    const uint64_t adj = kVrateAdjPct[std::min(std::abs(ioc->busy_level), kNrAdj - 1)];
    const uint64_t pct = ioc->busy_level > 0 ? 100 - adj : 100 + adj;
    vrate = std::clamp(div_up(vrate * pct, 100), lo, hi);
  }
  ioc->vrate.store(vrate, std::memory_order_relaxed);
}

// A group's weight in force: this device's, else the group's default. A
// change applies at the next period (the kernel applies it at once).
void refresh_weight(Ioc* ioc, Iocg* g) {
  const unsigned w = g->cfg_weight ? g->cfg_weight : io_group_cost_weight(g->blkg->group);
  if (w == g->weight) return;
  g->weight = w;
  if (g->active) {
    parent_sum(ioc, g) += w - uint64_t{g->active};
    g->active = w;
    ioc->hweight_gen++;
  }
}

// The period's end (ioc_timer_fn): idle groups leave, cursors give up
// budget beyond the margin, vrate moves, and a new period starts while
// any group is active. Timer context.
void timer_fn(Ioc* ioc) {
  Waiter* ready = nullptr;
  std::lock_guard<std::mutex> ml(iocost_mu());  // ioc->all stays put
  ioc->lock.lock();
  const uint64_t now = ioc->q->clock_ns();
  const uint64_t elapsed = std::max<uint64_t>(now - ioc->period_at_ns, 1);
  const uint64_t rq_wait_pct = ioc->rq_wait_ns.exchange(0) * 100 / elapsed;
  uint64_t missed_ppm[2];
  for (int d = 0; d < 2; d++) {
    const uint64_t met = ioc->nr_met[d].exchange(0), missed = ioc->nr_missed[d].exchange(0);
    missed_ppm[d] = met + missed ? missed * kMillion / (met + missed) : 0;
  }
  for (Iocg* g : ioc->all) refresh_weight(ioc, g);
  unsigned shortages = 0;
  const std::vector<Iocg*> was = ioc->active;
  for (Iocg* g : was) {
    if (g->waited || g->head) shortages++;
    g->waited = g->head != nullptr;
    if (!g->head && g->active_period < ioc->cur_period) deactivate(g);
  }
  const uint64_t vnow = vnow_at(ioc, now), margin = margin_vt(ioc);
  for (Iocg* g : ioc->active)
    if (vnow > margin && g->vtime < vnow - margin) g->vtime = vnow - margin;
  if (ioc->enabled) {
    ioc->busy_level = next_busy_level(ioc, rq_wait_pct, missed_ppm, shortages);
    adjust_vrate(ioc, rq_wait_pct);
  }
  ioc->cur_period++;
  ioc->periods.fetch_add(1, std::memory_order_relaxed);
  ioc->running = false;
  if (!ioc->active.empty()) start_period(ioc, now, vnow);
  for (Iocg* g : ioc->active) kick_waitq(g, now, &ready);
  ioc->lock.unlock();
  wake_all(ready);
}

// -------------------------------------------------------------- hooks ----

Iocg* iocg_of(Ioc* ioc, Blkg* b) {
  if (Iocg* g = b->iocg.load(std::memory_order_acquire)) [[likely]]
    return g;
  std::lock_guard<std::mutex> l(iocost_mu());
  return make_iocg_locked(ioc, b);
}

// Waits in g's queue for the bio's cost to be paid. Task.
void wait_turn(Iocg* g, Waiter* me) {
  const uint64_t t0 = g->ioc->q->clock_ns();
  me->granted.wait();
  g->wait_ns.fetch_add(g->ioc->q->clock_ns() - t0, std::memory_order_relaxed);
}

// ioc_rqos_throttle: pays the bio's cost from the group's budget, or
// sleeps until vnow has made room for it. Bios of the root group, and
// metadata and nowait bios (which must not wait), pass; the latter two
// pay anyway, into debt.
void ioc_throttle(RqQos* r, Bio* bio) {
  Ioc* ioc = ioc_of(r);
  Blkg* b = bio->blkg;
  if (!b) {
    t_throttled_at = ioc->q->clock_ns();  // its tag wait counts too
    return;
  }
  t_throttled_at = 0;
  Iocg* g = iocg_of(ioc, b);
  Waiter me;
  Waiter* ready = nullptr;
  ioc->lock.lock();
  if (!ioc->enabled) {
    ioc->lock.unlock();
    return;
  }
  const uint64_t now = ioc->q->clock_ns();
  activate(g, now);
  const uint64_t abs = abs_cost(ioc, g, bio, false);
  g->cursor = bio->sector + (bio->size >> 9);
  const uint64_t cost = scaled(abs, hweight_locked(g));
  const uint64_t vnow = vnow_at(ioc, now);
  const bool must_go = bio->flags & (kBioMeta | kBioNowait);
  if (!abs || (!g->head && g->vtime + cost <= vnow) || must_go) {
    if (must_go && g->vtime + cost > vnow) g->indebt_vt.fetch_add(abs, std::memory_order_relaxed);
    g->vtime += cost;
    g->usage_vt.fetch_add(abs, std::memory_order_relaxed);
    ioc->lock.unlock();
    t_throttled_at = now;
    return;
  }
  me.abs_cost = abs;
  if (g->tail) g->tail->next = &me;
  else g->head = &me;
  g->tail = &me;
  g->nr_waiting.fetch_add(1, std::memory_order_relaxed);
  g->waited = true;
  kick_waitq(g, now, &ready);
  ioc->lock.unlock();
  wake_all(ready);
  wait_turn(g, &me);
  t_throttled_at = ioc->q->clock_ns();
}

// The time from throttle to a request in hand is the tag wait (rq_wait).
void ioc_track(RqQos* r, Request*, Bio*) {
  if (!t_throttled_at) return;
  const uint64_t now = ioc_of(r)->q->clock_ns();
  if (now > t_throttled_at) ioc_of(r)->rq_wait_ns.fetch_add(now - t_throttled_at, std::memory_order_relaxed);
  t_throttled_at = 0;
}

// ioc_rqos_merge: a bio merged into a request pays its pages, into debt if
// the budget does not cover them (it cannot wait: the request holds a tag).
void ioc_merge(RqQos* r, Request*, Bio* bio) {
  Ioc* ioc = ioc_of(r);
  Blkg* b = bio->blkg;
  if (!b) return;
  Iocg* g = iocg_of(ioc, b);
  ioc->lock.lock();
  if (ioc->enabled) {
    const uint64_t now = ioc->q->clock_ns();
    activate(g, now);
    const uint64_t abs = abs_cost(ioc, g, bio, true);
    const uint64_t cost = scaled(abs, hweight_locked(g));
    if (g->vtime + cost > vnow_at(ioc, now)) g->indebt_vt.fetch_add(abs, std::memory_order_relaxed);
    g->vtime += cost;
    g->usage_vt.fetch_add(abs, std::memory_order_relaxed);
  }
  ioc->lock.unlock();
}

// ioc_rqos_done: a read or write met its latency target if its time on
// the queue, less its size's share (the model's page cost at vrate), is
// within it. The time starts at the request's accounting start (its
// allocation), so only with iostats on.
void ioc_done(RqQos* r, Request* rq) {
  Ioc* ioc = ioc_of(r);
  if (!rq->start_time_ns || (rq->op != ReqOp::read && rq->op != ReqOp::write)) return;
  const int d = rq->op == ReqOp::write;
  const uint64_t now = ioc->q->clock_ns();
  const uint64_t on_q = now > rq->start_time_ns ? now - rq->start_time_ns : 0;
  const uint64_t pages = std::max<uint64_t>(rq->data_len >> kPageShift, 1);
  // Copies refresh_params keeps: the parameters change under the lock.
  const uint64_t size_ns = pages * ioc->done_page_ns[d].load(std::memory_order_relaxed);
  const uint64_t target_ns = ioc->done_target_ns[d].load(std::memory_order_relaxed);
  const bool met = on_q <= size_ns || on_q - size_ns <= target_ns;
  (met ? ioc->nr_met[d] : ioc->nr_missed[d]).fetch_add(1, std::memory_order_relaxed);
}

Status ioc_init(RqQos* r) {
  auto* ioc = new Ioc;
  ioc->q = to_impl(r->q);
  ioc->timer.init(&r->q->runtime().timers(), [ioc] { timer_fn(ioc); });
  ioc->lock.lock();
  refresh_params(ioc);
  ioc->lock.unlock();
  r->data = ioc;
  return Status::OK();
}

// The queue is frozen and nothing is in flight: nobody waits in throttle.
void ioc_exit(RqQos* r) {
  Ioc* ioc = ioc_of(r);
  ioc->timer.cancel_sync();
  {
    std::lock_guard<std::mutex> l(iocost_mu());
    for (Iocg* g : ioc->all) {
      g->waitq_timer.cancel_sync();
      g->blkg->iocg.store(nullptr, std::memory_order_relaxed);
      delete g;
    }
  }
  delete ioc;
  r->data = nullptr;
}

}  // namespace

const RqQosType& policy_type() {
  static const RqQosType t = [] {
    RqQosType x;
    x.name = std::string(kIocostPolicy);
    x.ops.throttle = ioc_throttle;
    x.ops.track = ioc_track;
    x.ops.merge = ioc_merge;
    x.ops.done = ioc_done;
    x.ops.exit = ioc_exit;
    x.init = ioc_init;
    return x;
  }();
  return t;
}

Ioc* ioc_on(const QueueImpl* q) {
  RqQos* r = rq_qos_find_locked(const_cast<QueueImpl*>(q), kIocostPolicy);
  return r ? ioc_of(r) : nullptr;
}

Iocg* make_iocg_locked(Ioc* ioc, Blkg* b) {
  if (Iocg* g = b->iocg.load(std::memory_order_acquire)) return g;
  Iocg* parent = b->parent ? make_iocg_locked(ioc, b->parent) : nullptr;
  auto* g = new Iocg;
  g->ioc = ioc;
  g->blkg = b;
  g->parent = parent;
  g->weight = io_group_cost_weight(b->group);
  g->waitq_timer.init(&ioc->q->runtime().timers(), [g] { waitq_timer_fn(g); });
  ioc->all.push_back(g);
  b->iocg.store(g, std::memory_order_release);
  return g;
}

void set_enabled(Ioc* ioc, bool on, Waiter** ready) {
  if (ioc->enabled == on) return;
  ioc->enabled = on;
  if (on) return;
  // Off: the sleepers go without paying, as the kernel's ioc_pd_offline
  // and disable let them.
  const uint64_t now = ioc->q->clock_ns();
  for (Iocg* g : std::vector<Iocg*>(ioc->active)) {
    g->waitq_timer.cancel();
    kick_waitq(g, now, ready);
    deactivate(g);
  }
}

void wake_all(Waiter* ready) {
  while (Waiter* w = ready) {
    ready = w->next;
    w->granted.complete();  // w may be gone once this returns
  }
}

}  // namespace iocost

Status iocost_register() {
  static const Status st = register_rq_qos(&iocost::policy_type());
  return st;
}

void iocost_blkg_free(Blkg* b) {
  using namespace iocost;
  if (!b->iocg.load(std::memory_order_acquire)) return;
  Iocg* g;
  {
    std::lock_guard<std::mutex> l(iocost_mu());
    g = b->iocg.exchange(nullptr, std::memory_order_acq_rel);
    if (!g) return;  // the policy's exit took it first
    Ioc* ioc = g->ioc;
    ioc->lock.lock();
    if (g->self_active) deactivate(g);
    ioc->lock.unlock();
    auto& v = ioc->all;
    v.erase(std::remove(v.begin(), v.end(), g), v.end());
  }
  g->waitq_timer.cancel_sync();
  delete g;
}

}  // namespace blkmq
