// The rq-qos chain: registration, adding and removing policies with the
// queue frozen, and the walks the core's call sites make.
#include <cerrno>
#include <mutex>

#include "base/registry.h"
#include "core/core.h"
#include "qos/rq_qos.h"

extern const blkmq::base::Builtin<blkmq::RqQosType> blkmq_builtin_rq_qos_wbt;

namespace blkmq {
namespace {

Status check_rq_qos(const RqQosType& t) {
  if (t.name.empty()) return Status::invalid("rq-qos policy: empty name");
  return Status::OK();
}

// The built-in policies, listed here rather than in a generated table:
// there is one (io.latency and io.cost will join it). Referring to the
// entry links wbt.cc into any program that uses the chain.
const base::Builtin<RqQosType>* const kBuiltins[] = {&blkmq_builtin_rq_qos_wbt};

base::Registry<RqQosType>& policies() {
  static base::Registry<RqQosType> r("rq-qos policy", base::BuiltinTable<RqQosType>(kBuiltins), &check_rq_qos);
  return r;
}

// The union of the chain's filters, in rq_qos_want_'s layout (core.h).
uint64_t chain_filter(const QueueImpl* q) {
  uint64_t w = 0;
  for (RqQos* r = q->rq_qos_.load(std::memory_order_acquire); r; r = r->next) {
    const RqQosFilter& f = r->type->filter;
    if (f.all) return uint64_t{0xff} << kRqQosWantOpsShift | 0xffffffffu;
    w |= uint64_t{f.ops} << kRqQosWantOpsShift | f.flags;
  }
  return w;
}

// Replaces the filter bits of q's word, keeping the watch count that
// policies' timers move at any time. The queue is frozen.
void update_filter(QueueImpl* q) {
  constexpr uint64_t kFilterMask = (uint64_t{1} << kRqQosWatchShift) - 1;
  const uint64_t f = chain_filter(q);
  uint64_t w = q->rq_qos_want_.load(std::memory_order_relaxed);
  while (!q->rq_qos_want_.compare_exchange_weak(w, (w & ~kFilterMask) | f, std::memory_order_relaxed)) {
  }
}

// The chain changes only with the queue frozen: no bio is between
// throttle and done_bio, no request between track and done.
struct FrozenQueue {
  explicit FrozenQueue(QueueImpl* q) : q_(q) {
    q_->freeze_start();
    q_->freeze_wait();
  }
  ~FrozenQueue() { q_->unfreeze_impl(); }
  QueueImpl* q_;
};

RqQos* find_on(const QueueImpl* q, const RqQosType* t) {
  for (RqQos* r = q->rq_qos_.load(std::memory_order_acquire); r; r = r->next)
    if (r->type == t) return r;
  return nullptr;
}

}  // namespace

Status register_rq_qos(const RqQosType* type) { return policies().add(type); }

Status rq_qos_add(Queue* qp, std::string_view name) {
  QueueImpl* q = to_impl(qp);
  const RqQosType* t = policies().find(name);
  if (!t) return Status::error(ENOENT, "rq-qos policy '" + std::string(name) + "' is not registered");
  std::lock_guard<std::mutex> g(q->sysfs_lock_);
  if (find_on(q, t)) return Status::error(EBUSY, "rq-qos policy '" + t->name + "' is already on this queue");
  auto* r = new RqQos;
  r->type = t;
  r->q = qp;
  FrozenQueue frozen(q);
  if (t->init)
    if (Status st = t->init(r); !st) {
      delete r;
      return st;
    }
  // Appended: the kernel's chain order is the order policies were added.
  RqQos* tail = q->rq_qos_.load(std::memory_order_relaxed);
  if (!tail) q->rq_qos_.store(r, std::memory_order_release);
  else {
    while (tail->next) tail = tail->next;
    tail->next = r;
  }
  update_filter(q);
  return Status::OK();
}

Status rq_qos_del(Queue* qp, std::string_view name) {
  QueueImpl* q = to_impl(qp);
  std::lock_guard<std::mutex> g(q->sysfs_lock_);
  const RqQosType* t = policies().find(name);
  RqQos* r = t ? find_on(q, t) : nullptr;
  if (!r) return Status::error(ENOENT, "rq-qos policy '" + std::string(name) + "' is not on this queue");
  {
    FrozenQueue frozen(q);
    RqQos* head = q->rq_qos_.load(std::memory_order_relaxed);
    if (head == r) q->rq_qos_.store(r->next, std::memory_order_release);
    else {
      while (head->next != r) head = head->next;
      head->next = r->next;
    }
    update_filter(q);
  }
  if (t->ops.exit) t->ops.exit(r);
  delete r;
  return Status::OK();
}

RqQos* rq_qos_find_locked(Queue* qp, std::string_view name) {
  const RqQosType* t = policies().find(name);
  return t ? find_on(to_impl(qp), t) : nullptr;
}

void rq_qos_watch_all(RqQos* rqos, bool on) {
  constexpr uint64_t kOne = uint64_t{1} << kRqQosWatchShift;
  std::atomic<uint64_t>& w = to_impl(rqos->q)->rq_qos_want_;
  if (on) w.fetch_add(kOne, std::memory_order_relaxed);
  else w.fetch_sub(kOne, std::memory_order_relaxed);
}

std::vector<std::string> rq_qos_list(Queue* qp) {
  QueueImpl* q = to_impl(qp);
  std::lock_guard<std::mutex> g(q->sysfs_lock_);
  std::vector<std::string> v;
  for (RqQos* r = q->rq_qos_.load(std::memory_order_acquire); r; r = r->next) v.push_back(r->type->name);
  return v;
}

void rq_qos_queue_depth_changed(Queue* qp) {
  QueueImpl* q = to_impl(qp);
  std::lock_guard<std::mutex> g(q->sysfs_lock_);
  for (RqQos* r = q->rq_qos_.load(std::memory_order_acquire); r; r = r->next)
    if (r->type->ops.queue_depth_changed) r->type->ops.queue_depth_changed(r);
}

void rq_qos_exit(Queue* qp) {
  QueueImpl* q = to_impl(qp);
  RqQos* r = q->rq_qos_.exchange(nullptr, std::memory_order_acq_rel);
  while (r) {
    RqQos* next = r->next;
    if (r->type->ops.exit) r->type->ops.exit(r);
    delete r;
    r = next;
  }
}

// The walks: each policy in chain order, those with the hook.
#define BLKMQ_RQ_QOS_WALK(hook, ...)                        \
  for (RqQos* r = head; r; r = r->next)                     \
    if (r->type->ops.hook) r->type->ops.hook(r, __VA_ARGS__)

void rq_qos_throttle_slow(RqQos* head, Bio* bio) { BLKMQ_RQ_QOS_WALK(throttle, bio); }
void rq_qos_cleanup_slow(RqQos* head, Bio* bio) { BLKMQ_RQ_QOS_WALK(cleanup, bio); }
void rq_qos_track_slow(RqQos* head, Request* rq, Bio* bio) { BLKMQ_RQ_QOS_WALK(track, rq, bio); }
void rq_qos_merge_slow(RqQos* head, Request* rq, Bio* bio) { BLKMQ_RQ_QOS_WALK(merge, rq, bio); }
void rq_qos_issue_slow(RqQos* head, Request* rq) { BLKMQ_RQ_QOS_WALK(issue, rq); }
void rq_qos_requeue_slow(RqQos* head, Request* rq) { BLKMQ_RQ_QOS_WALK(requeue, rq); }
void rq_qos_done_slow(RqQos* head, Request* rq) {
  BLKMQ_RQ_QOS_WALK(done, rq);
  rq->rq_qos_seen = 0;  // a request the next bio makes starts unseen
}

void rq_qos_done_bio(Bio* bio) {
  QueueImpl* q = to_impl(bio->qos_queue);
  bio->qos_queue = nullptr;
  if (RqQos* head = q->rq_qos_.load(std::memory_order_acquire)) BLKMQ_RQ_QOS_WALK(done_bio, bio);
}

#undef BLKMQ_RQ_QOS_WALK

}  // namespace blkmq
