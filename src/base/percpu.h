// Per-CPU storage: one cache-line-aligned slot per possible CPU.
#pragma once

#include <sys/rseq.h>

#include <memory>

namespace blkmq::base {

unsigned possible_cpus();   // number of CPU ids (from sysconf, at least 1)
unsigned this_cpu_slow();   // sched_getcpu() clamped to possible_cpus()

// Read once at static initialisation so this_cpu() needs no guard.
inline const unsigned g_possible_cpus = possible_cpus();

// The calling thread's CPU. glibc registers rseq for every thread: the
// kernel keeps cpu_id_start current in the thread's rseq area, so this is
// one load (sched_getcpu() would be a call plus the same load). Falls back
// to sched_getcpu() where rseq is not registered.
inline unsigned this_cpu() {
  if (__builtin_expect(__rseq_size > 0, 1)) {
    auto* rs = reinterpret_cast<const volatile struct rseq*>(static_cast<char*>(__builtin_thread_pointer()) +
                                                             __rseq_offset);
    const unsigned c = rs->cpu_id_start;
    const unsigned n = g_possible_cpus;
    return __builtin_expect(c < n, 1) ? c : (n ? c % n : 0);
  }
  return this_cpu_slow();
}

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
