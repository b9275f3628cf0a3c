// ManualRuntime (blkmq/runtime.h): the kernel's contexts run when a test
// says so, on the test's thread, in the order things were queued.
#include <deque>
#include <mutex>
#include <thread>

#include "core/core.h"
#include "core/kblockd.h"
#include "core/runtime.h"

namespace blkmq {

// One FIFO for work items and completions alike, so run_pending() runs
// them in the order they were queued whatever their kind. Locked: a
// driver's own thread may queue to it while the test runs it.
class ManualRuntime::Impl final : public Runtime::Ops {
 public:
  explicit Impl(const std::atomic<uint64_t>* clock) : timers_("manual-timer", clock) {}

  void work_queue(Work* w, unsigned cpu) override { push(Entry{w, nullptr, cpu}); }
  // Runs what is queued until w has run: the order stays the queue's, and
  // a flush from inside w itself (running, not pending) returns at once.
  void work_flush(Work* w) override {
    while (w->pending.load(std::memory_order_acquire))
      if (!run_one()) break;
  }
  bool softirq_push(unsigned cpu, Request* rq) override {
    std::lock_guard<std::mutex> g(mu_);
    const bool was_empty = count_locked(cpu) == 0;
    q_.push_back(Entry{nullptr, rq, cpu});
    return was_empty;
  }
  void softirq_wake(unsigned) override {}  // run_pending() runs it
  Request* softirq_take(unsigned cpu) override {
    std::lock_guard<std::mutex> g(mu_);
    Request* head = nullptr;
    Request** tail = &head;
    for (auto it = q_.begin(); it != q_.end();) {
      if (it->rq && it->cpu == cpu) {
        *tail = it->rq;
        tail = &it->rq->rq_next;
        it = q_.erase(it);
      } else {
        ++it;
      }
    }
    *tail = nullptr;
    return head;
  }
  base::TimerQueue& timers() override { return timers_; }
  void idle(unsigned us) override {
    if (!run_one()) std::this_thread::sleep_for(std::chrono::microseconds(us));
  }

  // Runs the oldest entry; false if there was none.
  bool run_one() {
    Entry e;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (q_.empty()) return false;
      e = q_.front();
      q_.pop_front();
    }
    if (e.w) {
      e.w->next = nullptr;
      run_work_chain(e.w);
    } else {
      e.rq->rq_next = nullptr;
      run_completion_chain(e.rq);
    }
    return true;
  }
  size_t size() const {
    std::lock_guard<std::mutex> g(mu_);
    return q_.size();
  }
  size_t completions(unsigned cpu) const {
    std::lock_guard<std::mutex> g(mu_);
    return count_locked(cpu);
  }
  base::ManualTimerQueue& manual_timers() { return timers_; }

 private:
  struct Entry {
    Work* w = nullptr;
    Request* rq = nullptr;
    unsigned cpu = 0;
  };
  void push(Entry e) {
    std::lock_guard<std::mutex> g(mu_);
    q_.push_back(e);
  }
  size_t count_locked(unsigned cpu) const {
    size_t n = 0;
    for (const Entry& e : q_) n += e.rq && e.cpu == cpu;
    return n;
  }

  mutable std::mutex mu_;
  std::deque<Entry> q_;
  base::ManualTimerQueue timers_;
};

ManualRuntime::ManualRuntime(uint64_t start_ns)
    : Runtime(std::make_unique<Impl>(&now_), &now_), impl_(static_cast<Impl*>(&ops())), now_(start_ns) {}

ManualRuntime::~ManualRuntime() = default;

size_t ManualRuntime::run_pending() {
  size_t n = 0;
  while (impl_->run_one()) n++;
  return n;
}

size_t ManualRuntime::advance(uint64_t ns) {
  const uint64_t target = now_.load(std::memory_order_relaxed) + ns;
  size_t fired = 0;
  for (;;) {
    run_pending();
    const uint64_t next = impl_->manual_timers().next_expiry();
    if (next > target) break;
    // A timer armed in the past fires now, without moving the clock back.
    if (next > now_.load(std::memory_order_relaxed)) now_.store(next, std::memory_order_release);
    fired += impl_->manual_timers().fire_one_due();
  }
  now_.store(target, std::memory_order_release);
  run_pending();
  return fired;
}

size_t ManualRuntime::pending() const { return impl_->size(); }
size_t ManualRuntime::pending_completions(unsigned cpu) const { return impl_->completions(cpu); }
uint64_t ManualRuntime::next_timer_ns() const { return impl_->manual_timers().next_expiry(); }

}  // namespace blkmq
