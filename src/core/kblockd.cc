#include "core/kblockd.h"

#include "base/percpu.h"
#include "core/runtime.h"

namespace blkmq {

void run_work_chain(Work* item) {
  while (item) {
    Work* next = item->next;
    // Counted, not flagged: once pending is clear the item may be queued
    // and run on another CPU's worker while this run goes on.
    item->running.fetch_add(1, std::memory_order_relaxed);
    // Clearing pending before running lets the item be queued again while
    // it runs, so no request for a run is lost. seq_cst: pairs with the
    // exchange in kblockd_queue_work, and orders the clear before fn's
    // reads of the state a queuer published before finding it pending.
    item->pending.store(0, std::memory_order_seq_cst);
    item->fn(item);
    // Release: kblockd_flush_work's acquire load sees fn's writes.
    item->running.fetch_sub(1, std::memory_order_release);
    item = next;
  }
}

bool kblockd_queue_work(Work* w, int cpu) {
  if (w->pending.load(std::memory_order_relaxed) || w->pending.exchange(1, std::memory_order_acq_rel))
    return false;
  const unsigned n = base::possible_cpus();
  const unsigned c = cpu < 0 ? base::this_cpu() : static_cast<unsigned>(cpu) % n;
  w->rt->ops().work_queue(w, c);
  return true;
}

void kblockd_flush_work(Work* w) {
  if (w->rt) w->rt->ops().work_flush(w);
}

void DelayedWork::init(Runtime* rt, void (*fn)(Work*), void* data) {
  work.init(rt, fn, data);
  timer.init(&rt->timers(), [this] { kblockd_queue_work(&work, cpu.load(std::memory_order_relaxed)); });
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
