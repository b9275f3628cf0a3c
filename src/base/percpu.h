// Per-CPU storage: one cache-line-aligned slot per possible CPU.
#pragma once

#include <memory>

namespace blkmq::base {

unsigned possible_cpus();   // number of CPU ids (from sysconf, at least 1)
unsigned this_cpu();        // sched_getcpu() clamped to possible_cpus()

template <typename T>
class PerCpu {
 public:
  PerCpu() : n_(possible_cpus()), slots_(new Slot[n_]) {}
  T& operator[](unsigned cpu) { return slots_[cpu].v; }
  const T& operator[](unsigned cpu) const { return slots_[cpu].v; }
  T& local() { return slots_[this_cpu()].v; }
  unsigned size() const { return n_; }

 private:
  struct alignas(64) Slot {
    T v{};
  };
  unsigned n_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace blkmq::base
