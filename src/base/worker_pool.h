// One worker thread per CPU, each draining a lock-free list of intrusive
// items: the shape the kernel's kblockd work queues and its ksoftirqd
// threads share, written once for both (src/core/runtime_threads.cc).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/event.h"
#include "base/llist.h"
#include "base/percpu.h"
#include "base/thread.h"

namespace blkmq::base {

// Items are pushed onto a CPU's list from any thread; that CPU's worker
// ("<prefix>/<cpu>", pinned, started on the first push that wakes it) takes
// the whole list in push order and hands it to `run`, which walks the chain
// through `Next` and must read an item's `Next` before the item may be
// reused. The destructor stops and joins the workers that were started;
// items still queued then are not run (a pool is destroyed only when
// nothing can queue to it).
template <typename T, T* T::*Next>
class PerCpuWorkers {
 public:
  struct Options {
    std::string prefix;          // thread names: prefix/N (<= 15 chars in all)
    bool high_priority = false;  // nice -10 where permitted (kblockd is WQ_HIGHPRI)
    // Runs the chain `first` (push order) on `cpu`'s worker. Called with no
    // lock held; the worker's thread-local state was set by `on_start`.
    void (*run)(T* first, unsigned cpu, void* arg) = nullptr;
    void (*on_start)(void* arg) = nullptr;  // once, on each worker thread
    void* arg = nullptr;
  };

  explicit PerCpuWorkers(Options o) : opt_(std::move(o)), n_(possible_cpus()), cpus_(new Cpu[n_]) {}
  ~PerCpuWorkers() {
    stop_.store(true, std::memory_order_release);
    for (unsigned c = 0; c < n_; c++) {
      cpus_[c].ev.notify();
      if (cpus_[c].thread.joinable()) cpus_[c].thread.join();
    }
  }
  PerCpuWorkers(const PerCpuWorkers&) = delete;
  PerCpuWorkers& operator=(const PerCpuWorkers&) = delete;

  unsigned nr() const { return n_; }

  // Queues `item` on `cpu` (taken modulo nr()). Returns true if the list
  // was empty, i.e. the worker may be asleep and needs wake(). Any
  // context; one compare-and-swap.
  bool push(unsigned cpu, T* item) { return cpus_[cpu % n_].list.push(item); }
  // Wakes `cpu`'s worker, starting it on first use. Any context; an atomic
  // exchange, a futex wake only when the worker sleeps.
  void wake(unsigned cpu) {
    Cpu& c = cpus_[cpu % n_];
    std::call_once(c.started, [this, &c, cpu] { start(c, cpu % n_); });
    c.ev.notify();
  }
  // Takes `cpu`'s list in push order for the caller to run itself (the
  // kernel running pending softirqs at irq exit). Any context.
  T* take(unsigned cpu) { return cpus_[cpu % n_].list.take_all_ordered(); }

 private:
  struct alignas(64) Cpu {
    LList<T, Next> list;
    Event ev;
    std::once_flag started;
    std::thread thread;
  };

  void start(Cpu& c, unsigned cpu) {
    ThreadOptions o;
    o.name = opt_.prefix + "/" + std::to_string(cpu);
    o.pin_cpu = static_cast<int>(cpu);
    o.high_priority = opt_.high_priority;
    c.thread = start_thread(o, [this, &c, cpu] { loop(c, cpu); });
  }

  void loop(Cpu& c, unsigned cpu) {
    if (opt_.on_start) opt_.on_start(opt_.arg);
    while (!stop_.load(std::memory_order_acquire)) {
      T* first = c.list.take_all_ordered();
      if (!first) {
        c.ev.wait();
        continue;
      }
      opt_.run(first, cpu, opt_.arg);
    }
  }

  const Options opt_;
  const unsigned n_;
  std::unique_ptr<Cpu[]> cpus_;
  std::atomic<bool> stop_{false};
};

}  // namespace blkmq::base
