// wbt, writeback throttling: the kernel's block/blk-wbt.c rebuilt on the
// rq-qos chain. In short (docs/QOS.md, "wbt", has the whole model): writes
// the page cache would send (kBioWriteback) and discards take a slot of
// their class before they get a request, and sleep, holding no tag, while
// their class is at its limit. The limit comes from a scale step that a
// window timer moves: down while the window's fastest read was slower than
// the target, up while reads are fine, towards the middle when it cannot
// tell.
#include "qos/wbt.h"

#include <cerrno>
#include <cstdint>
#include <mutex>

#include "base/event.h"
#include "base/parse.h"
#include "base/registry.h"
#include "base/spinlock.h"
#include "base/timer.h"
#include "core/core.h"
#include "qos/rq_qos.h"

namespace blkmq {
namespace {

// A request's wbt_flags (the kernel's enum wbt_flags).
enum WbtFlag : uint8_t { kWbtTracked = 1, kWbtRead = 2, kWbtKswapd = 4, kWbtDiscard = 8 };
// The classes that count and wait apart. Normal and background writeback
// share one (their limits differ, not their count), as in the kernel. No
// user-space writer is kswapd: its class is kept so the classes and the
// debug output line up with the kernel's, and stays empty.
enum WbtClass : unsigned { kRwqBg = 0, kRwqKswapd = 1, kRwqDiscard = 2, kNumRwq = 3 };
enum WbtState : int { kOnDefault = 1, kOnManual = 2, kOffDefault = 3, kOffManual = 4 };
enum LatStatus { kLatOk, kLatUnknown, kLatUnknownWrites, kLatExceeded };

constexpr unsigned kDefaultDepth = 16;             // RWB_DEF_DEPTH
constexpr uint64_t kWindowNs = 100'000'000;        // RWB_WINDOW_NSEC
constexpr uint64_t kMinWriteSamples = 3;           // RWB_MIN_WRITE_SAMPLES
constexpr unsigned kUnknownBump = 5;               // RWB_UNKNOWN_BUMP
constexpr uint64_t kCloseIoNs = 100'000'000;       // close_io's HZ / 10
constexpr uint64_t kDefaultLatNonrot = 2'000'000;  // wbt_default_latency_nsec
constexpr uint64_t kDefaultLatRot = 75'000'000;

// One writer asleep in throttle, on its own stack. A waker that finds room
// for it takes the slot on its behalf, unlinks it and completes `granted`.
struct Waiter {
  Waiter* next = nullptr;
  ReqOp op;
  uint32_t bio_flags;
  base::Completion granted;
};

// The kernel's rq_wait: one class's in-flight count and its sleepers in
// arrival order. `lock` may be taken in any context (completions).
struct RqWait {
  std::atomic<int> inflight{0};
  std::atomic<bool> has_sleepers{false};
  base::SpinLock lock;
  Waiter* head = nullptr;  // under lock
  Waiter* tail = nullptr;
  unsigned nr_sleepers = 0;
};

// The kernel's rq_depth: what the scale step allows.
struct RqDepth {
  unsigned queue_depth = 1;
  unsigned default_depth = kDefaultDepth;
  unsigned max_depth = 1;
  int scale_step = 0;
  bool scaled_max = false;
};

struct Rwb {
  RqQos* rqos = nullptr;
  QueueImpl* q = nullptr;
  // Depth, step, window and state changes: the timer, attribute writes,
  // the first write of a window. Never taken in completion context.
  std::mutex lock;
  RqDepth depth;             // under lock
  unsigned unknown_cnt = 0;  // under lock
  bool watching = false;     // under lock: holds rq_qos_watch_all
  std::atomic<int> enable_state{kOnDefault};
  std::atomic<uint64_t> min_lat_nsec{0};
  // Read without the lock on the I/O paths.
  std::atomic<unsigned> max_depth{0}, wb_normal{0}, wb_background{0};
  uint64_t win_nsec = kWindowNs;
  std::atomic<uint64_t> cur_win_nsec{kWindowNs};
  base::Timer timer;  // the window (the kernel's blk_stat callback timer)
  // Whether the window timer is pending (blk_stat_is_active): set and
  // cleared under lock, read on the I/O paths (Timer::armed takes the
  // timer queue's mutex, too dear for every completion).
  std::atomic<bool> window_open{false};
  // The open window's samples (blk_rq_stat for READ and WRITE).
  std::atomic<uint64_t> read_samples{0}, write_samples{0}, read_min{UINT64_MAX};
  // The oldest read in flight, to catch a read stuck behind writes.
  std::atomic<const Request*> sync_cookie{nullptr};
  std::atomic<uint64_t> sync_issue{0};
  // When a read was last issued and completed (close_io).
  std::atomic<uint64_t> last_issue{0}, last_comp{0};
  RqWait rqw[kNumRwq];
};

Rwb* rwb_of(RqQos* r) { return static_cast<Rwb*>(r->data); }

bool rwb_enabled(const Rwb* rwb) {
  const int s = rwb->enable_state.load(std::memory_order_relaxed);
  return s == kOnDefault || s == kOnManual;
}

uint64_t default_latency(const QueueImpl* q) { return q->limits_.rotational ? kDefaultLatRot : kDefaultLatNonrot; }

// ----------------------------------------------------------- limits ----

// rq_depth_calc_max_depth: true when scaling up cannot go further.
bool calc_max_depth(RqDepth* d) {
  if (d->queue_depth == 1) {
    // A device of depth one still gets two, so a request is ready when one
    // completes; scaled down, one.
    d->max_depth = d->scale_step > 0 ? 1 : 2;
    return d->scale_step <= 0;
  }
  unsigned depth = std::min(d->default_depth, d->queue_depth);
  bool at_max = false;
  if (d->scale_step > 0) {
    depth = 1 + ((depth - 1) >> std::min(31, d->scale_step));
  } else if (d->scale_step < 0) {
    const unsigned maxd = 3 * d->queue_depth / 4;
    const int shift = std::min(31, -d->scale_step);
    const uint64_t grown = 1 + (uint64_t{depth - 1} << shift);
    depth = grown > maxd ? maxd : static_cast<unsigned>(grown);
    at_max = grown > maxd;
  }
  d->max_depth = depth;
  return at_max;
}

bool scale_up_depth(RqDepth* d) {
  if (d->scaled_max) return false;
  d->scale_step--;
  d->scaled_max = calc_max_depth(d);
  return true;
}

// `hard`: a latency miss, which snaps a negative step back to the middle.
bool scale_down_depth(RqDepth* d, bool hard) {
  if (d->max_depth == 1) return false;  // no lower; keeps the step sane
  if (d->scale_step < 0 && hard) d->scale_step = 0;
  else d->scale_step++;
  d->scaled_max = false;
  calc_max_depth(d);
  return true;
}

// calc_wb_limits: normal writeback gets about half the depth, background
// about a quarter. Under rwb->lock.
void calc_wb_limits(Rwb* rwb) {
  const unsigned m = rwb->depth.max_depth;
  unsigned normal, background;
  if (rwb->min_lat_nsec.load(std::memory_order_relaxed) == 0) {
    normal = background = 0;
  } else if (m <= 2) {
    normal = m;
    background = 1;
  } else {
    normal = (m + 1) / 2;
    background = (m + 3) / 4;
  }
  rwb->max_depth.store(m, std::memory_order_relaxed);
  rwb->wb_normal.store(normal, std::memory_order_relaxed);
  rwb->wb_background.store(background, std::memory_order_relaxed);
}

// close_io: a read was issued or completed in the last 100 ms.
bool close_io(Rwb* rwb) {
  const uint64_t now = rwb->q->coarse_clock_ns();
  return now - rwb->last_issue.load(std::memory_order_relaxed) < kCloseIoNs ||
         now - rwb->last_comp.load(std::memory_order_relaxed) < kCloseIoNs;
}

// get_limit: how many of its class a write may join. WB_SYNC_ALL
// writeback (kBioSync) and metadata get the whole depth; background
// writeback, or any writeback while reads are about, the smallest.
unsigned get_limit(Rwb* rwb, ReqOp op, uint32_t bio_flags) {
  if (op == ReqOp::discard) return rwb->wb_background.load(std::memory_order_relaxed);
  if (bio_flags & (kBioSync | kBioMeta)) return rwb->max_depth.load(std::memory_order_relaxed);
  if ((bio_flags & kBioBackground) || close_io(rwb)) return rwb->wb_background.load(std::memory_order_relaxed);
  return rwb->wb_normal.load(std::memory_order_relaxed);
}

// ------------------------------------------------------------ waits ----

// Takes a slot of rqw if it is below the writer's limit; with wbt off,
// always (the slot is still counted, so done stays balanced).
bool try_get(Rwb* rwb, RqWait* rqw, ReqOp op, uint32_t bio_flags) {
  if (!rwb_enabled(rwb)) {
    rqw->inflight.fetch_add(1, std::memory_order_seq_cst);
    return true;
  }
  const int limit = static_cast<int>(get_limit(rwb, op, bio_flags));
  int cur = rqw->inflight.load(std::memory_order_relaxed);
  do {
    if (cur >= limit) return false;
  } while (!rqw->inflight.compare_exchange_weak(cur, cur + 1, std::memory_order_seq_cst));
  return true;
}

// Grants slots to sleepers in arrival order while they fit, as the
// kernel's exclusive wake-up whose callback takes the slot. Any context.
void wake_sleepers(Rwb* rwb, RqWait* rqw) {
  Waiter* ready = nullptr;
  rqw->lock.lock();
  while (Waiter* w = rqw->head) {
    if (!try_get(rwb, rqw, w->op, w->bio_flags)) break;
    rqw->head = w->next;
    if (!rqw->head) rqw->tail = nullptr;
    rqw->nr_sleepers--;
    w->next = ready;
    ready = w;
  }
  if (!rqw->head) rqw->has_sleepers.store(false, std::memory_order_relaxed);
  rqw->lock.unlock();
  while (Waiter* w = ready) {
    ready = w->next;  // read before complete(): the sleeper may return at once
    w->granted.complete();
  }
}

void wake_all(Rwb* rwb) {
  for (RqWait& rqw : rwb->rqw)
    if (rqw.has_sleepers.load(std::memory_order_seq_cst)) wake_sleepers(rwb, &rqw);
}

// rq_qos_wait: returns holding a slot of rqw; sleeps, without a tag, until
// a completion or a new limit makes room. Task context.
void wait_for_slot(Rwb* rwb, RqWait* rqw, ReqOp op, uint32_t bio_flags) {
  if (!rqw->has_sleepers.load(std::memory_order_seq_cst) && try_get(rwb, rqw, op, bio_flags)) return;
  Waiter w;
  w.op = op;
  w.bio_flags = bio_flags;
  rqw->lock.lock();
  const bool first = rqw->head == nullptr;
  // Published before the check below: a completion that lowers inflight
  // after that check then sees a sleeper (seq_cst on both sides).
  rqw->has_sleepers.store(true, std::memory_order_seq_cst);
  if (first && try_get(rwb, rqw, op, bio_flags)) {
    rqw->has_sleepers.store(false, std::memory_order_relaxed);
    rqw->lock.unlock();
    return;
  }
  if (rqw->tail) rqw->tail->next = &w;
  else rqw->head = &w;
  rqw->tail = &w;
  rqw->nr_sleepers++;
  rqw->lock.unlock();
  w.granted.wait();
}

// wbt_rqw_done: a slot comes back. Sleepers are woken only once the class
// is well below its limit (or empty), so they go in batches, not one by
// one. On a write-back cache device writes wait until none is in flight
// (the kernel's "no recent balance_dirty_pages wait" case, always true
// here: blkmq has no page cache). Any context.
void slot_done(Rwb* rwb, RqWait* rqw, uint8_t flags) {
  const int inflight = rqw->inflight.fetch_sub(1, std::memory_order_seq_cst) - 1;
  int limit;
  if (flags & kWbtDiscard) limit = static_cast<int>(rwb->wb_background.load(std::memory_order_relaxed));
  else if (rwb->q->limits_.write_cache) limit = 0;
  else limit = static_cast<int>(rwb->wb_normal.load(std::memory_order_relaxed));
  if (inflight && inflight >= limit) return;
  if (!rqw->has_sleepers.load(std::memory_order_seq_cst)) return;
  const int background = static_cast<int>(rwb->wb_background.load(std::memory_order_relaxed));
  if (!inflight || limit - inflight >= background / 2) wake_sleepers(rwb, rqw);
}

RqWait* class_of(Rwb* rwb, uint8_t flags) {
  if (flags & kWbtKswapd) return &rwb->rqw[kRwqKswapd];
  if (flags & kWbtDiscard) return &rwb->rqw[kRwqDiscard];
  return &rwb->rqw[kRwqBg];
}

// ----------------------------------------------------------- window ----

int int_sqrt(uint64_t x) {
  uint64_t r = 0;
  while ((r + 1) * (r + 1) <= x) r++;  // x is at most a few thousand here
  return static_cast<int>(r);
}

// rwb_arm_timer: opens (or continues) a window, shorter the more the
// step has scaled down: win / sqrt(step + 1) in the kernel's fixed point.
// Under rwb->lock.
void arm_window(Rwb* rwb) {
  const int step = rwb->depth.scale_step;
  const uint64_t cur =
      step > 0 ? (rwb->win_nsec << 4) / static_cast<uint64_t>(int_sqrt(uint64_t(step + 1) << 8)) : rwb->win_nsec;
  rwb->cur_win_nsec.store(cur, std::memory_order_relaxed);
  if (!rwb->watching) {
    // The window samples every read and write, so it needs to see them.
    rwb->watching = true;
    rq_qos_watch_all(rwb->rqos, true);
  }
  rwb->window_open.store(true, std::memory_order_relaxed);
  rwb->timer.arm_after(cur);
}

// Closes the window and stops sampling. Under rwb->lock.
void close_window(Rwb* rwb) {
  rwb->window_open.store(false, std::memory_order_relaxed);
  rwb->timer.cancel();
  if (rwb->watching) {
    rwb->watching = false;
    rq_qos_watch_all(rwb->rqos, false);
  }
  rwb->sync_cookie.store(nullptr, std::memory_order_relaxed);  // its done may go unseen
  rwb->sync_issue.store(0, std::memory_order_relaxed);
}

int total_inflight(Rwb* rwb) {
  int n = 0;
  for (RqWait& r : rwb->rqw) n += r.inflight.load(std::memory_order_relaxed);
  return n;
}

// latency_exceeded, for the window just closed.
LatStatus window_status(Rwb* rwb, uint64_t reads, uint64_t writes, uint64_t read_min) {
  const uint64_t min_lat = rwb->min_lat_nsec.load(std::memory_order_relaxed);
  const uint64_t issue = rwb->sync_issue.load(std::memory_order_relaxed);
  const uint64_t now = rwb->q->clock_ns();
  // A read in flight longer than the window (or past the target with no
  // read completing) is a miss: on a flooded device reads may not finish
  // within the window at all.
  const uint64_t stuck = issue && rwb->sync_cookie.load(std::memory_order_relaxed) && now > issue ? now - issue : 0;
  if (stuck > rwb->cur_win_nsec.load(std::memory_order_relaxed) || (stuck > min_lat && !reads)) return kLatExceeded;
  // Without a read and a few writes it cannot tell that writes hurt reads.
  if (reads < 1 || writes < kMinWriteSamples)
    return writes || total_inflight(rwb) ? kLatUnknownWrites : kLatUnknown;
  return read_min > min_lat ? kLatExceeded : kLatOk;
}

void scale_up(Rwb* rwb) {
  if (!scale_up_depth(&rwb->depth)) return;
  calc_wb_limits(rwb);
  rwb->unknown_cnt = 0;
  wake_all(rwb);
}

void scale_down(Rwb* rwb, bool hard) {
  if (!scale_down_depth(&rwb->depth, hard)) return;
  calc_wb_limits(rwb);
  rwb->unknown_cnt = 0;
}

// wb_timer_fn: the window ended. Timer context.
void window_end(Rwb* rwb) {
  std::lock_guard<std::mutex> g(rwb->lock);
  if (rwb->timer.armed()) return;  // re-armed while this run waited: not over yet
  rwb->window_open.store(false, std::memory_order_relaxed);
  const int inflight = total_inflight(rwb);
  const uint64_t reads = rwb->read_samples.exchange(0, std::memory_order_relaxed);
  const uint64_t writes = rwb->write_samples.exchange(0, std::memory_order_relaxed);
  const uint64_t read_min = rwb->read_min.exchange(UINT64_MAX, std::memory_order_relaxed);
  switch (window_status(rwb, reads, writes, read_min)) {
    case kLatExceeded: scale_down(rwb, true); break;
    case kLatOk: scale_up(rwb); break;
    case kLatUnknownWrites: scale_up(rwb); break;  // writes alone may go past the middle
    case kLatUnknown:
      // Several windows that say nothing drift the step back to the middle.
      if (++rwb->unknown_cnt < kUnknownBump) break;
      if (rwb->depth.scale_step > 0) scale_up(rwb);
      else if (rwb->depth.scale_step < 0) scale_down(rwb, false);
      break;
  }
  if (rwb->depth.scale_step || inflight) arm_window(rwb);
  else close_window(rwb);
}

// wbt_update_limits: back to the middle step (a new target or depth).
// Under rwb->lock; the caller wakes the sleepers.
void reset_limits(Rwb* rwb) {
  rwb->depth.scale_step = 0;
  rwb->depth.scaled_max = false;
  calc_max_depth(&rwb->depth);
  calc_wb_limits(rwb);
}

// -------------------------------------------------------------- hooks --

// wbt_should_throttle: page-cache writeback and discards.
bool should_throttle(const Bio* bio) {
  return bio->op == ReqOp::discard || (bio->op == ReqOp::write && (bio->flags & kBioWriteback));
}

uint8_t bio_wbt_flags(const Rwb* rwb, const Bio* bio) {
  if (!rwb_enabled(rwb)) return 0;
  if (bio->op == ReqOp::read) return kWbtRead;
  if (!should_throttle(bio)) return 0;
  return kWbtTracked | (bio->op == ReqOp::discard ? kWbtDiscard : 0);
}

// What throttle decided for the bio the calling thread is submitting, for
// track or cleanup, which follow on the same thread with nothing of
// another bio's in between. The kernel recomputes it from the bio; here
// the target may change meanwhile (no freeze around queue/wbt_lat_usec),
// and a slot taken must be given back exactly once.
struct Pending {
  const Bio* bio = nullptr;
  uint8_t flags = 0;
};
thread_local Pending t_pending;

uint8_t take_pending(Rwb* rwb, const Bio* bio) {
  const uint8_t f = t_pending.bio == bio ? t_pending.flags : (bio_wbt_flags(rwb, bio) & kWbtRead);
  t_pending = {};
  return f;
}

void stamp(Rwb* rwb, std::atomic<uint64_t>* at) {
  const uint64_t now = rwb->q->coarse_clock_ns();
  if (at->load(std::memory_order_relaxed) != now) at->store(now, std::memory_order_relaxed);
}

void wbt_throttle(RqQos* r, Bio* bio) {
  Rwb* rwb = rwb_of(r);
  const uint8_t flags = bio_wbt_flags(rwb, bio);
  t_pending = {bio, flags};
  if (!(flags & kWbtTracked)) {
    if (flags & kWbtRead) stamp(rwb, &rwb->last_issue);
    return;
  }
  wait_for_slot(rwb, class_of(rwb, flags), bio->op, bio->flags);
  if (!rwb->window_open.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> g(rwb->lock);
    if (!rwb->window_open.load(std::memory_order_relaxed)) arm_window(rwb);
  }
}

void wbt_cleanup(RqQos* r, Bio* bio) {
  Rwb* rwb = rwb_of(r);
  const uint8_t flags = take_pending(rwb, bio);
  if (flags & kWbtTracked) slot_done(rwb, class_of(rwb, flags), flags);
}

void wbt_track(RqQos* r, Request* rq, Bio* bio) { rq->wbt_flags = take_pending(rwb_of(r), bio); }

void wbt_issue(RqQos* r, Request* rq) {
  Rwb* rwb = rwb_of(r);
  // The window's samples are issue-to-completion times, as blk_stat's.
  if (!(rq->rq_flags & kRqfStats)) rq->io_start_time_ns = rwb->q->clock_ns();
  if (!rwb_enabled(rwb) || !(rq->wbt_flags & kWbtRead)) return;
  // The first read in flight stands for all of them (only its address is
  // kept: it is compared, never followed). The cookie alone decides who
  // owns the slot, so a time left by a read that ended between the two
  // stores below is overwritten by the next read, never kept.
  const Request* none = nullptr;
  if (rwb->sync_cookie.compare_exchange_strong(none, rq, std::memory_order_relaxed))
    rwb->sync_issue.store(rq->io_start_time_ns, std::memory_order_relaxed);
}

void forget_sync(Rwb* rwb, const Request* rq) {
  const Request* expected = rq;
  if (rwb->sync_cookie.load(std::memory_order_relaxed) == rq &&
      rwb->sync_cookie.compare_exchange_strong(expected, nullptr, std::memory_order_relaxed))
    rwb->sync_issue.store(0, std::memory_order_relaxed);
}

void wbt_requeue(RqQos* r, Request* rq) {
  if (rwb_enabled(rwb_of(r))) forget_sync(rwb_of(r), rq);
}

// blk_stat_add for wbt's callback: the window's samples.
void add_sample(Rwb* rwb, const Request* rq) {
  const uint64_t now = rwb->q->clock_ns();
  const uint64_t lat = now > rq->io_start_time_ns ? now - rq->io_start_time_ns : 0;
  if (rq->op == ReqOp::read) {
    rwb->read_samples.fetch_add(1, std::memory_order_relaxed);
    uint64_t cur = rwb->read_min.load(std::memory_order_relaxed);
    while (lat < cur && !rwb->read_min.compare_exchange_weak(cur, lat, std::memory_order_relaxed)) {
    }
  } else if (op_is_write(rq->op) && rq->op != ReqOp::flush) {
    rwb->write_samples.fetch_add(1, std::memory_order_relaxed);
  }
}

void wbt_done(RqQos* r, Request* rq) {
  Rwb* rwb = rwb_of(r);
  if (rq->io_start_time_ns && rwb->window_open.load(std::memory_order_relaxed)) add_sample(rwb, rq);
  const uint8_t flags = rq->wbt_flags;
  rq->wbt_flags = 0;
  if (flags & kWbtTracked) {
    slot_done(rwb, class_of(rwb, flags), flags);
    return;
  }
  forget_sync(rwb, rq);
  if (flags & kWbtRead) stamp(rwb, &rwb->last_comp);
}

void wbt_queue_depth_changed(RqQos* r) {
  Rwb* rwb = rwb_of(r);
  {
    std::lock_guard<std::mutex> g(rwb->lock);
    rwb->depth.queue_depth = std::max(1u, rwb->q->nr_requests_);
    reset_limits(rwb);
  }
  wake_all(rwb);
}

Status wbt_init(RqQos* r) {
  auto* rwb = new Rwb;
  rwb->rqos = r;
  rwb->q = to_impl(r->q);
  const uint64_t now = rwb->q->coarse_clock_ns();
  rwb->last_issue.store(now, std::memory_order_relaxed);
  rwb->last_comp.store(now, std::memory_order_relaxed);
  rwb->min_lat_nsec.store(default_latency(rwb->q), std::memory_order_relaxed);
  rwb->depth.queue_depth = std::max(1u, rwb->q->nr_requests_);
  reset_limits(rwb);
  rwb->timer.init(&rwb->q->rt_->timers(), [rwb] { window_end(rwb); });
  r->data = rwb;
  return Status::OK();
}

void wbt_exit(RqQos* r) {
  Rwb* rwb = rwb_of(r);
  rwb->timer.cancel_sync();
  {
    std::lock_guard<std::mutex> g(rwb->lock);
    close_window(rwb);
  }
  delete rwb;
}

RqQosType make_type() {
  RqQosType t;
  t.name = "wbt";
  t.ops.throttle = wbt_throttle;
  t.ops.cleanup = wbt_cleanup;
  t.ops.track = wbt_track;
  t.ops.issue = wbt_issue;
  t.ops.requeue = wbt_requeue;
  t.ops.done = wbt_done;
  t.ops.queue_depth_changed = wbt_queue_depth_changed;
  t.ops.exit = wbt_exit;
  t.init = wbt_init;
  // Writes it may throttle and discards, always; reads and other writes
  // only while a window samples them (arm_window's rq_qos_watch_all).
  t.filter.all = false;
  t.filter.ops = 1u << static_cast<unsigned>(ReqOp::discard);
  t.filter.flags = kBioWriteback;
  return t;
}

// Sets the target and the state under rwb->lock, then wakes every
// sleeper to try the new limits (wbt_set_min_lat).
void set_min_lat(Rwb* rwb, uint64_t ns, int state) {
  {
    std::lock_guard<std::mutex> g(rwb->lock);
    rwb->min_lat_nsec.store(ns, std::memory_order_relaxed);
    rwb->enable_state.store(state, std::memory_order_relaxed);
    if (state == kOffDefault || state == kOffManual) close_window(rwb);
    reset_limits(rwb);
  }
  wake_all(rwb);
}

}  // namespace
}  // namespace blkmq

