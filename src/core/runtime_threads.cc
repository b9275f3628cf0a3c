// The process default runtime: the kernel's contexts on real threads. One
// per-CPU worker pool design (base/worker_pool.h) serves both kblockd
// ("kblockd/N", high priority as the kernel's WQ_HIGHPRI) and the softirq
// workers ("ksoftirqd/N"); the timers are the process timer thread.
#include <chrono>
#include <thread>

#include "base/clock.h"
#include "base/worker_pool.h"
#include "core/core.h"
#include "core/kblockd.h"
#include "core/runtime.h"

namespace blkmq {
namespace {

void run_works(Work* first, unsigned, void*) { run_work_chain(first); }
void run_completions(Request* first, unsigned, void*) { run_completion_chain(first); }

class ThreadOps final : public Runtime::Ops {
 public:
  ThreadOps()
      : kblockd_({"kblockd", true, &run_works, nullptr, nullptr}),
        softirq_({"ksoftirqd", false, &run_completions, nullptr, nullptr}) {}

  void work_queue(Work* w, unsigned cpu) override {
    kblockd_.push(cpu, w);
    kblockd_.wake(cpu);
  }
  // The kernel sleeps on the work's completion; an item here carries no
  // waiter, so the flusher polls (teardown and updates only, not I/O).
  void work_flush(Work* w) override {
    while (w->pending.load(std::memory_order_acquire) || w->running.load(std::memory_order_acquire)) idle(50);
  }
  bool softirq_push(unsigned cpu, Request* rq) override { return softirq_.push(cpu, rq); }
  void softirq_wake(unsigned cpu) override { softirq_.wake(cpu); }
  Request* softirq_take(unsigned cpu) override { return softirq_.take(cpu); }
  base::TimerQueue& timers() override { return base::TimerThread::global(); }
  void idle(unsigned us) override { std::this_thread::sleep_for(std::chrono::microseconds(us)); }

 private:
  base::PerCpuWorkers<Work, &Work::next> kblockd_;
  base::PerCpuWorkers<Request, &Request::rq_next> softirq_;
};

class ThreadRuntime final : public Runtime {
 public:
  ThreadRuntime() : Runtime(std::make_unique<ThreadOps>(), nullptr) {}
};

}  // namespace

Runtime::Runtime(std::unique_ptr<Ops> ops, const std::atomic<uint64_t>* manual_clock)
    : ops_(std::move(ops)), manual_clock_(manual_clock) {}

Runtime::~Runtime() = default;

Runtime& Runtime::process_default() {
  // Never destroyed: its workers may serve queues owned by static objects
  // until the process exits, as the kernel's pools live as long as it.
  static Runtime* rt = new ThreadRuntime();
  return *rt;
}

uint64_t Runtime::now_ns() const {
  return manual_clock_ ? manual_clock_->load(std::memory_order_acquire) : base::now_ns();
}

base::TimerQueue& Runtime::timers() const { return ops_->timers(); }

}  // namespace blkmq
