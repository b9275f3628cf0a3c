// BLOCK_SOFTIRQ and completion IPIs in user space.
//
// Each CPU has a completion list and a softirq thread "ksoftirqd/N" (pinned).
// Raising the softirq from hardirq context (a driver completion thread inside
// a HardirqScope) only marks it pending: the same thread runs it when it
// leaves the outermost scope, as the kernel runs softirqs at irq exit. Raised
// from task context it wakes ksoftirqd, which is the cost seed 002 removes.
// A completion "IPI" pushes onto the submitting CPU's list and wakes that
// CPU's softirq thread.
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "base/event.h"
#include "base/llist.h"
#include "base/percpu.h"
#include "base/thread.h"
#include "blkmq/driver/context.h"
#include "core/core.h"

namespace blkmq {
namespace {

thread_local ExecContext tls_ctx = ExecContext::task;
thread_local int tls_hardirq_depth = 0;
thread_local int tls_softirq_pending_cpu = -1;

struct alignas(64) CpuDone {
  base::LList<Request, &Request::rq_next> list;
  base::Event ev;
  std::once_flag started;
};

class Softirqs {
 public:
  Softirqs() : n_(base::possible_cpus()), cpus_(new CpuDone[n_]), llc_(n_, -1) { read_topology(); }

  CpuDone& cpu(unsigned c) { return cpus_[c]; }
  void ensure_thread(unsigned c) {
    CpuDone& d = cpus_[c];
    std::call_once(d.started, [&d, c] {
      base::ThreadOptions o;
      o.name = "ksoftirqd/" + std::to_string(c);
      o.pin_cpu = static_cast<int>(c);
      std::thread t = base::start_thread(o, [&d, c] { thread_fn(d, c); });
      t.detach();
    });
  }
  bool share_cache(unsigned a, unsigned b) const {
    if (a >= n_ || b >= n_) return false;
    return llc_[a] == llc_[b];
  }
  unsigned n() const { return n_; }

 private:
  static void thread_fn(CpuDone& d, unsigned c) {
    tls_ctx = ExecContext::softirq;
    for (;;) {
      Request* rq = d.list.take_all_ordered();
      if (!rq) {
        d.ev.wait();
        continue;
      }
      while (rq) {
        Request* next = rq->rq_next;
        rq->rq_next = nullptr;
        complete_rq_now(rq);
        rq = next;
      }
    }
  }

  // The last-level cache domain of each CPU, from sysfs; CPUs whose cache
  // cannot be read are each their own domain... unless nothing can be read,
  // then all share one (a VM without topology).
  void read_topology() {
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

  unsigned n_;
  std::unique_ptr<CpuDone[]> cpus_;
  std::vector<int> llc_;
};

Softirqs& softirqs() {
  static Softirqs* s = new Softirqs();  // threads are detached; never destroyed
  return *s;
}

void run_softirq(unsigned cpu) {
  ExecContext prev = tls_ctx;
  tls_ctx = ExecContext::softirq;
  CpuDone& d = softirqs().cpu(cpu);
  while (Request* rq = d.list.take_all_ordered()) {
    while (rq) {
      Request* next = rq->rq_next;
      rq->rq_next = nullptr;
      complete_rq_now(rq);
      rq = next;
    }
  }
  tls_ctx = prev;
}

}  // namespace

ExecContext current_context() { return tls_ctx; }
void set_exec_context(ExecContext c) { tls_ctx = c; }
unsigned current_cpu() { return base::this_cpu(); }
unsigned nr_cpu_ids() { return base::possible_cpus(); }

HardirqScope::HardirqScope() : prev_(tls_ctx) {
  tls_ctx = ExecContext::hardirq;
  tls_hardirq_depth++;
}

HardirqScope::~HardirqScope() {
  tls_ctx = prev_;
  if (--tls_hardirq_depth == 0 && tls_softirq_pending_cpu >= 0) {
    unsigned cpu = static_cast<unsigned>(tls_softirq_pending_cpu);
    tls_softirq_pending_cpu = -1;
    run_softirq(cpu);  // "irq exit"
  }
}

bool cpus_share_cache(unsigned a, unsigned b) { return softirqs().share_cache(a, b); }
bool cpu_online(unsigned cpu) { return cpu < softirqs().n(); }

void raise_block_softirq(Request* rq) {
  Softirqs& s = softirqs();
  unsigned cpu = base::this_cpu();
  bool was_empty = s.cpu(cpu).list.push(rq);
  if (tls_ctx == ExecContext::hardirq) {
    if (tls_softirq_pending_cpu < 0) tls_softirq_pending_cpu = static_cast<int>(cpu);
    else if (static_cast<unsigned>(tls_softirq_pending_cpu) != cpu && was_empty) {
      // Migrated inside the scope: the other CPU's list gets its own thread.
      s.ensure_thread(cpu);
      s.cpu(cpu).ev.notify();
    }
    return;
  }
  if (was_empty) {
    s.ensure_thread(cpu);
    s.cpu(cpu).ev.notify();
  }
}

void send_completion_ipi(Request* rq, unsigned cpu) {
  Softirqs& s = softirqs();
  if (s.cpu(cpu).list.push(rq)) {
    s.ensure_thread(cpu);
    s.cpu(cpu).ev.notify();
  }
}

}  // namespace blkmq
