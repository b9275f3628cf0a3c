// A configurable in-memory driver for core tests: records what reaches it,
// completes inline, from a "hardirq" thread, or not at all, and can return
// busy statuses on demand.
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "core/core.h"
#include "support/wait.h"

namespace blkmq::test {

enum class CompleteMode { inline_end, inline_complete, irq_thread, never };

struct SeenRq {
  ReqOp op;
  uint64_t sector;
  uint32_t bytes;
  uint32_t flags;
  unsigned hctx;
  unsigned nr_bios;
};

class StubDriver {
 public:
  struct Options {
    unsigned nr_queues = 1;
    unsigned nr_poll = 0;
    unsigned depth = 64;
    uint32_t flags = 0;
    uint64_t capacity = 64ull << 20;  // bytes
    bool write_cache = false;
    bool fua = false;
    bool rotational = false;
    uint32_t max_sectors = 2560;
    uint16_t max_segments = 128;
    uint32_t dma_alignment = 0;
    uint32_t max_discard_sectors = 0;       // 0: no discard
    uint32_t max_write_zeroes_sectors = 0;  // 0: no zeroing
    bool backing = true;  // keep the data (false: a device of any size that stores nothing)
    // > 0: queue_rq sleeps this long (a driver of a kTagSetBlocking set may)
    // and records the thread it ran on, see queue_rq_threads().
    unsigned queue_rq_sleep_us = 0;
    // The tag set's runtime (TagSetConfig::runtime): a ManualRuntime makes
    // queue runs, completions, timers and the clock the test's to step.
    Runtime* runtime = nullptr;
    CompleteMode mode = CompleteMode::inline_end;
    std::string scheduler = "none";  // core tests run without a scheduler unless they ask
    bool budgets = false;
    unsigned budget_limit = 0;
  };

  explicit StubDriver(Options o)
      : opt_(std::move(o)),
        mem_(static_cast<uint8_t*>(opt_.backing ? std::calloc(opt_.capacity, 1) : nullptr), &std::free) {
    ops_.queue_rq = &StubDriver::queue_rq;
    ops_.complete = &StubDriver::complete;
    ops_.timeout = &StubDriver::timeout;
    ops_.poll = &StubDriver::poll;
    if (opt_.budgets) {
      ops_.get_budget = &StubDriver::get_budget;
      ops_.put_budget = &StubDriver::put_budget;
    }
    TagSetConfig c;
    c.ops = &ops_;
    c.driver_data = this;
    c.nr_queues[0] = opt_.nr_queues;
    c.nr_queues[2] = opt_.nr_poll;
    c.queue_depth = opt_.depth;
    c.flags = opt_.flags;
    c.runtime = opt_.runtime;
    auto s = TagSet::create(c);
    if (!s) throw std::runtime_error(s.status().message());
    set_ = std::move(s.value());
    q_ = make_queue();
    if (opt_.mode == CompleteMode::irq_thread) irq_ = std::thread([this] { irq_loop(); });
  }

  std::unique_ptr<Queue> make_queue() {
    QueueConfig qc;
    qc.limits.capacity_sectors = opt_.capacity >> 9;
    qc.limits.write_cache = opt_.write_cache;
    qc.limits.fua = opt_.fua;
    qc.limits.rotational = opt_.rotational;
    qc.limits.max_hw_sectors = opt_.max_sectors;
    qc.limits.max_sectors = opt_.max_sectors;
    qc.limits.max_segments = opt_.max_segments;
    qc.limits.dma_alignment = opt_.dma_alignment;
    qc.limits.max_discard_sectors = opt_.max_discard_sectors;
    qc.limits.max_write_zeroes_sectors = opt_.max_write_zeroes_sectors;
    qc.queuedata = this;
    qc.scheduler = opt_.scheduler;
    auto q = Queue::create(*set_, qc);
    if (!q) throw std::runtime_error(q.status().message());
    return std::move(q.value());
  }

  ~StubDriver() {
    q_.reset();
    stop_irq();
  }

  void stop_irq() {
    if (!irq_.joinable()) return;
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    irq_.join();
  }

  Queue& q() { return *q_; }
  std::unique_ptr<Queue>& qptr() { return q_; }
  TagSet& set() { return *set_; }

  std::vector<SeenRq> seen() {
    std::lock_guard<std::mutex> g(mu_);
    return seen_;
  }
  size_t nr_seen() {
    std::lock_guard<std::mutex> g(mu_);
    return seen_.size();
  }
  void clear_seen() {
    std::lock_guard<std::mutex> g(mu_);
    seen_.clear();
  }
  // Requests held by mode never, in arrival order.
  std::vector<Request*> take_held() {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<Request*> v(held_.begin(), held_.end());
    held_.clear();
    return v;
  }

