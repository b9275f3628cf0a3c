// The engine's internal structures: tag maps, software and hardware queue
// contexts, the tag set and the request queue. Only src/core includes this.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "base/lockstat.h"
#include "base/percpu.h"
#include "base/sbitmap.h"
#include "base/spinlock.h"
#include "base/timer.h"
#include "blkmq/driver/context.h"
#include "blkmq/driver/driver.h"
#include "blkmq/elevator/elevator.h"
#include "blkmq/queue.h"
#include "blkmq/driver/tagset.h"
#include "core/kblockd.h"
#include "core/time.h"
#include "core/zone_wplug.h"
#include "qos/rq_qos.h"

namespace blkmq {
namespace blktrace {
class Writer;
}

class QueueImpl;
class TagSetImpl;
struct ThrotlData;

// ---------------------------------------------------------------- tags --

// One tag map: the normal and reserved bitmaps plus the request objects.
// Driver tags live per hctx (or one shared map); scheduler tags per hctx.
struct Tags {
  Tags(unsigned nr_tags, unsigned nr_reserved, bool round_robin);
  ~Tags();

  unsigned nr_tags;
  unsigned nr_reserved;
  base::SbitmapQueue bitmap_tags;
  base::SbitmapQueue breserved_tags;
  std::atomic<unsigned> active_queues{0};   // fair sharing: busy users
  std::unique_ptr<std::atomic<Request*>[]> rqs;  // driver tag -> request in flight
  std::vector<Request*> static_rqs;         // preallocated requests by tag
  void* rq_mem = nullptr;
  size_t rq_size = 0;
};

// ---------------------------------------------------------------- ctx ---

// Software queue: one per CPU per request queue.
struct alignas(64) SwCtx {
  base::StatSpinLock lock;  // mq/<n>/ctx_lock_stat, summed over the hctx's ctxs
  ListNode rq_lists[kNrHctxTypes];
  unsigned cpu = 0;
  unsigned index_hw[kNrHctxTypes] = {};  // bit in hctx->ctx_map
  struct HwCtxImpl* hctxs[kNrHctxTypes] = {};
  QueueImpl* queue = nullptr;
};

// A small atomic bitmap of busy ctxs of one hctx (hctx->ctx_map).
class CtxMap {
 public:
  void resize(unsigned bits);
  void set(unsigned bit) {
    auto& w = words_[bit >> 6];
    const uint64_t m = 1ull << (bit & 63);
    if (!(w.load(std::memory_order_relaxed) & m)) w.fetch_or(m, std::memory_order_release);
  }
  void clear(unsigned bit) { words_[bit >> 6].fetch_and(~(1ull << (bit & 63)), std::memory_order_release); }
  bool test(unsigned bit) const {
    return words_[bit >> 6].load(std::memory_order_acquire) & (1ull << (bit & 63));
  }
  bool any() const;
  // Calls fn(bit) for each set bit starting at `from`, wrapping around;
  // fn returns false to stop.
  template <typename Fn>
  void for_each_from(unsigned from, Fn&& fn) const;
  unsigned size() const { return bits_; }

