// bfq's internal state, shared by the service trees (bfq_wf2q.cc), the
// scheduler (bfq_iosched.cc) and the tunables (bfq_attrs.cc). Not a public
// header. Everything below is protected by BfqData::lock unless it says
// otherwise.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>
#include <set>
#include <unordered_map>

#include "base/clock.h"
#include "base/lockstat.h"
#include "base/timer.h"
#include "blkmq/elevator/elevator.h"
#include "blkmq/queue.h"
#include "blkmq/elevator/rbtree.h"
#include "sched/insert_lists.h"
#include "sched/sort_tree.h"
#include "blkmq/ioctx.h"
#include "blkmq/iogroup.h"
#include "sched/bfq/bfq.h"
#include "sched/bfq/bfq_tree.h"

namespace blkmq::bfq {

constexpr uint64_t kMs = base::kNsPerMs;
enum Class : unsigned { kRt = 0, kBe = 1, kIdle = 2, kNrClasses = 3 };
using Expire = BfqExpire;

// ---- constants (bfq-iosched.c, bfq-iosched.h; "bare" where the kernel
// writes the number in the function named) ----
constexpr unsigned kServiceShift = 22;             // WFQ_SERVICE_SHIFT
constexpr uint64_t kDefaultMaxBudget = 16 * 1024;  // bfq_default_max_budget: sectors, until auto-tuning has data
constexpr unsigned kAsyncChargeFactor = 3;         // bfq_async_charge_factor
constexpr uint64_t kClassIdleTimeoutNs = 200 * kMs;  // BFQ_CL_IDLE_TIMEOUT
constexpr uint64_t kMinTtNs = 2 * kMs;               // BFQ_MIN_TT
constexpr uint64_t kDefaultSliceIdleNs = 8 * kMs;    // bfq_slice_idle (HZ/125)
constexpr uint64_t kWrMinIdleTimeNs = 2000 * kMs;    // bfq_wr_min_idle_time
constexpr unsigned kWrCoeff = 30;                    // bfqd->bfq_wr_coeff's default
constexpr unsigned kSoftRtWeightFactor = 100;        // BFQ_SOFTRT_WEIGHT_FACTOR
constexpr uint64_t kWrRtMaxTimeNs = 300 * kMs;       // bfq_wr_rt_max_time's default
constexpr uint64_t kWrMaxSoftRtRate = 7000;          // bfq_wr_max_softrt_rate: sectors/s
constexpr uint64_t kMaxServiceFromWr = 120000;       // max_service_from_wr: sectors
constexpr uint64_t kWrLongIdleMinNs = 20 * kMs;      // idle slice of a raised queue (bfq_arm_slice_timer, bare)
constexpr unsigned kBurstThresh = 8;                 // bfq_large_burst_thresh
constexpr uint64_t kBurstIntervalNs = 180 * kMs;     // bfq_burst_interval
constexpr uint64_t kSeekThr = 8 * 100;               // BFQQ_SEEK_THR (sectors)
constexpr uint32_t kSectThrNonrot = 64;              // BFQQ_SECT_THR_NONROT
constexpr unsigned kSeekyThresh = 19;                // of the last 32 requests (BFQQ_SEEKY, bare)
constexpr unsigned kHwQueueThreshold = 3;            // BFQ_HW_QUEUE_THRESHOLD
constexpr unsigned kHwQueueSamples = 32;             // BFQ_HW_QUEUE_SAMPLES
constexpr unsigned kTtimeMinSamples = 80;            // bfq_sample_valid (bare)
constexpr unsigned kStatsMinBudgets = 194;           // bfq_stats_min_budgets
constexpr uint64_t kInjectResetNs = 1000 * kMs;      // inject limit reset (bfq_add_request, bare)
constexpr uint64_t kRateSlowIntervalNs = 20 * kMs;   // bfq_bfqq_is_slow (bare)
constexpr uint64_t kIoIntensityWindowNs = 200 * kMs;  // bfq_update_io_intensity's window (bare)
// Queue weights from I/O priorities (bfq_ioprio_to_weight): weight =
// (IOPRIO_NR_LEVELS - level) * BFQ_WEIGHT_CONVERSION_COEFF; a queue of
// the default level IOPRIO_NORM starts with kNormWeight.
constexpr unsigned kIoprioNrLevels = 8;              // IOPRIO_NR_LEVELS
constexpr unsigned kWeightConversionCoeff = 10;      // BFQ_WEIGHT_CONVERSION_COEFF
constexpr unsigned kIoprioNorm = 4;                  // IOPRIO_NORM
constexpr unsigned kNormWeight = (kIoprioNrLevels - kIoprioNorm) * kWeightConversionCoeff;
// Tunable defaults (the static consts at the top of bfq-iosched.c).
constexpr uint64_t kDefaultFifoExpireAsyncNs = 250 * kMs;  // bfq_fifo_expire[0]: NSEC_PER_SEC / 4
constexpr uint64_t kDefaultFifoExpireSyncNs = 125 * kMs;   // bfq_fifo_expire[1]: NSEC_PER_SEC / 8
constexpr uint64_t kDefaultBackMaxKib = 16 * 1024;         // bfq_back_max
constexpr unsigned kDefaultBackPenalty = 2;                // bfq_back_penalty
constexpr uint64_t kDefaultTimeoutNs = 125 * kMs;          // bfq_timeout: HZ / 8
constexpr uint64_t kQueueFreeGraceNs = kWrMinIdleTimeNs;  // see sweep (bfq_queue.cc)
constexpr uint64_t kSweepIntervalNs = 100 * kMs;          // how often dispatch looks for unused queues
// Peak-rate estimation (bfq_update_peak_rate). Rates are in sectors per
// microsecond << kRateShift; index 0 is a rotational device, 1 not.
constexpr unsigned kRateShift = 16;                   // BFQ_RATE_SHIFT
constexpr unsigned kRateMinSamples = 32;              // BFQ_RATE_MIN_SAMPLES
constexpr uint64_t kRateMinIntervalNs = 300 * kMs;    // BFQ_RATE_MIN_INTERVAL
constexpr uint64_t kRateRefIntervalNs = 1000 * kMs;   // BFQ_RATE_REF_INTERVAL
constexpr uint64_t kRefRate[2] = {14000, 33000};      // ref_rate
// Weight raising lasts rate_dur_prod / peak_rate: these at the reference
// rate, so 1.5 times these at the initial estimate (2/3 of it).
constexpr uint64_t kRefWrDurationNs[2] = {7000 * kMs, 2500 * kMs};  // ref_wr_duration
constexpr uint64_t kMinWrDurationNs = 3000 * kMs, kMaxWrDurationNs = 25000 * kMs;  // bfq_wr_duration's clamp

struct BfqEntity;
struct BfqQueue;
struct BfqGroup;
struct SchedData;

// Where a request is inside the scheduler (rq->elv_priv[2]).
enum RqWhere : uintptr_t { kNowhere = 0, kSorted = 1, kOnDispatch = 2, kInDriver = 3 };

// One per class: B-WF2Q+'s virtual time, weight sum, and the active and
// idle trees. wsum counts every entity on either tree and the in-service
// one, as the kernel's does.
struct ServiceTree {
  uint64_t vtime = 0;
  uint64_t wsum = 0;
  ActiveTree active;
  IdleTree idle;
};

// A group's scheduling data (bfq_sched_data): its children's service
// trees, one per class, and which child is on the in-service path.
struct SchedData {
  ServiceTree st[kNrClasses];
  BfqEntity* in_service = nullptr;  // the child on the in-service path
  BfqEntity* owner = nullptr;       // the group's entity (the root's: never queued)
  uint64_t class_idle_last_service = 0;
  // Whether any child is active or in service: the group's entity stays
  // queued in its parent exactly while this holds.
  bool busy() const { return in_service || !st[0].active.empty() || !st[1].active.empty() || !st[2].active.empty(); }
};

// Queue identity: sync queues are per context (moved when the context
// changes group, bfq_bic_update_cgroup); async queues are shared by every
// context of one group with the same ioprio (class, level) and weight, as
// the kernel's per-group async queues. An async queue of a group other
// than the root is told apart by its group's address with the top bit set
// in place of the context id (context ids never reach 2^63), so the flat
// case hashes and compares what it did before groups.
struct QKey {
  uint64_t ioc_id;   // sync: the context; async: 0 (root) or kGroupTag | group
  uint32_t async;    // async: weight << 16 | ioprio; sync: 0
  bool operator==(const QKey& o) const { return ioc_id == o.ioc_id && async == o.async; }
};
constexpr uint64_t kGroupTag = uint64_t{1} << 63;
struct QKeyHash {
  size_t operator()(const QKey& k) const { return std::hash<uint64_t>()(k.ioc_id * 0x9e3779b97f4a7c15ull ^ k.async); }
};

// A B-WF2Q+ entity (bfq_entity): a queue, or a group's entity in its
// parent group's trees. BfqQueue and BfqGroup derive from it, so the
// queue code reads q->weight, q->budget as it always did.
struct BfqEntity {
  uint64_t uid = 0;
  Class cls = kBe;
  Class new_cls = kBe;
  unsigned orig_weight = kNormWeight;
  unsigned new_orig_weight = kNormWeight;
  unsigned weight = kNormWeight;  // applied weight: orig_weight * wr_coeff
  unsigned wr_coeff = 1;          // weight raising; always 1 for a group
  bool prio_changed = false;
  uint64_t start = 0, finish = 0;
  // On the active or the idle tree (bfq_tree.h), whichever `tree` says;
  // min_start is the active tree's cached minimum start of the subtree.
  RbNode rb_node;
  uint64_t min_start = 0;
  uint64_t budget = 0;         // entity budget, sectors
  uint64_t service = 0;        // received in this slot (or while injected)
  enum Tree : uint8_t { kNone, kActive, kIdleTree } tree = kNone;
  Class tree_cls = kBe;        // class whose tree holds it / whose wsum counts it
  bool counted = false;        // contributes to its tree's wsum
  BfqEntity* parent = nullptr; // its group's entity; nullptr in the root group
  SchedData* sd = nullptr;     // the trees it is queued in (its group's)
  SchedData* my_sd = nullptr;  // a group's own trees; nullptr for a queue
};

// A group's state on one bfq instance (bfq_group): its entity in the
// parent's trees and its own trees. Made on the group's first request
// (or io.bfq.weight write) on this device; references: each queue in it,
// each child group, and the link from BfqData::groups until the group is
// removed. The root group is BfqData::root and is never counted.
struct BfqGroup : BfqEntity {
  BfqGroup() {
    my_sd = &own;
    own.owner = this;
  }
  SchedData own;
  IoGroup* iog = nullptr;          // referenced (io_group_get); nullptr for the root
  BfqGroup* parent_group = nullptr;
  unsigned refs = 0;
  bool linked = false;             // in BfqData::groups
  unsigned dev_weight = 0;         // io.bfq.weight "MAJ:MIN N" on this device; 0: none
  unsigned queues_pending = 0;     // num_queues_with_pending_reqs
};

struct BfqQueue : BfqEntity {
  BfqQueue() { fifo.init(); }
  BfqQueue(const BfqQueue&) = delete;