BLKMQ_BUILTIN(blkmq::RqQosType, rq_qos, wbt, 0, blkmq::make_type());

namespace blkmq {

void wbt_enable_default(Queue* qp) {
  QueueImpl* q = to_impl(qp);
  {
    std::lock_guard<std::mutex> g(q->sysfs_lock_);
    if (q->elevator_ && q->elevator_->type->disable_wbt) return;
    if (RqQos* r = rq_qos_find_locked(qp, "wbt")) {
      Rwb* rwb = rwb_of(r);
      if (rwb->enable_state.load() == kOffDefault)
        set_min_lat(rwb, rwb->min_lat_nsec.load(std::memory_order_relaxed), kOnDefault);
      return;
    }
  }
  // Another thread may add it first (EBUSY): then it is on, as wanted.
  (void)rq_qos_add(qp, "wbt");
}

void wbt_disable_default(Queue* qp) {
  QueueImpl* q = to_impl(qp);
  std::lock_guard<std::mutex> g(q->sysfs_lock_);
  RqQos* r = rq_qos_find_locked(qp, "wbt");
  if (!r) return;
  Rwb* rwb = rwb_of(r);
  if (rwb->enable_state.load() == kOnDefault)
    set_min_lat(rwb, rwb->min_lat_nsec.load(std::memory_order_relaxed), kOffDefault);
}

void wbt_elevator_changed(Queue* qp) {
  QueueImpl* q = to_impl(qp);
  bool disable;
  {
    std::lock_guard<std::mutex> g(q->sysfs_lock_);
    disable = q->elevator_ && q->elevator_->type->disable_wbt;
  }
  if (disable) wbt_disable_default(qp);
  else wbt_enable_default(qp);
}

std::string wbt_lat_show_locked(const Queue* qp) {
  // The kernel answers EINVAL without wbt; 0 ("off") keeps attribute
  // listings whole (docs/QOS.md).
  RqQos* r = rq_qos_find_locked(const_cast<Queue*>(qp), "wbt");
  if (!r || !rwb_enabled(rwb_of(r))) return "0";
  return std::to_string(rwb_of(r)->min_lat_nsec.load(std::memory_order_relaxed) / 1000);
}

Status wbt_lat_store(Queue* qp, std::string_view value) {
  constexpr int64_t kMaxUsec = INT64_MAX / 1000;
  auto v = base::parse_int("queue/wbt_lat_usec", value, -1, kMaxUsec, "us");
  if (!v) return v.status();
  QueueImpl* q = to_impl(qp);
  bool present;
  {
    std::lock_guard<std::mutex> g(q->sysfs_lock_);
    present = rq_qos_find_locked(qp, "wbt") != nullptr;
  }
  if (!present)
    if (Status st = rq_qos_add(qp, "wbt"); !st && st.code() != EBUSY) return st;
  std::lock_guard<std::mutex> g(q->sysfs_lock_);
  RqQos* r = rq_qos_find_locked(qp, "wbt");
  if (!r) return Status::error(EAGAIN, "queue/wbt_lat_usec: wbt was removed meanwhile");
  Rwb* rwb = rwb_of(r);
  const uint64_t ns = *v == -1 ? default_latency(q) : static_cast<uint64_t>(*v) * 1000;
  // As the kernel: the same target changes nothing, not even the state.
  if (rwb->min_lat_nsec.load(std::memory_order_relaxed) == ns) return Status::OK();
  set_min_lat(rwb, ns, ns ? kOnManual : kOffManual);
  return Status::OK();
}

bool wbt_info(Queue* qp, WbtInfo* out) {
  QueueImpl* q = to_impl(qp);
  std::lock_guard<std::mutex> g(q->sysfs_lock_);
  RqQos* r = rq_qos_find_locked(qp, "wbt");
  if (!r) return false;
  Rwb* rwb = rwb_of(r);
  std::lock_guard<std::mutex> l(rwb->lock);
  out->enable_state = rwb->enable_state.load();
  out->min_lat_nsec = rwb->min_lat_nsec.load();
  out->curr_win_nsec = rwb->cur_win_nsec.load();
  out->scale_step = rwb->depth.scale_step;
  out->max_depth = rwb->max_depth.load();
  out->wb_normal = rwb->wb_normal.load();
  out->wb_background = rwb->wb_background.load();
  out->unknown_cnt = rwb->unknown_cnt;
  out->waiting = 0;
  out->window_open = rwb->window_open.load();
  for (unsigned i = 0; i < kNumRwq; i++) {
    out->inflight[i] = rwb->rqw[i].inflight.load();
    rwb->rqw[i].lock.lock();
    out->waiting += rwb->rqw[i].nr_sleepers;
    rwb->rqw[i].lock.unlock();
  }
  return true;
}

}  // namespace blkmq