  std::atomic<int> busy_next{0};         // return resource for the next N requests
  std::atomic<int> dev_busy_next{0};
  std::atomic<int> requeue_next{0};      // requeue_request(rq, true) the next N
  std::atomic<int> inflight{0};
  std::atomic<int> max_inflight{0};
  std::atomic<int> timeouts{0};
  std::atomic<bool> timeout_completes{true};
  std::atomic<int> budget_used{0};
  std::atomic<int> queue_rq_in_interrupt{0};  // calls made in hardirq or softirq context
  // Names of the threads queue_rq ran on (with queue_rq_sleep_us only).
  std::set<std::string> queue_rq_threads() {
    std::lock_guard<std::mutex> g(mu_);
    return queue_rq_threads_;
  }
  std::function<void(Request*)> on_complete;  // called in ops.complete
  uint8_t* mem() { return mem_.get(); }

 private:
  static StubDriver* of(Queue* q) { return static_cast<StubDriver*>(queue_data(q)); }

  static BlkStatus queue_rq(HwCtx* hctx, const QueueData& bd) {
    Request* rq = bd.rq;
    StubDriver* d = of(rq->q);
    if (in_interrupt()) d->queue_rq_in_interrupt.fetch_add(1);
    if (d->opt_.queue_rq_sleep_us) d->sleep_in_queue_rq();
    if (d->busy_next.load() > 0 && d->busy_next.fetch_sub(1) > 0) return BlkStatus::resource;
    // dev_resource promises that a completion will rerun the queue: only
    // with something in flight (the driver contract, as in the kernel).
    if (d->inflight.load() > 0 && d->dev_busy_next.load() > 0 && d->dev_busy_next.fetch_sub(1) > 0)
      return BlkStatus::dev_resource;
    start_request(rq);
    if (d->requeue_next.load() > 0 && d->requeue_next.fetch_sub(1) > 0) {
      requeue_request(rq, true);
      return BlkStatus::ok;
    }
    unsigned nbios = 0;
    for (Bio* b = rq->bio; b; b = b->bi_next) nbios++;
    {
      std::lock_guard<std::mutex> g(d->mu_);
      d->seen_.push_back({rq->op, rq->sector, rq->data_len, rq->cmd_flags, hctx->queue_num, nbios});
    }
    int now = d->inflight.fetch_add(1) + 1;
    int m = d->max_inflight.load();
    while (now > m && !d->max_inflight.compare_exchange_weak(m, now)) {
    }
    d->transfer(rq);
    if (hctx->type == HctxType::poll) {
      std::lock_guard<std::mutex> g(d->mu_);
      d->poll_list_.push_back(rq);
      return BlkStatus::ok;
    }
    switch (d->opt_.mode) {
      case CompleteMode::inline_end:
        d->inflight.fetch_sub(1);
        end_request(rq, BlkStatus::ok);
        break;
      case CompleteMode::inline_complete:
        complete_request(rq, BlkStatus::ok);
        break;
      case CompleteMode::irq_thread: {
        std::lock_guard<std::mutex> g(d->mu_);
        d->irq_q_.push_back(rq);
        d->cv_.notify_one();
        break;
      }
      case CompleteMode::never: {
        std::lock_guard<std::mutex> g(d->mu_);
        d->held_.push_back(rq);
        break;
      }
    }
    return BlkStatus::ok;
  }

  void sleep_in_queue_rq() {
    char name[32] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    {
      std::lock_guard<std::mutex> g(mu_);
      queue_rq_threads_.insert(name);
    }
    // Real time is the point: a blocking driver really sleeps here, and the
    // core must have called it where sleeping is allowed.
    std::this_thread::sleep_for(std::chrono::microseconds(opt_.queue_rq_sleep_us));
  }

  void transfer(Request* rq) {
    if (!op_has_data(rq->op) || !mem_) return;
    uint64_t pos = rq->sector << 9;
    rq_for_each_segment(rq, [&](void* base, size_t len, uint64_t off) {
      if (pos + off + len > opt_.capacity) return;
      if (rq->op == ReqOp::write) std::memcpy(mem_.get() + pos + off, base, len);
      else std::memcpy(base, mem_.get() + pos + off, len);
    });
  }

  static void complete(Request* rq) {
    StubDriver* d = of(rq->q);
    if (d->on_complete) d->on_complete(rq);
    if (d->opt_.mode != CompleteMode::inline_end) d->inflight.fetch_sub(1);
    Queue* q = rq->q;
    const bool budget = d->opt_.budgets;
    // Like SCSI: the budget goes back when the command completes, and the
    // queue is rerun because only tag frees restart it — before the request
    // ends, since the request is what keeps the queue alive.
    if (budget) {
      put_budget(q, rq->budget_token);
      run_hw_queues(q, true);
    }
    end_request(rq, rq->status);
  }

  static TimeoutResult timeout(Request* rq) {
    StubDriver* d = of(rq->q);
    d->timeouts.fetch_add(1);
    if (!d->timeout_completes.load()) return TimeoutResult::reset_timer;
    {
      std::lock_guard<std::mutex> g(d->mu_);
      for (auto it = d->held_.begin(); it != d->held_.end(); ++it)
        if (*it == rq) {
          d->held_.erase(it);
          break;
        }
    }
    complete_request(rq, BlkStatus::timeout);
    return TimeoutResult::done;
  }