  QKey key{};
  bool sync = true;
  BfqGroup* bfqg = nullptr;    // its group (referenced unless the root)
  const IoGroup* iog = nullptr;  // bfqg->iog, read on every insert
  bool in_groups_pending = false;  // counted in bfqg->queues_pending
  uint64_t last_charge = 0;    // service charged for the last slot (introspection)

  // ---- requests ----
  SortTree sort;
  ListNode fifo;               // arrival order (queuelist)
  Request* next_rq = nullptr;  // chosen next request; reset when the set changes
  unsigned queued[2] = {0, 0};  // [async, sync]
  unsigned dispatched = 0;
  unsigned refs = 0;           // requests attached (allocated until freed)
  bool busy = false;
  bool in_weights = false;     // counted in BfqData::weights
  unsigned weights_key = 0;
  uint64_t empty_since = 0;    // when refs and busy last dropped to zero

  // ---- budget and service slot ----
  uint64_t max_budget = 0;
  uint64_t budget_timeout = 0;  // 0: never in service
  uint64_t slot_start = 0;
  bool wait_request = false;
  // Expired empty for a reason other than its budget (idle, no more
  // requests, preempted): back within 3 x slice_idle of its last
  // completion it resumes the budget it had left, back-shifted, and may
  // preempt (BFQQF_non_blocking_wait_rq).
  bool non_blocking_wait_rq = false;
  bool fifo_checked = false;
  // I/O bound: busy (requests queued or in the driver) at least 80 % of
  // a window of about the last 200 ms (bfq_update_io_intensity).
  bool io_bound = true;
  bool just_created = true;    // until its first request makes it busy
  uint64_t io_start_time = 0;  // start of the I/O-intensity window
  uint64_t tot_idle_time = 0;  // time with nothing queued or in flight, within it
  bool short_ttime = true;
  bool softrt_update = false;

