#include "nbd/write_gate.h"

#include <map>

namespace blkmq::nbd {
namespace {

std::mutex g_gates_mu;
std::map<const Queue*, WriteGate*>& gates() {
  static auto* m = new std::map<const Queue*, WriteGate*>;  // never destroyed: used by connections at exit
  return *m;
}

}  // namespace

WriteGate* WriteGate::acquire(const Queue* q) {
  std::lock_guard l(g_gates_mu);
  WriteGate*& g = gates()[q];
  if (g == nullptr) {
    g = new WriteGate;
    g->q_ = q;
  }
  g->refs_++;
  return g;
}

void WriteGate::release(WriteGate* g) {
  if (g == nullptr) return;
  std::lock_guard l(g_gates_mu);
  if (--g->refs_ != 0) return;
  gates().erase(g->q_);
  delete g;
}

// Dekker's pattern, both sides sequentially consistent: a writer counts
// itself, then looks at the flag; an RMW raises the flag, then looks at the
// count. One of them always sees the other.
bool WriteGate::try_enter() {
  writers_.fetch_add(1);
  if (!closed_.load()) return true;
  exit();
  return false;
}

void WriteGate::exit() {
  if (writers_.fetch_sub(1) == 1 && closed_.load()) {
    std::lock_guard l(mu_);
    cv_.notify_all();
  }
}

void WriteGate::wait_open() {
  std::unique_lock l(mu_);
  cv_.wait(l, [&] { return !closed_.load(); });
}

void WriteGate::begin_rmw() {
  rmw_mu_.lock();
  closed_.store(true);
  std::unique_lock l(mu_);
  cv_.wait(l, [&] { return writers_.load() == 0; });
}

void WriteGate::end_rmw() {
  {
    std::lock_guard l(mu_);
    closed_.store(false);
  }
  cv_.notify_all();
  rmw_mu_.unlock();
}

}  // namespace blkmq::nbd
