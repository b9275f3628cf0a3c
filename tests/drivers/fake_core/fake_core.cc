#include "fake_core.h"

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/clock.h"
#include "base/spinlock.h"
#include "base/timer.h"
#include "blkmq/device.h"

namespace blkmq {
namespace fake {
namespace {
Record g_rec;
std::mutex g_timer_mu;
std::vector<base::Timer*> g_armed;
// Timer's callback is private: keep our own copy per timer.
std::unordered_map<base::Timer*, std::function<void()>> g_timer_fns;
thread_local ExecContext t_ctx = ExecContext::task;
constexpr unsigned kRqsPerHctx = 8;

struct FakeTagSet : TagSet {
  TagSetConfig cfg;
};
}  // namespace

Record& rec() { return g_rec; }
void reset() { g_rec = Record{}; }

FakeQueue::~FakeQueue() {
  const TagSetConfig& c = set->config();
  for (size_t i = 0; i < rqs.size(); i++) {
    if (c.ops->exit_request) c.ops->exit_request(set, rqs[i], unsigned(i / kRqsPerHctx));
    rqs[i]->~Request();
    std::free(rqs[i]);
  }
  for (size_t i = 0; i < hctxs.size(); i++) {
    if (c.ops->exit_hctx) c.ops->exit_hctx(hctxs[i].get(), unsigned(i));
  }
}

Request* FakeQueue::request(unsigned hctx, unsigned i) { return rqs[hctx * kRqsPerHctx + i]; }
FakeQueue& fake(Queue& q) { return static_cast<FakeQueue&>(q); }
const DriverOps& ops(Queue& q) { return *fake(q).set->config().ops; }

int fire_timers() {
  std::vector<base::Timer*> now;
  {
    std::lock_guard lk(g_timer_mu);
    now.swap(g_armed);
  }
  for (base::Timer* t : now) {
    std::function<void()> fn;
    {
      std::lock_guard lk(g_timer_mu);
      fn = g_timer_fns[t];
    }
    fn();
  }
  return int(now.size());
}

}  // namespace fake

// ---- TagSet / Queue ----

Result<std::unique_ptr<TagSet>> TagSet::create(const TagSetConfig& cfg) {
  auto t = std::make_unique<fake::FakeTagSet>();
  t->cfg = cfg;
  return std::unique_ptr<TagSet>(std::move(t));
}
TagSet::~TagSet() = default;
const TagSetConfig& TagSet::config() const { return static_cast<const fake::FakeTagSet*>(this)->cfg; }

Result<std::unique_ptr<Queue>> Queue::create(TagSet& set, const QueueConfig& cfg) {
  auto q = std::make_unique<fake::FakeQueue>();
  q->set = &set;
  q->cfg = cfg;
  const TagSetConfig& c = set.config();
  unsigned idx = 0;
  for (unsigned type = 0; type < kNrHctxTypes; type++) {
    for (unsigned i = 0; i < c.nr_queues[type]; i++, idx++) {
      auto h = std::make_unique<HwCtx>();
      h->queue = q.get();
      h->set = &set;
      h->queue_num = idx;
      h->type = static_cast<HctxType>(type);
      if (c.ops->init_hctx && c.ops->init_hctx(h.get(), c.driver_data, idx) != 0) {
        // The failed hctx is not exited; the others are, by ~FakeQueue.
        return Status::error(14, "init_hctx failed for hctx " + std::to_string(idx));
      }
      q->hctxs.push_back(std::move(h));
      for (unsigned r = 0; r < fake::kRqsPerHctx; r++) {
        void* mem = std::aligned_alloc(64, sizeof(Request) + ((c.cmd_size + 63) & ~63u));
        auto* rq = new (mem) Request();
        rq->q = q.get();
        rq->mq_hctx = q->hctxs.back().get();
        rq->tag = int(r);
        q->rqs.push_back(rq);
        if (c.ops->init_request) c.ops->init_request(&set, rq, idx);
      }
    }
  }
  return std::unique_ptr<Queue>(std::move(q));
}
Queue::~Queue() = default;
void* queue_data(const Queue* q) { return static_cast<const fake::FakeQueue*>(q)->cfg.queuedata; }

// ---- driver calls ----

void start_request(Request* rq) {
  rq->state.store(RqState::in_flight);
  fake::g_rec.started++;
}
void end_request(Request* rq, BlkStatus st) {
  rq->state.store(RqState::idle);
  fake::g_rec.ended.push_back({rq, st, current_context()});
}
bool complete_request(Request* rq, BlkStatus st) {
  rq->status = st;
  fake::g_rec.completes++;
  fake::fake(*rq->q).set->config().ops->complete(rq);
  return true;
}
bool add_to_batch(Request*, IoCompBatch*, BlkStatus) { return false; }
void requeue_request(Request*, bool) { fake::g_rec.requeued++; }
void stop_hw_queues(Queue*) {
  fake::g_rec.stops++;
  fake::g_rec.stopped = true;
}
void start_stopped_hw_queues(Queue*, bool) {
  fake::g_rec.starts++;
  fake::g_rec.stopped = false;
}

ExecContext current_context() { return fake::t_ctx; }
HardirqScope::HardirqScope() : prev_(fake::t_ctx) { fake::t_ctx = ExecContext::hardirq; }
HardirqScope::~HardirqScope() { fake::t_ctx = prev_; }
unsigned nr_cpu_ids() { return 4; }
void register_device_driver(const DeviceDriver*) { fake::g_rec.registered++; }

namespace base {
uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * kNsPerSec + uint64_t(ts.tv_nsec);
}
void SpinLock::lock_slow() {
  while (flag_.exchange(true, std::memory_order_acquire)) {
  }
}
TimerThread::TimerThread(std::string name, bool hardirq_context)
    : hardirq_(hardirq_context), name_(std::move(name)) {}
TimerThread::~TimerThread() = default;
void Timer::init(TimerThread* thread, std::function<void()> fn) {
  thread_ = thread;
  std::lock_guard lk(fake::g_timer_mu);
  fake::g_timer_fns[this] = std::move(fn);
}
void Timer::arm_after(uint64_t) { arm_at(0); }
void Timer::arm_at(uint64_t when) {
  expires_.store(when);
  std::lock_guard lk(fake::g_timer_mu);
  if (std::find(fake::g_armed.begin(), fake::g_armed.end(), this) == fake::g_armed.end()) {
    fake::g_armed.push_back(this);
  }
}
bool Timer::cancel() {
  std::lock_guard lk(fake::g_timer_mu);
  auto it = std::find(fake::g_armed.begin(), fake::g_armed.end(), this);
  if (it == fake::g_armed.end()) return false;
  fake::g_armed.erase(it);
  return true;
}
void Timer::cancel_sync() { cancel(); }
Timer::~Timer() {
  cancel();
  std::lock_guard lk(fake::g_timer_mu);
  fake::g_timer_fns.erase(this);
}
}  // namespace base

}  // namespace blkmq