  // ---- think time and seekiness ----
  uint64_t last_end_request = 0;
  uint64_t ttime_samples = 0, ttime_total = 0, ttime_mean = 0;
  uint32_t seek_history = 1;   // the first request is almost surely seeky
  uint64_t last_request_pos = 0;

  // ---- weight raising ---- (wr_coeff is the entity's)
  uint64_t wr_cur_max_time = 0;
  uint64_t last_wr_start_finish = 0;
  uint64_t service_from_wr = 0;
  uint64_t soft_rt_next_start = 0;
  uint64_t last_idle_bklogged = 0;
  uint64_t service_from_backlogged = 0;
  bool in_large_burst = false;

  // ---- injection ----
  unsigned inject_limit = 0;
  uint64_t last_serv_time_ns = 0;
  uint64_t decrease_time = 0;

  uint64_t sectors_dispatched = 0;  // statistics
};

struct Tunables {
  uint64_t slice_idle_ns = kDefaultSliceIdleNs;
  uint64_t fifo_expire_ns[2] = {kDefaultFifoExpireAsyncNs, kDefaultFifoExpireSyncNs};  // by rq_is_sync
  uint64_t back_max_kib = kDefaultBackMaxKib;
  unsigned back_penalty = kDefaultBackPenalty;
  uint64_t user_max_budget = 0;  // 0: auto
  uint64_t timeout_ns = kDefaultTimeoutNs;
  bool strict_guarantees = false;
  bool low_latency = true;
};

// The device's estimated peak rate and what is derived from it (bfq_data's
// peak_rate fields), under BfqData::lock. See bfq_rate.cc.
struct PeakRate {
  uint64_t rate = 0;            // sectors/us << kRateShift
  unsigned samples = 0;         // dispatches in the current interval
  unsigned sequential = 0;      // of which sequential
  uint64_t tot_sectors = 0;
  uint64_t last_rq_max_size = 0;
  uint64_t first_dispatch = 0;
  uint64_t last_dispatch = 0;
  uint64_t last_completion = 0;
  uint64_t delta_from_first = 0;
  uint64_t max_budget = kDefaultMaxBudget;  // what the device moves in one budget timeout
};

struct BfqData {
  BfqData(Queue* queue, ElevatorQueue* elv);
  ~BfqData();
  BfqData(const BfqData&) = delete;