 private:
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
  unsigned nwords_ = 0;
  unsigned bits_ = 0;
};

template <typename Fn>
void CtxMap::for_each_from(unsigned from, Fn&& fn) const {
  for (unsigned i = 0; i < bits_; i++) {
    unsigned b = (from + i) % bits_;
    if (words_[b >> 6].load(std::memory_order_acquire) & (1ull << (b & 63)))
      if (!fn(b)) return;
  }
}

// ---------------------------------------------------------------- hctx --

enum HctxState : uint32_t {
  kHctxStopped = 1u << 0,
  kHctxTagActive = 1u << 1,
  kHctxSchedRestart = 1u << 2,
  kHctxInactive = 1u << 3,
};

// A lossy event counter: relaxed load+store, no lock prefix. Like the
// kernel's debugfs counters, concurrent increments may be lost.
struct LossyCounter {
  std::atomic<uint64_t> v{0};
  void inc(uint64_t n = 1) { v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t get() const { return v.load(std::memory_order_relaxed); }
};

struct HwCtxImpl : HwCtx {
  QueueImpl* q = nullptr;
  alignas(64) base::StatSpinLock lock;   // protects dispatch; mq/<n>/dispatch_lock_stat
  ListNode dispatch;
  std::atomic<bool> has_dispatch{false};  // !dispatch.empty(), readable without the lock
  std::atomic<uint32_t> state{0};
  CtxMap ctx_map;
  std::vector<SwCtx*> ctxs;
  std::atomic<unsigned> dispatch_from{0};  // racy by design, as in the kernel
  std::atomic<unsigned> dispatch_busy{0};
  Tags* tags = nullptr;         // driver tags (maybe shared)
  Tags* sched_tags = nullptr;   // scheduler tags (with an elevator)
  std::atomic<unsigned> nr_active{0};  // driver tags held, fair sharing
  std::atomic<unsigned> wait_index{0};
  // Shared-tags dispatch wait (hctx->dispatch_wait).
  base::SbqWaitEntry dispatch_wait;
  base::SpinLock dispatch_wait_lock;
  unsigned dispatch_wait_gen = 0;                  // registrations, under dispatch_wait_lock
  std::vector<unsigned> cpus;   // CPUs mapped to this hctx
  std::vector<uint8_t> cpu_mask;  // by CPU id
  std::atomic<unsigned> next_cpu{0};
  std::atomic<int> next_cpu_batch{8};
  DelayedWork run_work;
  bool initialized = false;     // init_hctx succeeded
  std::unique_ptr<Tags> sched_tags_store;
  // counters
  LossyCounter queued, runs, busy;
  LossyCounter dispatched[8];
};

// --------------------------------------------------------------- tagset -

struct QueueMap {
  std::vector<unsigned> mq_map;  // cpu -> hctx index
  unsigned nr_queues = 0;
  unsigned queue_offset = 0;
};

class TagSetImpl final : public TagSet {
 public:
  explicit TagSetImpl(const TagSetConfig& cfg)
      : cfg_(cfg), rt_(cfg.runtime ? cfg.runtime : &Runtime::process_default()) {}
  ~TagSetImpl() override;

  Status init();
  Status alloc_tags(unsigned nr_hw);
  void map_queues();

  const TagSetConfig& cfg() const { return cfg_; }
  bool shared_hctx_tags() const { return cfg_.flags & kTagSetSharedTags; }

