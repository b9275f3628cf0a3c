// BLOCK_SOFTIRQ and completion IPIs in user space: the policy. The lists
// and their workers are the runtime's (core/runtime.h): per-CPU
// "ksoftirqd/N" threads on the process default, run_pending() on a
// ManualRuntime.
//
// Raising the softirq from hardirq context (a driver completion thread
// inside a HardirqScope) only marks it pending: the same thread runs it
// when it leaves the outermost scope, as the kernel runs softirqs at irq
// exit. Raised from task context it wakes ksoftirqd, which is the cost seed
// 002 removes. A completion "IPI" pushes onto the submitting CPU's list and
// wakes that CPU's softirq worker.
#include <fstream>
#include <string>
#include <vector>

#include "base/percpu.h"
#include "blkmq/driver/context.h"
#include "core/core.h"
#include "core/runtime.h"

namespace blkmq {
namespace {

thread_local ExecContext tls_ctx = ExecContext::task;
thread_local int tls_hardirq_depth = 0;
// The softirq raised inside the current hardirq scope, run at its exit.
thread_local int tls_softirq_pending_cpu = -1;
thread_local Runtime::Ops* tls_softirq_pending_ops = nullptr;

// The last-level cache domain of each CPU, from sysfs; CPUs whose cache
// cannot be read are each their own domain... unless nothing can be read,
// then all share one (a VM without topology).
class Topology {
 public:
  Topology() : n_(base::possible_cpus()), llc_(n_, -1) {
    bool any = false;
    for (unsigned c = 0; c < n_; c++) {
      for (int idx = 4; idx >= 0 && llc_[c] < 0; idx--) {
        std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/cache/index" +
                        std::to_string(idx) + "/shared_cpu_list");
        std::string s;
        if (f && std::getline(f, s) && !s.empty()) {
          llc_[c] = std::stoi(s);  // first CPU of the sharing list identifies the domain
          any = true;
        }
      }
    }
    for (unsigned c = 0; c < n_; c++)
      if (llc_[c] < 0) llc_[c] = any ? static_cast<int>(1000000 + c) : 0;
  }
  bool share_cache(unsigned a, unsigned b) const { return a < n_ && b < n_ && llc_[a] == llc_[b]; }
  unsigned n() const { return n_; }

 private:
  unsigned n_;
  std::vector<int> llc_;
};

const Topology& topology() {
  static const Topology t;
  return t;
}

Runtime::Ops& ops_of(const Request* rq) { return to_impl(rq->q)->rt_->ops(); }

}  // namespace

void run_completion_chain(Request* rq) {
  const ExecContext prev = tls_ctx;
  tls_ctx = ExecContext::softirq;
  while (rq) {
    Request* next = rq->rq_next;
    rq->rq_next = nullptr;
    complete_rq_now(rq);
    rq = next;
  }
  tls_ctx = prev;
}

ExecContext current_context() { return tls_ctx; }
unsigned current_cpu() { return base::this_cpu(); }
unsigned nr_cpu_ids() { return base::possible_cpus(); }

HardirqScope::HardirqScope() : prev_(tls_ctx) {
  tls_ctx = ExecContext::hardirq;
  tls_hardirq_depth++;
}

HardirqScope::~HardirqScope() {
  tls_ctx = prev_;
  if (--tls_hardirq_depth == 0 && tls_softirq_pending_cpu >= 0) {
    const unsigned cpu = static_cast<unsigned>(tls_softirq_pending_cpu);
    Runtime::Ops* ops = tls_softirq_pending_ops;
    tls_softirq_pending_cpu = -1;
    tls_softirq_pending_ops = nullptr;
    // "irq exit": the list may hold what others raised there since.
    while (Request* chain = ops->softirq_take(cpu)) run_completion_chain(chain);
  }
}

bool cpus_share_cache(unsigned a, unsigned b) { return topology().share_cache(a, b); }
bool cpu_online(unsigned cpu) { return cpu < topology().n(); }

void raise_block_softirq(Request* rq) {
  Runtime::Ops& ops = ops_of(rq);
  const unsigned cpu = base::this_cpu();
  const bool was_empty = ops.softirq_push(cpu, rq);
  if (tls_ctx == ExecContext::hardirq) {
    if (tls_softirq_pending_cpu < 0) {
      tls_softirq_pending_cpu = static_cast<int>(cpu);
      tls_softirq_pending_ops = &ops;
      return;
    }
    // Migrated inside the scope (or another runtime's list): that list is
    // not the one irq exit runs, so it gets its own worker.
    const bool same = static_cast<unsigned>(tls_softirq_pending_cpu) == cpu && tls_softirq_pending_ops == &ops;
    if (!same && was_empty) ops.softirq_wake(cpu);
    return;
  }
  if (was_empty) ops.softirq_wake(cpu);
}

void send_completion_ipi(Request* rq, unsigned cpu) {
  Runtime::Ops& ops = ops_of(rq);
  if (ops.softirq_push(cpu, rq)) ops.softirq_wake(cpu);
}

}  // namespace blkmq