  Queue* q;
  ElevatorQueue* eq;
  base::StatSpinLock lock;  // queue/iosched/lock_stat
  std::unordered_map<QKey, BfqQueue*, QKeyHash> queues;
  uint64_t next_uid = 1;
  // The root group: its trees are the top level, and the only level while
  // no request comes from another group (the flat case).
  BfqGroup root;
  // The other groups with state here, by I/O group (bfq_group of a blkg).
  std::unordered_map<const IoGroup*, BfqGroup*> groups;
  std::set<BfqGroup*> all_groups;  // linked or not, until freed
  // Groups (the root included) with a queue that has requests queued or in
  // the driver (num_groups_with_pending_reqs): more than one makes the
  // scenario asymmetric, so bfq idles to keep each group's share.
  unsigned groups_with_pending = 0;
  BfqQueue* in_service = nullptr;
  ListNode dispatch;            // at-head inserts and requests without a queue
  unsigned busy_queues[kNrClasses] = {0, 0, 0};
  // Atomic only so limit_depth may read it without the lock (a hint).
  std::atomic<unsigned> wr_busy_queues{0};
  std::map<unsigned, unsigned> weights;  // weight -> active queues (queue_weights_tree)
  unsigned rq_in_driver = 0;
  unsigned max_rq_in_driver = 0;
  int hw_tag = -1;
  unsigned hw_tag_samples = 0;
  uint64_t last_position = 0;
  unsigned budgets_assigned = 0;
  uint64_t last_idling_start = 0;
  bool rqs_injected = false;
  // The injection limit's probe (bfq_add_request, bfq_update_inject_limit):
  // when the in-service queue gets a request with the driver empty, the
  // first request it then dispatches is timed from that moment to its
  // completion; only that request's completion moves the limit.
  bool wait_dispatch = false;
  const Request* waited_rq = nullptr;
  uint64_t last_empty_occupied = 0;
  // Burst detection (bfq_handle_burst): the sync queues created in the
  // current burst, so all of them are marked when it becomes large.
  uint64_t last_ins_in_burst = 0;
  unsigned burst_size = 0;
  bool large_burst = false;
  std::vector<BfqQueue*> burst_list;
  uint64_t last_sweep = 0;
  Tunables tun;
  bool rotational = false;