  TagSetConfig cfg_;
  Runtime* rt_;  // cfg_.runtime or the process default; every queue's
  unsigned nr_hw_queues_ = 0;
  QueueMap maps_[kNrHctxTypes];
  std::vector<Tags*> tags_;           // per hctx (all the same with shared tags)
  std::unique_ptr<Tags> shared_tags_;
  std::vector<std::unique_ptr<Tags>> owned_tags_;
  std::vector<std::unique_ptr<Tags>> retired_tags_;  // kept until the set dies
  std::mutex lock_;                   // tag_list, updates
  std::vector<QueueImpl*> queues_;
  // TAG_QUEUE_SHARED: more than one queue. Flipped only with every other
  // queue of the set frozen, so per-queue active counts stay balanced.
  std::atomic<bool> queue_shared_{false};
  void set_queue_shared(bool shared, QueueImpl* except);
  // update_nr_hw_queues holds it exclusively; whatever attaches, detaches
  // or switches a queue's scheduler holds it shared (the kernel's
  // set->update_nr_hwq_lock), so an update never reads a scheduler that a
  // switch is replacing, and switches of different queues still run side
  // by side. Taken before the queue's sysfs_lock_.
  std::shared_mutex update_lock_;
};

// ------------------------------------------------------------ attributes -

enum class SchedInsertRun : uint8_t { sync, async };
enum class TaskCompletion : uint8_t { local, softirq };

struct QueueTunables {
  std::atomic<unsigned> rq_affinity{1};    // 0, 1 (SAME_COMP), 2 (SAME_FORCE)
  std::atomic<unsigned> nomerges{0};       // 0, 1, 2
  std::atomic<unsigned> io_timeout_ms{0};  // from the tag set
  std::atomic<bool> iostats{true};
  std::atomic<SchedInsertRun> sched_insert_run{SchedInsertRun::sync};
  std::atomic<bool> submit_plug_implicit{false};
  std::atomic<bool> plug_direct_issue{true};
  std::atomic<TaskCompletion> task_completion{TaskCompletion::local};
  std::atomic<bool> read_only{false};  // `ro` (set_disk_ro / BLKROSET)
};

// Disk statistics, per CPU (part_stat).
struct PartStat {
  std::atomic<uint64_t> ios[4];       // read, write, discard, flush
  std::atomic<uint64_t> merges[4];
  std::atomic<uint64_t> sectors[4];
  std::atomic<uint64_t> nsecs[4];
};
// The group a request is accounted in when it ends. An empty flush bio
// counts as a write without data, as the kernel's REQ_OP_WRITE |
// REQ_PREFLUSH does; group 3 (flush_ios) counts the flushes the flush
// machinery sends to the device (account_flush), as blk_account_io_flush.
inline unsigned stat_group(ReqOp op) {
  switch (op) {
    case ReqOp::read: return 0;
    case ReqOp::discard: return 2;
    default: return 1;
  }
}
inline constexpr unsigned kStatFlush = 3;

// ---------------------------------------------------------------- queue --

class QueueImpl final : public Queue {
 public:
  QueueImpl(TagSetImpl* set, const QueueConfig& cfg);
  ~QueueImpl() override;

  Status init();
  // The zoned limits' checks and the zone model (src/core/zoned.cc).
  Status init_zoned();
  Status init_hctxs(unsigned nr_hw);
  void exit_hctxs();
  // The queue's own workers that walk its hctxs (requeue, timeout): stopped
  // while update_nr_hw_queues replaces the hctxs, then the requeue worker is
  // run once to make up for a run it may have lost.
  void stop_hctx_walkers();
  void restart_hctx_walkers();
  void map_swqueues();

  // usage counter (q_usage_counter)
  bool enter(bool nowait);
  void exit_ref(unsigned n = 1) { exit_ref_on(base::this_cpu(), n); }
  // The same on a CPU id the caller has read already (the counter is summed
  // over all CPUs, so any slot is correct; the caller's own is cheapest).
  void exit_ref_on(unsigned cpu, unsigned n) { usage_[cpu].fetch_sub(n, std::memory_order_release); }
  void enter_many(unsigned n, unsigned cpu) { usage_[cpu].fetch_add(n, std::memory_order_relaxed); }
  int64_t usage_sum() const;
  // dispatch epoch (RCU/SRCU around dispatch). seq_cst, a Dekker pair with
  // Queue::quiesce: a dispatcher increments its count and then reads
  // quiesce_depth_ (quiesced()); quiesce increments quiesce_depth_ and then
  // sums the counts (wait_dispatch_idle). Either the dispatcher sees the
  // queue quiesced or quiesce waits for it.
  void dispatch_enter() { dispatch_cnt_[base::this_cpu()].fetch_add(1, std::memory_order_seq_cst); }
  void dispatch_exit() { dispatch_cnt_[base::this_cpu()].fetch_sub(1, std::memory_order_release); }
  bool quiesced() const { return quiesce_depth_.load(std::memory_order_seq_cst) > 0; }
  void wait_dispatch_idle() const;
  void freeze_start();
  void freeze_wait();
  void unfreeze_impl();
  void mark_dead_impl();

  // The queue's clock (Queue::now_ns), inline for the core: the manual
  // runtime's time (one load), else CLOCK_MONOTONIC. Any context.
  uint64_t clock_ns() const {
    return manual_clock_ ? manual_clock_->load(std::memory_order_acquire) : precise_now_ns();
  }
  // At the resolution of jiffies (Queue::coarse_now_ns). Any context.
  uint64_t coarse_clock_ns() const {
    return manual_clock_ ? manual_clock_->load(std::memory_order_acquire) : blkmq::coarse_now_ns();
  }
  bool clock_is_manual() const { return manual_clock_ != nullptr; }

