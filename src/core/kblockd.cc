#include "core/kblockd.h"

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/event.h"
#include "base/llist.h"
#include "base/percpu.h"
#include "base/thread.h"

namespace blkmq {
namespace {

thread_local bool tls_on_kblockd = false;

struct alignas(64) Worker {
  base::LList<Work, &Work::next> list;
  base::Event ev;
  std::once_flag started;
  std::thread thread;
};

class Kblockd {
 public:
  Kblockd() : n_(base::possible_cpus()), workers_(new Worker[n_]) {}

  Worker& worker(unsigned cpu) {
    Worker& w = workers_[cpu];
    std::call_once(w.started, [&] {
      base::ThreadOptions o;
      o.name = "kblockd/" + std::to_string(cpu);
      o.pin_cpu = static_cast<int>(cpu);
      o.high_priority = true;
      // Workers live for the whole process, like the kernel's pool.
      w.thread = base::start_thread(o, [&w] { run(w); });
      w.thread.detach();
    });
    return w;
  }
  unsigned nr() const { return n_; }

 private:
  static void run(Worker& w) {
    tls_on_kblockd = true;
    for (;;) {
      Work* item = w.list.take_all_ordered();
      if (!item) {
        w.ev.wait();
        continue;
      }
      while (item) {
        Work* next = item->next;
        // Counted, not flagged: once pending is clear the item may be queued
        // and run on another CPU's worker while this run goes on.
        item->running.fetch_add(1, std::memory_order_relaxed);
        // Clearing pending before running lets the item be queued again
        // while it runs, so no request for a run is lost.
        item->pending.store(0, std::memory_order_seq_cst);
        item->fn(item);
        item->running.fetch_sub(1, std::memory_order_release);
        item = next;
      }
    }
  }

  unsigned n_;
  std::unique_ptr<Worker[]> workers_;
};

Kblockd& kblockd() {
  static Kblockd* k = new Kblockd();  // never destroyed: workers are detached
  return *k;
}

}  // namespace

bool on_kblockd() { return tls_on_kblockd; }

bool kblockd_queue_work(Work* w, int cpu) {
  if (w->pending.load(std::memory_order_relaxed) || w->pending.exchange(1, std::memory_order_acq_rel))
    return false;
  Kblockd& k = kblockd();
  unsigned c = cpu < 0 ? base::this_cpu() : static_cast<unsigned>(cpu) % k.nr();
  Worker& wk = k.worker(c);
  wk.list.push(w);
  wk.ev.notify();
  return true;
}

void kblockd_flush_work(Work* w) {
  while (w->pending.load(std::memory_order_acquire) || w->running.load(std::memory_order_acquire))
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void DelayedWork::init(void (*fn)(Work*), void* data) {
  work.fn = fn;
  work.data = data;
  timer.init(&base::TimerThread::global(), [this] {
    kblockd_queue_work(&work, cpu.load(std::memory_order_relaxed));
  });
}

void DelayedWork::schedule(int c, uint64_t delay_ns) {
  if (work.pending.load(std::memory_order_acquire)) return;
  cpu.store(c, std::memory_order_relaxed);
  if (delay_ns == 0) {
    kblockd_queue_work(&work, c);
    return;
  }
  if (!timer.armed()) timer.arm_after(delay_ns);
}

void DelayedWork::mod(int c, uint64_t delay_ns) {
  cpu.store(c, std::memory_order_relaxed);
  if (delay_ns == 0) {
    if (timer.armed()) timer.cancel();
    kblockd_queue_work(&work, c);
    return;
  }
  timer.arm_after(delay_ns);
}

void DelayedWork::cancel_sync() {
  timer.cancel_sync();
  kblockd_flush_work(&work);
}

}  // namespace blkmq