  // Idle timer: armed on the real clock; acts only once the bfq clock has
  // reached idle_deadline (0: not armed).
  base::Timer idle_timer;
  uint64_t idle_deadline = 0;

  // Lockless has_work hint: requests on dispatch and in queues (written
  // under lock) and parked on the insert lists (ins.pending()).
  std::atomic<int64_t> nr_queued{0};
  std::atomic<bool> hold{false};
  SplitInsert ins;  // seed 003's insert_lists

  BfqStats stats;  // under lock (deferred_inserts: from ins)

  PeakRate pr;

  // bfq_max_budget: the user's, else the estimate once enough budgets were
  // assigned to trust it.
  uint64_t max_budget() const {
    if (tun.user_max_budget) return tun.user_max_budget;
    return budgets_assigned < kStatsMinBudgets ? kDefaultMaxBudget : pr.max_budget;
  }
  uint64_t min_budget() const { return max_budget() / 32; }
  unsigned tot_busy() const { return busy_queues[0] + busy_queues[1] + busy_queues[2]; }
};

inline BfqData* bfqd_of(ElevatorQueue* eq) { return static_cast<BfqData*>(eq->elevator_data); }
inline SplitInsert* bfq_ins_of(ElevatorQueue* eq) { return &bfqd_of(eq)->ins; }
inline base::StatSpinLock* bfq_lock_of(ElevatorQueue* eq) { return &bfqd_of(eq)->lock; }
inline base::StatSpinLock* bfq_ins_lock_of(ElevatorQueue* eq) { return &bfqd_of(eq)->ins.lock(); }
inline BfqData* bfqd_of(Queue* q) { return bfqd_of(queue_elevator(q)); }
inline BfqQueue* rq_bfqq(const Request* rq) { return static_cast<BfqQueue*>(rq->elv_priv[0]); }
inline RqWhere where_of(const Request* rq) { return rq_where<RqWhere>(rq); }
inline void set_where(Request* rq, RqWhere w) { set_rq_where(rq, w); }

// bfq's time: its queue's clock (Queue::now_ns).
inline uint64_t now_ns(const BfqData* bfqd) { return bfqd->q->now_ns(); }

// ---- B-WF2Q+ (bfq_wf2q.cc) ----
// Queue becomes busy: start from the idle tree or at V, finish from the
// budget, and its ancestors that were not queued are queued too;
// back_shift: a queue back in time after an idle pause starts from its old
// finish when V has passed it.
void activate_entity(BfqData* bfqd, BfqQueue* bfqq, bool back_shift);
// The in-service queue is expired with requests left: charged what it got,
// back on the active tree with its next budget; so are its ancestors.
void requeue_entity(BfqData* bfqd, BfqQueue* bfqq);
// The queue has no requests left: to the idle tree, or forgotten; the
// groups it leaves empty leave their parents' trees. in_service: it was
// being served, and its ancestors are requeued or deactivated too.
void deactivate_entity(BfqData* bfqd, BfqQueue* bfqq, bool in_service);
// Charge `sectors` of service to the queue and every ancestor (advances
// each level's virtual time).
void entity_served(BfqData* bfqd, BfqQueue* bfqq, uint64_t sectors);
// The next queue to serve, chosen level by level from the root; it and its
// ancestors are taken off their active trees (the in-service path), or nullptr.
BfqQueue* get_next_queue(BfqData* bfqd, uint64_t now);
// Drops an entity that is on no active tree from the idle tree and wsum.
void forget_entity(BfqEntity* e);
// Weight (ioprio and context weight) as bfq computes it.
unsigned ioprio_weight(unsigned level);

// ---- groups (bfq_cgroup.cc) ----
// The group a request belongs to: its first bio's charged group (the
// kernel's bio_blkcg), nullptr for the root. Valid while the request holds
// its bios. A load and a branch when nothing is charged.
inline IoGroup* rq_group(const Request* rq) {
  return rq->bio && rq->bio->blkg ? bio_io_group(rq->bio) : nullptr;
}
inline IoGroup* bio_group(const Bio* bio) { return bio->blkg ? bio_io_group(bio) : nullptr; }
// iog's group state here (and its ancestors'), made on first use and
// linked; &bfqd->root for nullptr or the root. Lock held.
BfqGroup* group_for(BfqData* bfqd, IoGroup* iog);
// A queue joins g (references it) / leaves its group. Lock held.
void queue_set_group(BfqData* bfqd, BfqQueue* q, BfqGroup* g);
void queue_put_group(BfqData* bfqd, BfqQueue* q);
// bfq_bfqq_move: a sync queue follows its context into group g; served,
// it is expired first; busy, it leaves its old group's trees and is queued
// in g's. Lock held.
void move_queue(BfqData* bfqd, BfqQueue* q, BfqGroup* g, uint64_t now);
// Lets go of the groups that were removed (io_group_online false): their
// link's reference; each is freed when its last queue goes. Lock held.
void sweep_groups(BfqData* bfqd);
// Frees every group (scheduler exit; no queue is left).
void free_all_groups(BfqData* bfqd);
// A queue starts / stops having requests queued or in the driver
// (num_groups_with_pending_reqs). Lock held.
inline void groups_pending_add(BfqData* bfqd, BfqQueue* q) {
  if (q->in_groups_pending) return;
  q->in_groups_pending = true;
  if (q->bfqg->queues_pending++ == 0) bfqd->groups_with_pending++;
}
inline void groups_pending_remove(BfqData* bfqd, BfqQueue* q) {
  if (!q->in_groups_pending) return;
  q->in_groups_pending = false;
  if (--q->bfqg->queues_pending == 0) bfqd->groups_with_pending--;
}
// io.bfq.weight (cgroup/<path>/io.bfq.weight).
std::vector<ElvGroupAttr> bfq_group_attrs();

// ---- attrs (bfq_attrs.cc) ----
std::vector<ElvAttr> bfq_attrs();
// Ends weight raising of every queue (low_latency set to 0). Lock held.
void end_all_wr(BfqData* bfqd);

}  // namespace blkmq::bfq