  SwCtx* ctx(unsigned cpu) { return &ctxs_[cpu]; }
  HwCtxImpl* hctx(unsigned i) const { return hctxs_[i]; }

  TagSetImpl* set_;
  Runtime* rt_;  // the set's
  const std::atomic<uint64_t>* manual_clock_;  // rt_->manual_clock(): nullptr on real time
  QueueConfig cfg_;
  unsigned minor_ = 0;  // see Queue::dev_minor
  QueueLimits limits_;
  const DriverOps* ops_;
  QueueTunables tun_;
  std::unique_ptr<SwCtx[]> ctxs_;
  unsigned nr_ctx_ = 0;
  std::vector<HwCtxImpl*> hctxs_;
  unsigned nr_hw_queues_ = 0;
  std::vector<std::unique_ptr<HwCtxImpl>> hctx_store_;
  std::vector<std::unique_ptr<HwCtxImpl>> hctx_graveyard_;
  // elevator
  ElevatorQueue* elevator_ = nullptr;
  std::unique_ptr<ElevatorQueue> elevator_store_;
  unsigned nr_requests_ = 0;
  std::unique_ptr<Tags> shared_sched_tags_;
  unsigned async_depth_ = 0;
  std::mutex sysfs_lock_;     // attribute writes and elevator switches
  // usage & freeze
  base::PerCpu<std::atomic<int64_t>> usage_;
  base::PerCpu<std::atomic<int64_t>> dispatch_cnt_;
  std::atomic<int> freeze_depth_{0};
  std::atomic<uint32_t> freeze_seq_{0};
  std::atomic<bool> dying_{false};
  std::atomic<int> enter_waiters_{0};  // submitters asleep in enter() (a frozen queue)
  std::mutex freeze_lock_;
  std::atomic<int> quiesce_depth_{0};
  // requeue
  base::SpinLock requeue_lock_;
  ListNode requeue_list_;
  ListNode flush_list_;
  DelayedWork requeue_work_;
  // timeout
  base::Timer timeout_timer_;
  std::atomic<uint64_t> timeout_expiry_{0};  // when timeout_timer_ fires; 0 = not armed
  std::mutex timeout_lock_;
  Work timeout_work_;
  // flush machinery
  struct FlushQueue* fq_ = nullptr;
  // stats
  base::PerCpu<PartStat> stats_;
  std::atomic<uint64_t> io_ticks_ns_{0};
  std::atomic<uint64_t> stamp_ns_{0};
  // mq-deadline style queue-wide scheduler flag
  std::atomic<bool> sq_sched_{false};  // read by queue runs outside any lock
  // Zone write plugging and the zone model: set when limits_.zoned.
  std::unique_ptr<ZoneWplugs> zwp_;
  std::atomic<bool> stats_enabled_{false};  // kRqfStats on new requests
  // blktrace (core/trace.h): the live writer, read by every traced event
  // with one acquire load; writers that were stopped stay allocated (their
  // files closed, buffers freed) until the queue dies, so an event racing
  // a stop never touches freed memory.
  std::atomic<blktrace::Writer*> trace_{nullptr};
  std::mutex trace_lock_;  // start/stop and the trace/ attributes
  std::string trace_dir_;
  std::vector<std::unique_ptr<blktrace::Writer>> trace_writers_;
  // I/O groups (src/qos/blkcg.h): the blkgs made for this queue, under
  // blkcg_tree_lock(); unlinked and released at teardown.
  std::vector<Blkg*> blkgs_;
  // The rq-qos chain (src/qos/rq_qos.h): changed only with the queue
  // frozen, read at each call site with one load.
  std::atomic<RqQos*> rq_qos_{nullptr};
  // Which bios the chain wants (rq_qos_wants): the union of its policies'
  // filters, set with the queue frozen, plus the rq_qos_watch_all count.
  std::atomic<uint64_t> rq_qos_want_{0};
  // io.max (src/qos/throtl.h): made in init, freed at the destructor's end.
  ThrotlData* throtl_ = nullptr;
};

inline QueueImpl* to_impl(Queue* q) { return static_cast<QueueImpl*>(q); }

// Bio::cookie (the hctx a waiter polls or sleeps on) is written where the
// bio becomes a request. For a bio io.max held that is the release on a
// kblockd worker, while its submitter may already read it in Queue::wait
// or poll: so both sides use relaxed atomic accesses (plain moves on x86).
inline void bio_set_cookie(Bio* bio, uint64_t c) {
  std::atomic_ref<uint64_t>(bio->cookie).store(c, std::memory_order_relaxed);
}
inline uint64_t bio_cookie(const Bio* bio) {
  return std::atomic_ref<uint64_t>(const_cast<Bio*>(bio)->cookie).load(std::memory_order_relaxed);
}
inline const QueueImpl* to_impl(const Queue* q) { return static_cast<const QueueImpl*>(q); }
inline HwCtxImpl* to_impl(HwCtx* h) { return static_cast<HwCtxImpl*>(h); }
inline TagSetImpl* to_impl(TagSet* s) { return static_cast<TagSetImpl*>(s); }

// ------------------------------------------------------ engine functions -
// Grouped by the file that defines them. "Any context" means task,
// softirq or hardirq; "task" means a thread that may sleep.

// tags.cc: tag and request allocation, fair sharing, in-flight pins.
struct AllocData {
  QueueImpl* q;
  uint32_t cmd_flags;
  ReqOp op;
  bool reserved = false;
  bool nowait = false;
  unsigned nr_tags = 1;      // batch allocation into cached
  RqList* cached = nullptr;  // where extra batch requests go
  unsigned shallow_depth = 0;
  uint32_t rq_flags = 0;
  SwCtx* ctx = nullptr;  // the submitter's, if it has read it; else read here
  HwCtxImpl* hctx = nullptr;
};
// A request with a scheduler or driver tag; nullptr if nowait and none is
// free, or the queue is dying. Task context; may sleep for a tag.
Request* alloc_request(AllocData& data);
// Returns rq's tags and usage reference once nothing pins it. Any context.
void free_request(Request* rq);
// The same, for a caller that has read its CPU id already (completion reads
// it once per request for all its per-CPU counters).
void free_request(Request* rq, unsigned cpu);
// The last pin is gone: returns the tags and the usage reference (on the
// counter of `cpu`, the caller's). Any context.
void free_request_ref(Request* rq);
void free_request_ref(Request* rq, unsigned cpu);
// Returns a batch of driver tags of one hctx and their usage references
// (on the counter of `cpu`, the caller's). Any context.
void free_tags_batch(HwCtxImpl* hctx, const int* tags, unsigned nr, unsigned cpu);
// Takes a driver tag for a request that has only a scheduler tag; false
// if none is free (fair share included). Dispatch context.
bool get_driver_tag(Request* rq);
// Gives a driver tag back (requeue, completion). Any context.
void put_driver_tag(Request* rq);
// Marks hctx's queue active on a shared tag set (fair sharing), once.
// Any context; a load when already active.
void tag_busy(HwCtxImpl* hctx);
// Marks it idle again (the timeout scan found nothing in flight).
void tag_idle(HwCtxImpl* hctx);
// Requests of q being accounted, by direction (the kernel walks tags too).
// Any context; reads every tag map.
void count_inflight(const QueueImpl* q, uint64_t out[2]);
// Pins a request that is allocated (ref > 0) so it cannot be freed while
// looked at (timeouts, tag walks); false if it is free. Any context.
bool rq_pin(Request* rq);
void rq_unpin(Request* rq);
// The hctx type an op goes to (poll, read, default). Any context; pure.
HctxType hctx_type_for(ReqOp op, uint32_t cmd_flags);

// dispatch.cc: queue runs, insertion, direct issue, restart, delayed runs.
// Runs hctx now in the caller (task context on one of its CPUs) or, if
// async, from interrupt context or elsewhere, through its kblockd run work.
void run_hw_queue(HwCtxImpl* hctx, bool async);
void run_hw_queues_impl(QueueImpl* q, bool async);
// Runs hctx through kblockd after msecs (mod_delayed_work). Any context.
void delay_run_hw_queue(HwCtxImpl* hctx, unsigned msecs);
// Inserts rq where it goes: the flush machinery, the elevator, or the
// ctx (InsertFlag bits). Task or kblockd context; does not run the queue.
void insert_request(Request* rq, uint32_t flags);
// Puts rq on its hctx's dispatch list, past the scheduler. Any context.
void request_bypass_insert(Request* rq, uint32_t flags);
// Issues rq to the driver now; on a busy status it goes to the dispatch
// list and the queue is run. Task context (the submitter).
void try_issue_directly(HwCtxImpl* hctx, Request* rq);
// The dispatch half of blk_mq_flush_plug_list. Task context.
void issue_list_from_plug(RqList* list, bool from_schedule, bool has_elevator, bool multiple_queues);
// Moves the hctx's dispatch_busy EWMA after a dispatch. Dispatch context.
void dispatch_busy_update(HwCtxImpl* hctx, bool busy);
// Sets up hctx's wait entry for shared driver tags, once, at creation.
void init_dispatch_wait(HwCtxImpl* hctx);
// Reruns hctx if a dispatch marked it for restart (a tag or budget it
// lacked was freed). Any context.
void sched_restart(HwCtxImpl* hctx);
// Takes an issued request back from the driver (its driver tag, its
// state) before it is requeued. Any context.
void requeue_rq_internal(Request* rq);
// An hctx's run work (run_work's fn). kblockd.
void run_work_fn(Work* w);

// complete.cc: ending requests, completion routing, accounting.
// Completes rq in the calling context (the softirq handler's work).
void complete_rq_now(Request* rq);
// Starts accounting rq (in flight, io_ticks first). Task context.
void account_io_start(Request* rq);
// A flush the flush machinery sent ended (blk_account_io_flush): flush_ios
// and flush_ticks, timed from frq->start_time_ns (0: iostats was off when
// it was sent, nothing is counted). Completion context.
void account_flush(Request* frq);
// Adds the time since the last stamp to io_ticks if the queue was busy
// (`busy`: the caller knows it was, e.g. a request just ended). Any context.
void update_io_ticks(QueueImpl* q, uint64_t now_ns, bool busy);

// submit.cc: bios into requests.
// Fills a new request from its first bio. Task context.
void bio_to_request(Request* rq, Bio* bio, unsigned nr_segs);
// Ends a bio: its end_io runs, exactly once. Any context.
void bio_endio(Bio* bio);
// A bio io.max held, released into the queue past the throttle stage
// (blk_throtl_dispatch_work_fn's submit_bio_noacct_nocheck): counted in
// io.stat and traced as queued now, then split and submitted; a split part
// goes straight to the queue. kblockd (the throttle's work).
void submit_bio_throttled(QueueImpl* q, Bio* bio);
// A bio released from its zone's write plug (zone_wplug.cc), holding the
// plug and a usage reference its request takes over: throttled, given a
// request (sleeping for a tag if it must), filled with the plugged bios
// that follow it, and issued. kblockd (the plug's work).
void submit_plugged_bio(QueueImpl* q, Bio* bio);
// Submits bio with a private end_io and waits for it; its status. Task
// context; flushes the caller's plug before it sleeps.
BlkStatus submit_bio_wait(Queue* q, Bio* bio);

// merge.cc: merging into plugged, ctx and elevator requests.
// Merges bio into a request in the caller's plug; true if it did. Task.
bool attempt_plug_merge(QueueImpl* q, Bio* bio, unsigned nr_segs);
// Merges bio into a request waiting in ctx's list (no scheduler). Task.
bool ctx_bio_merge(QueueImpl* q, SwCtx* ctx, HctxType type, Bio* bio, unsigned nr_segs);
// Whether a request may take merges, and a bio may be merged. Pure.
bool rq_mergeable(const Request* rq);
bool bio_mergeable(const Bio* bio);
// Segments of bio after splitting at the device's limits. Pure.
unsigned bio_segments(const Bio* bio);
// Appends bio to the back of rq if the merge rules and limits allow it
// (counted and traced as a back merge), without zone write plugging's
// bookkeeping, which its caller, the plug, does. Task, under the plugs' lock.
bool back_merge_plugged(QueueImpl* q, Request* rq, Bio* bio, unsigned nr_segs);
// The elevator's back-merge hash, made and freed with the elevator.
void elv_hash_alloc(ElevatorQueue* eq);
void elv_hash_free(ElevatorQueue* eq);

// flush.cc: the flush state machine (PREFLUSH, FUA emulation).
// Takes a request that carries PREFLUSH or FUA; true if the flush
// machinery consumed it. Task or kblockd context.
bool insert_flush(Request* rq);
// The queue's flush queue, made with the queue and freed with it.
struct FlushQueue* flush_queue_alloc(QueueImpl* q);
void flush_queue_free(struct FlushQueue* fq);

// timeout.cc: request deadlines, the timeout timer and scan, requeues.
// Sets rq's deadline and arms the queue's timer for it. Any context.
void add_timer(Request* rq);
// rq's deadline from now and its timeout. Any context.
void set_deadline(Request* rq);
// When the queue's timer must fire for rq's deadline (set_deadline first).
uint64_t timer_expiry(const Request* rq);
// set_deadline then timer_expiry, reading the timeout once (start_request).
uint64_t start_timer(Request* rq);
// Arms the queue's timer for `expiry` unless it fires no later than half a
// second after it. Any context; one load when armed early enough.
void arm_queue_timer(QueueImpl* q, uint64_t expiry);
void arm_timer_for(Request* rq);  // arm_queue_timer(rq's queue, timer_expiry(rq))
// The timer's callback: queues the scan on kblockd. Timer context.
void timeout_timer_fired(QueueImpl* q);
// The scan (blk_mq_timeout_work) and the requeue list's worker
// (blk_mq_requeue_work): run_work's and requeue_work_'s fns. kblockd.
void timeout_work_fn(Work* w);
void requeue_work_fn(Work* w);

// tagset.cc: the tag set's static requests.
// Allocates (frees) the requests of one tag map. Task context.
Status alloc_static_rqs(TagSetImpl* set, Tags* tags, unsigned hctx_idx);
void free_static_rqs(TagSetImpl* set, Tags* tags, unsigned hctx_idx);

// elevator.cc: registration, switching, scheduler tags. Task context.
// Attaches the kernel's default scheduler to a new queue.
Status elevator_init_default(QueueImpl* q);
// Switches q's scheduler (queue/scheduler), freezing and quiescing it.
Status elevator_switch(QueueImpl* q, std::string_view name);
// Detaches q's scheduler (teardown).
void elevator_exit(QueueImpl* q);
// queue/scheduler's text: the choices, the current one in brackets.
std::string elevator_list(const QueueImpl* q);
// queue/nr_requests: resizes the scheduler tags.
Status set_nr_requests(QueueImpl* q, unsigned nr);

// plug.cc: the plug (blk_plug) and the queue clock's plug cache.
struct PlugState {
  RqList mq_list;
  RqList cached_rqs;
  unsigned nr_ios = 1;
  unsigned rq_count = 0;
  bool multiple_queues = false;
  bool has_elevator = false;
  uint64_t cur_ktime = 0;
};
// The calling thread's plug, nullptr if none. Task context; a TLS read.
PlugState* current_plug_state();
// Adds rq to the plug, flushing it first when full. Task context.
void add_rq_to_plug(PlugState* plug, Request* rq);
// Issues everything plugged (from_schedule: the task is about to sleep).
void flush_plug(PlugState* plug, bool from_schedule);
// (blk_time_get_ns is declared in core/time.h.)

// softirq.cc: BLOCK_SOFTIRQ and completion IPIs (the runtime's lists).
// Completes rq through this CPU's softirq: at irq exit from hardirq
// context, by its softirq worker from task context. Any context.
void raise_block_softirq(Request* rq);
// Completes rq on `cpu`'s softirq (the submitting CPU). Any context.
void send_completion_ipi(Request* rq, unsigned cpu);
// Whether two CPUs share a last-level cache (from sysfs). Any context.
bool cpus_share_cache(unsigned a, unsigned b);
bool cpu_online(unsigned cpu);

// attrs.cc: the queue attributes (sysfs). Task context.
Status queue_attr_store(QueueImpl* q, std::string_view path, std::string_view value);
Result<std::string> queue_attr_show(const QueueImpl* q, std::string_view path);
std::vector<std::string> queue_attr_names(const QueueImpl* q);

// The rq-qos call sites (blk-rq-qos.h's inline wrappers): with no policy
// on the queue each is a load and a not-taken branch; with policies, only
// the bios and requests they want (rq_qos_wants) reach them.
inline RqQos* rq_qos_head(const QueueImpl* q) { return q->rq_qos_.load(std::memory_order_acquire); }
// rq_qos_want_'s layout: BioFlags in bits 0-31, the ReqOps in 32-39, and
// from bit 40 the number of rq_qos_watch_all holds.
inline constexpr unsigned kRqQosWantOpsShift = 32;
inline constexpr unsigned kRqQosWatchShift = 40;
// Whether some policy on q's chain wants bio (RqQosFilter): a load and a
// few ALU operations, so that a policy that is on by default (wbt) costs
// the bios it ignores next to nothing. Any context.
inline bool rq_qos_wants(const QueueImpl* q, const Bio* bio) {
  const uint64_t w = q->rq_qos_want_.load(std::memory_order_relaxed);
  return ((w >> kRqQosWatchShift) | ((w >> (kRqQosWantOpsShift + static_cast<unsigned>(bio->op))) & 1) |
          (bio->flags & static_cast<uint32_t>(w))) != 0;
}
// Marks bio for done_bio (BIO_QOS_THROTTLED) and walks throttle; `head`
// is q's chain as the submitter read it (submit_one reads it once for
// throttle, cleanup and track). Task.
inline void rq_qos_throttle(RqQos* head, QueueImpl* q, Bio* bio) {
  if (head) [[unlikely]] {
    bio->qos_queue = q;
    rq_qos_throttle_slow(head, bio);
  }
}
// Marks bio for done_bio (BIO_QOS_MERGED) and walks merge. Task.
inline void rq_qos_merge(QueueImpl* q, Request* rq, Bio* bio) {
  if (RqQos* h = rq_qos_head(q)) [[unlikely]]
    if (rq_qos_wants(q, bio)) {
      bio->qos_queue = q;
      rq_qos_merge_slow(h, rq, bio);
    }
}
// issue, requeue and done run for requests whose first bio the chain
// wanted (submit_one sets rq_qos_seen; done clears it): one byte of the
// request, which is in cache, per call site.
inline void rq_qos_issue(QueueImpl* q, Request* rq) {
  if (rq->rq_qos_seen) [[unlikely]]
    if (RqQos* h = rq_qos_head(q)) rq_qos_issue_slow(h, rq);
}
inline void rq_qos_requeue(QueueImpl* q, Request* rq) {
  if (rq->rq_qos_seen) [[unlikely]]
    if (RqQos* h = rq_qos_head(q)) rq_qos_requeue_slow(h, rq);
}
inline void rq_qos_done(QueueImpl* q, Request* rq) {
  if (rq->rq_qos_seen) [[unlikely]]
    if (RqQos* h = rq_qos_head(q)) rq_qos_done_slow(h, rq);
}

}  // namespace blkmq