  static int poll(HwCtx* hctx, IoCompBatch* iob) {
    StubDriver* d = of(hctx->queue);
    std::vector<Request*> mine;
    {
      std::lock_guard<std::mutex> g(d->mu_);
      for (auto it = d->poll_list_.begin(); it != d->poll_list_.end();) {
        if ((*it)->mq_hctx == hctx) {
          mine.push_back(*it);
          it = d->poll_list_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (Request* rq : mine) {
      d->inflight.fetch_sub(1);
      if (!add_to_batch(rq, iob, BlkStatus::ok)) end_request(rq, BlkStatus::ok);
    }
    return static_cast<int>(mine.size());
  }

  static int get_budget(Queue* q) {
    StubDriver* d = of(q);
    int v = d->budget_used.fetch_add(1);
    if (static_cast<unsigned>(v) >= d->opt_.budget_limit) {
      d->budget_used.fetch_sub(1);
      return -1;
    }
    return 0;
  }
  static void put_budget(Queue* q, int) { of(q)->budget_used.fetch_sub(1); }

  void irq_loop() {
    pthread_setname_np(pthread_self(), "stub-irq");
    for (;;) {
      std::vector<Request*> batch;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !irq_q_.empty(); });
        if (irq_q_.empty() && stop_) return;
        batch.assign(irq_q_.begin(), irq_q_.end());
        irq_q_.clear();
      }
      HardirqScope irq;
      // As a driver that restarts its queues from its interrupt handler:
      // from this (hardirq) context the core must defer the run. Before
      // the completions, while the batch's requests keep the queue alive.
      if (opt_.queue_rq_sleep_us && !batch.empty()) run_hw_queues(batch.front()->q, false);
      for (Request* rq : batch) complete_request(rq, BlkStatus::ok);
    }
  }

  Options opt_;
  DriverOps ops_;
  std::unique_ptr<TagSet> set_;
  std::unique_ptr<Queue> q_;
  std::unique_ptr<uint8_t, void (*)(void*)> mem_;  // calloc: pages appear on first touch
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SeenRq> seen_;
  std::deque<Request*> irq_q_;
  std::deque<Request*> held_;
  std::deque<Request*> poll_list_;
  std::set<std::string> queue_rq_threads_;
  std::thread irq_;
  bool stop_ = false;
};

// Bios end before their request is freed: wait until no request of q is
// allocated (watchdog: false after timeout_ms). Nothing signals the last
// free, so on real threads this looks until then. On a manual runtime
// nothing frees a request unless the test's thread runs it: one look.
inline bool wait_requests_freed(Queue& q, int timeout_ms = 5000) {
  auto* qi = static_cast<QueueImpl*>(&q);
  if (q.runtime().is_manual()) return qi->usage_sum() == 0;
  return eventually([&] { return qi->usage_sum() == 0; }, timeout_ms);
}

// Counts bio completions; detects double completion.
struct BioTracker {
  std::atomic<int> ended{0};
  std::atomic<int> errors{0};
  std::atomic<int> doubles{0};
  std::mutex mu;
  std::condition_variable cv;

  struct Slot {
    Bio bio;
    iovec v;
    std::vector<uint8_t> buf;
    std::atomic<int> ends{0};
    BioTracker* t = nullptr;
    BlkStatus status = BlkStatus::ok;
    std::string ended_in_thread;
  };

  static void end_io(Bio* b) {
    auto* s = static_cast<Slot*>(b->private_data);
    if (s->ends.fetch_add(1) != 0) s->t->doubles.fetch_add(1);
    s->status = b->status;
    char name[32] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    s->ended_in_thread = name;
    BioTracker* t = s->t;  // the slot may be freed once `ended` moves
    if (b->status != BlkStatus::ok) t->errors.fetch_add(1);
    // Notify under the lock: once it is released the tracker may be gone.
    std::lock_guard<std::mutex> g(t->mu);
    t->ended.fetch_add(1);
    t->cv.notify_all();
  }

  std::unique_ptr<Slot> make(ReqOp op, uint64_t offset, uint32_t len, uint32_t flags = 0, uint8_t fill = 0) {
    auto s = std::make_unique<Slot>();
    s->t = this;
    s->buf.assign(len, fill);
    s->v = iovec{s->buf.data(), len};
    s->bio.op = op;
    s->bio.flags = flags;
    s->bio.sector = offset >> 9;
    s->bio.size = op_has_data(op) ? len : 0;
    s->bio.vec = op_has_data(op) ? &s->v : nullptr;
    s->bio.nr_vecs = op_has_data(op) ? 1 : 0;
    s->bio.end_io = &BioTracker::end_io;
    s->bio.private_data = s.get();
    return s;
  }

  // Waits (with a watchdog) until n bios ended.
  bool wait_for(int n, int timeout_ms = 10000) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, std::chrono::milliseconds(timeout_ms), [&] { return ended.load() >= n; });
  }
};

}  // namespace blkmq::test
