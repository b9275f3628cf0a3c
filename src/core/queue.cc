// Request queues: creation, the software/hardware context maps, usage
// counting with freeze, quiesce, teardown, and small accessors.
#include <algorithm>
#include <thread>

#include "base/clock.h"
#include "base/event.h"
#include "base/percpu.h"
#include "blkmq/plug.h"
#include "core/blktrace_writer.h"
#include "core/core.h"
#include "qos/throtl.h"
#include "qos/blkcg.h"
#include "qos/wbt.h"
#include "core/time.h"
#include "core/trace.h"

namespace blkmq {
namespace {

HctxType type_of_index(const TagSetImpl* set, unsigned idx) {
  const auto& n = set->cfg().nr_queues;
  if (idx < n[0]) return HctxType::dflt;
  if (idx < n[0] + n[1]) return HctxType::read;
  return HctxType::poll;
}

}  // namespace

QueueImpl::QueueImpl(TagSetImpl* set, const QueueConfig& cfg)
    : set_(set),
      rt_(set->rt_),
      manual_clock_(set->rt_->manual_clock()),
      cfg_(cfg),
      limits_(cfg.limits),
      ops_(set->cfg().ops) {
  static std::atomic<unsigned> next_minor{0};
  minor_ = next_minor.fetch_add(1, std::memory_order_relaxed);
}

Runtime& Queue::runtime() const { return *to_impl(this)->rt_; }
uint64_t Queue::now_ns() const { return to_impl(this)->clock_ns(); }
uint64_t Queue::coarse_now_ns() const { return to_impl(this)->coarse_clock_ns(); }

Status QueueImpl::init_hctxs(unsigned nr_hw) {
  std::vector<std::unique_ptr<HwCtxImpl>> fresh;
  for (unsigned i = 0; i < nr_hw; i++) {
    auto h = std::make_unique<HwCtxImpl>();
    h->queue = this;
    h->set = set_;
    h->q = this;
    h->queue_num = i;
    h->type = type_of_index(set_, i);
    h->tags = set_->tags_[i];
    h->run_work.init(rt_, run_work_fn, h.get());
    init_dispatch_wait(h.get());
    fresh.push_back(std::move(h));
  }
  for (unsigned i = 0; i < nr_hw; i++) {
    HwCtxImpl* h = fresh[i].get();
    if (ops_->init_hctx) {
      if (int err = ops_->init_hctx(h, set_->cfg().driver_data, i)) {
        for (unsigned j = 0; j < i; j++)
          if (ops_->exit_hctx) ops_->exit_hctx(fresh[j].get(), j);
        for (auto& f : fresh) hctx_graveyard_.push_back(std::move(f));
        return Status::error(err < 0 ? -err : err, "driver init_hctx failed for hw queue " + std::to_string(i));
      }
    }
    h->initialized = true;
  }
  for (auto& h : hctx_store_) hctx_graveyard_.push_back(std::move(h));
  hctx_store_ = std::move(fresh);
  hctxs_.clear();
  for (auto& h : hctx_store_) hctxs_.push_back(h.get());
  nr_hw_queues_ = nr_hw;
  return Status::OK();
}

void QueueImpl::stop_hctx_walkers() {
  timeout_timer_.cancel_sync();
  kblockd_flush_work(&timeout_work_);
  requeue_work_.cancel_sync();
  // The cached expiry must not claim a timer that is no longer armed, or the
  // next request would trust it and never arm one.
  std::lock_guard<std::mutex> g(timeout_lock_);
  // seq_cst as every write of the cached expiry: pairs with timeout.cc:
  // arm_queue_timer's load (its lock-free fast path).
  timeout_expiry_.store(0, std::memory_order_seq_cst);
}

void QueueImpl::restart_hctx_walkers() { requeue_work_.mod(kWorkCpuUnbound, 0); }

void QueueImpl::exit_hctxs() {
  for (HwCtxImpl* h : hctxs_) {
    h->run_work.cancel_sync();
    if (h->initialized && ops_->exit_hctx) ops_->exit_hctx(h, h->queue_num);
    h->initialized = false;
  }
}

void QueueImpl::map_swqueues() {
  for (HwCtxImpl* h : hctxs_) {
    h->ctxs.clear();
    h->cpus.clear();
    h->cpu_mask.assign(nr_ctx_, 0);
  }
  for (unsigned c = 0; c < nr_ctx_; c++) {
    SwCtx* ctx = &ctxs_[c];
    for (unsigned t = 0; t < kNrHctxTypes; t++) {
      HwCtxImpl* h = hctxs_[set_->maps_[t].mq_map[c]];
      ctx->hctxs[t] = h;
      const unsigned ht = static_cast<unsigned>(h->type);
      if (h->cpu_mask[c]) continue;  // already mapped through another type
      ctx->index_hw[ht] = static_cast<unsigned>(h->ctxs.size());
      h->ctxs.push_back(ctx);
      h->cpus.push_back(c);
      h->cpu_mask[c] = 1;
    }
  }
  for (HwCtxImpl* h : hctxs_) h->ctx_map.resize(static_cast<unsigned>(h->ctxs.size()));
}

// blk_validate_block_size's bounds: SECTOR_SIZE (kSectorSize) up to
// BLK_MAX_BLOCK_SIZE, which was PAGE_SIZE (4 KiB here) until the kernel
// allowed 64 KiB.
constexpr uint32_t kMaxBlockSize = 4096;  // BLK_MAX_BLOCK_SIZE (PAGE_SIZE)
// The smallest max_segment_size a device may have, and the page size
// dma_alignment must stay below.
constexpr uint32_t kMinSegmentSize = 4096;  // BLK_MIN_SEGMENT_SIZE
constexpr uint32_t kPageSize = 4096;        // PAGE_SIZE

Status QueueImpl::init() {
  throtl_init_queue(this);
  QueueLimits& l = limits_;
  const uint32_t lbs = l.logical_block_size;
  if (lbs < kSectorSize || lbs > kMaxBlockSize || (lbs & (lbs - 1)))
    return Status::invalid("logical_block_size must be a power of two in 512..4096, got " + std::to_string(lbs));
  if (l.physical_block_size < lbs) l.physical_block_size = lbs;
  if (l.max_hw_sectors < (lbs >> kSectorShift)) return Status::invalid("max_hw_sectors below one block");
  if (l.max_sectors == 0 || l.max_sectors > l.max_hw_sectors) l.max_sectors = l.max_hw_sectors;
  if (l.max_segments == 0) return Status::invalid("max_segments must be at least 1");
  if (l.max_segment_size < kMinSegmentSize) l.max_segment_size = kMinSegmentSize;
  if (l.dma_alignment >= kPageSize || (l.dma_alignment & (l.dma_alignment + 1)))
    return Status::invalid("dma_alignment must be 2^n - 1 below 4096, got " + std::to_string(l.dma_alignment));
  if (Status s = init_zoned(); !s) return s;
  tun_.io_timeout_ms.store(set_->cfg().timeout_ms);
  nr_ctx_ = base::possible_cpus();
  ctxs_.reset(new SwCtx[nr_ctx_]);
  for (unsigned c = 0; c < nr_ctx_; c++) {
    ctxs_[c].cpu = c;
    ctxs_[c].queue = this;
  }
  // The set's queue counts change under its lock (update_nr_hw_queues):
  // read them there.
  std::lock_guard<std::mutex> g(set_->lock_);
  l.poll = set_->cfg().nr_queues[2] > 0;
  if (Status s = init_hctxs(set_->nr_hw_queues_); !s) return s;
  map_swqueues();
  requeue_work_.init(rt_, requeue_work_fn, this);
  timeout_work_.init(rt_, timeout_work_fn, this);
  timeout_timer_.init(&rt_->timers(), [this] { timeout_timer_fired(this); });
  fq_ = flush_queue_alloc(this);
  set_->queues_.push_back(this);
  if (set_->queues_.size() > 1) set_->set_queue_shared(true, this);
  return Status::OK();
}

bool QueueImpl::enter(bool nowait) {
  for (;;) {
    // The reference, then the freeze check; pairs with queue.cc:
    // freeze_start (the depth raised) and freeze_wait (usage_sum read
    // after it): either the freezer counts this reference and waits for
    // it, or this sees the freeze and backs out (percpu_ref_tryget_live
    // against the freeze's percpu_ref_kill).
    usage_[base::this_cpu()].fetch_add(1, std::memory_order_seq_cst);
    if (freeze_depth_.load(std::memory_order_seq_cst) == 0 && !dying_.load(std::memory_order_relaxed)) return true;
    exit_ref();
    if (dying_.load() || nowait) return false;
    flush_current_plug(true);  // about to sleep
    uint32_t seq = freeze_seq_.load(std::memory_order_acquire);
    // freeze_seq_ (the futex word) closes the sleep race with
    // unfreeze_impl; seq_cst pairs this read with the depth's writes
    // (queue.cc: freeze_start, unfreeze_impl) in one order.
    if (freeze_depth_.load(std::memory_order_seq_cst) != 0 && !dying_.load()) {
      // Counted so a test can tell a submitter sleeps here (Freeze.*).
      enter_waiters_.fetch_add(1, std::memory_order_relaxed);
      base::futex_wait(&freeze_seq_, seq, 10 * 1000 * 1000);
      enter_waiters_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
}

int64_t QueueImpl::usage_sum() const {
  int64_t s = 0;
  // Pairs with queue.cc:enter's reference increment (see there).
  for (unsigned c = 0; c < usage_.size(); c++) s += usage_[c].load(std::memory_order_seq_cst);
  return s;
}

void QueueImpl::wait_dispatch_idle() const {
  for (;;) {
    int64_t s = 0;
    // Pairs with core.h:QueueImpl::dispatch_enter (its count raised, then
    // quiesced() read) against Queue::quiesce (the depth raised, then this
    // read): either the dispatcher sees the quiesce and backs out, or this
    // sees its count and waits (the SRCU/RCU grace period).
    for (unsigned c = 0; c < dispatch_cnt_.size(); c++) s += dispatch_cnt_[c].load(std::memory_order_seq_cst);
    if (s == 0) return;
    rt_->ops().idle(20);
  }
}

void QueueImpl::freeze_start() {
  std::lock_guard<std::mutex> g(freeze_lock_);
  // Pairs with queue.cc:enter (the reference, then this depth read).
  freeze_depth_.fetch_add(1, std::memory_order_seq_cst);
}

// Waits for every request to be freed; keeps the queues moving meanwhile so
// that requests sitting in software queues or the requeue list drain.
void QueueImpl::freeze_wait() {
  unsigned spins = 0;
  while (usage_sum() != 0) {
    if (++spins % 64 == 0) {
      kick_requeue_list(this);
      run_hw_queues_impl(this, true);
    }
    rt_->ops().idle(50);
  }
}

void QueueImpl::unfreeze_impl() {
  std::lock_guard<std::mutex> g(freeze_lock_);
  // Pairs with queue.cc:enter's depth reads; its sleepers are woken through
  // freeze_seq_ below.
  if (freeze_depth_.fetch_sub(1, std::memory_order_seq_cst) == 1) {
    freeze_seq_.fetch_add(1, std::memory_order_release);
    base::futex_wake(&freeze_seq_, 1 << 30);
  }
}

// Under freeze_lock_ so that a submitter between its dying_ check and its
// futex wait (enter) sees freeze_seq_ move and does not sleep through it.
void QueueImpl::mark_dead_impl() {
  std::lock_guard<std::mutex> g(freeze_lock_);
  // Pairs with queue.cc:enter's dying_ reads (after its reference, like the
  // freeze depth); the futex bump below wakes the ones asleep.
  dying_.store(true, std::memory_order_seq_cst);
  freeze_seq_.fetch_add(1);
  base::futex_wake(&freeze_seq_, 1 << 30);
}

QueueImpl::~QueueImpl() {
  // No update_nr_hw_queues while the queue is torn down: it would quiesce
  // and unquiesce it (undoing the drain's quiesce) and restart its requeue
  // and run work after they were cancelled, on a queue about to be freed.
  // Held shared, as queue creation and scheduler switches hold it, until
  // the queue is off the set's list, where no update can reach it.
  std::shared_lock<std::shared_mutex> update(set_->update_lock_);
  mark_dead_impl();
  // Bios io.max holds end now: they hold no usage reference, so the drain
  // below would not wait for them (blk_throtl_cancel_bios at del_gendisk).
  if (throtl_) throtl_cancel_bios(this);
  // Drain: everything submitted ends; queued I/O is dispatched.
  if (quiesce_depth_.load()) {
    quiesce_depth_.store(0);
  }
  for (unsigned i = 0; i < nr_hw_queues_; i++) hctxs_[i]->state.fetch_and(~kHctxStopped);
  freeze_wait();
  // Every bio has ended: nothing holds the queue's blkgs but their links.
  blkcg_exit_queue(this);
  rq_qos_exit(this);
  quiesce_depth_.fetch_add(1);
  wait_dispatch_idle();
  timeout_timer_.cancel_sync();
  kblockd_flush_work(&timeout_work_);
  requeue_work_.cancel_sync();
  elevator_exit(this);
  {
    std::lock_guard<std::mutex> g(set_->lock_);
    exit_hctxs();
    auto& v = set_->queues_;
    for (HwCtxImpl* h : hctxs_) tag_idle(h);
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
    if (v.size() <= 1) set_->set_queue_shared(false, this);
  }
  update.unlock();
  for (auto& h : hctx_graveyard_) h->run_work.cancel_sync();
  flush_queue_free(fq_);
  // After the blkgs: unlinking one takes its group's bios off the throttle.
  if (throtl_) throtl_exit_queue(this);
  std::lock_guard<std::mutex> l(trace_lock_);  // the drained I/O's events go in the files
  trace_stop_locked(this);
}

Queue::~Queue() = default;

Result<std::unique_ptr<Queue>> Queue::create(TagSet& set, const QueueConfig& cfg) {
  auto q = std::make_unique<QueueImpl>(to_impl(&set), cfg);
  if (Status s = q->init(); !s) return s;
  std::shared_lock<std::shared_mutex> l(to_impl(&set)->update_lock_);
  if (Status s = cfg.scheduler.empty() ? elevator_init_default(q.get()) : elevator_switch(q.get(), cfg.scheduler); !s)
    return s;
  // blk_register_queue's wbt_enable_default: on unless the scheduler
  // disables it (docs/QOS.md, "wbt").
  wbt_enable_default(q.get());
  return std::unique_ptr<Queue>(std::move(q));
}

void Queue::freeze() {
  QueueImpl* q = to_impl(this);
  q->freeze_start();
  q->freeze_wait();
}

void Queue::unfreeze() { to_impl(this)->unfreeze_impl(); }

void Queue::mark_dead() {
  QueueImpl* q = to_impl(this);
  q->mark_dead_impl();
  throtl_cancel_bios(q);  // what io.max holds ends too, as at del_gendisk
}

void Queue::quiesce() {
  QueueImpl* q = to_impl(this);
  // Pairs with core.h:QueueImpl::dispatch_enter and quiesced(): see
  // queue.cc:wait_dispatch_idle.
  q->quiesce_depth_.fetch_add(1, std::memory_order_seq_cst);
  q->wait_dispatch_idle();
}

void Queue::unquiesce() {
  QueueImpl* q = to_impl(this);
  // Pairs with core.h:QueueImpl::quiesced() in dispatch.cc:run_hw_queue: a
  // run that still saw the queue quiesced is made up for by the run below.
  if (q->quiesce_depth_.fetch_sub(1, std::memory_order_seq_cst) == 1) run_hw_queues_impl(q, true);
}

// The kernel's bio_poll holds a q_usage_counter reference across the
// driver's poll. Here the dispatch epoch does that job: update_nr_hw_queues
// and a scheduler switch quiesce (wait for the epoch) before they exit or
// replace hctxs, so the hctx polled stays in place until the poll is done.
// A poll that comes while the queue is both frozen and quiesced finds
// nothing: the hctxs may be changing, and no request is in flight (the
// freeze drained them). Quiesced alone (a driver's own quiesce), the
// kernel goes on polling, and so does this.
int Queue::poll(const Bio* bio) {
  QueueImpl* q = to_impl(this);
  if (!q->ops_->poll) return 0;
  q->dispatch_enter();
  int n = 0;
  const unsigned idx = static_cast<unsigned>(bio_cookie(bio));
  // Inside the dispatch epoch (dispatch_enter above): pairs with the
  // quiesce of update_nr_hw_queues and elevator switches (queue.cc:
  // Queue::quiesce, wait_dispatch_idle) and with queue.cc:freeze_start.
  const bool changing = q->quiesced() && q->freeze_depth_.load(std::memory_order_seq_cst) > 0;
  if (!changing && idx < q->nr_hw_queues_) {
    IoCompBatch iob;
    n = q->ops_->poll(q->hctx(idx), &iob);
    end_request_batch(&iob);
  }
  q->dispatch_exit();
  return n;
}

const QueueLimits& Queue::limits() const { return to_impl(this)->limits_; }
const std::string& Queue::name() const { return to_impl(this)->cfg_.name; }
unsigned Queue::dev_minor() const { return to_impl(this)->minor_; }
TagSet& Queue::tag_set() const { return *to_impl(this)->set_; }
unsigned Queue::nr_hw_queues() const { return to_impl(this)->nr_hw_queues_; }

DiskStat Queue::disk_stat() const {
  const QueueImpl* q = to_impl(this);
  DiskStat d{};
  uint64_t ios[4] = {}, merges[4] = {}, sectors[4] = {}, nsecs[4] = {};
  for (unsigned c = 0; c < q->stats_.size(); c++) {
    const PartStat& p = q->stats_[c];
    for (int g = 0; g < 4; g++) {
      ios[g] += p.ios[g].load(std::memory_order_relaxed);
      merges[g] += p.merges[g].load(std::memory_order_relaxed);
      sectors[g] += p.sectors[g].load(std::memory_order_relaxed);
      nsecs[g] += p.nsecs[g].load(std::memory_order_relaxed);
    }
  }
  const uint64_t ms = base::kNsPerMs;
  d.read_ios = ios[0], d.read_merges = merges[0], d.read_sectors = sectors[0], d.read_ticks_ms = nsecs[0] / ms;
  d.write_ios = ios[1], d.write_merges = merges[1], d.write_sectors = sectors[1], d.write_ticks_ms = nsecs[1] / ms;
  d.discard_ios = ios[2], d.discard_merges = merges[2], d.discard_sectors = sectors[2], d.discard_ticks_ms = nsecs[2] / ms;
  d.flush_ios = ios[3], d.flush_ticks_ms = nsecs[3] / ms;
  uint64_t in[2];
  count_inflight(q, in);
  d.in_flight = in[0] + in[1];
  // As part_stat_show: a reader sees the busy time up to now, not just up
  // to the last start or end, so a long request shows as busy (iostat's
  // %util) while it is still in flight.
  if (d.in_flight) update_io_ticks(const_cast<QueueImpl*>(q), blk_time_get_ns(q), true);
  d.io_ticks_ms = q->io_ticks_ns_.load(std::memory_order_relaxed) / ms;
  d.time_in_queue_ms = (nsecs[0] + nsecs[1] + nsecs[2] + nsecs[3]) / ms;
  return d;
}

HctxStats Queue::hctx_stats(unsigned i) const {
  const QueueImpl* q = to_impl(this);
  HctxStats s;
  if (i >= q->nr_hw_queues_) return s;
  const HwCtxImpl* h = q->hctx(i);
  s.queued = h->queued.get();
  s.run = h->runs.get();
  s.busy = h->busy.get();
  for (int b = 0; b < 8; b++) s.dispatched[b] = h->dispatched[b].get();
  s.dispatch_busy = h->dispatch_busy.load(std::memory_order_relaxed);
  return s;
}

Status Queue::set_attr(std::string_view path, std::string_view value) {
  return queue_attr_store(to_impl(this), path, value);
}
Result<std::string> Queue::attr(std::string_view path) const { return queue_attr_show(to_impl(this), path); }
std::vector<std::string> Queue::attr_names() const { return queue_attr_names(to_impl(this)); }

}  // namespace blkmq
