#include "base/percpu.h"

#include <sched.h>
#include <unistd.h>

namespace blkmq::base {

unsigned possible_cpus() {
  // _SC_NPROCESSORS_CONF (configured, not online) so per-CPU arrays cover
  // every id sched_getcpu() can return even after a CPU comes online.
  static const unsigned n = [] {
    long c = sysconf(_SC_NPROCESSORS_CONF);
    return c < 1 ? 1u : static_cast<unsigned>(c);
  }();
  return n;
}

unsigned this_cpu_slow() {
  // glibc >= 2.35 answers from the rseq area: a load, no system call.
  int c = sched_getcpu();
  if (c < 0) return 0;
  unsigned n = possible_cpus();
  return static_cast<unsigned>(c) < n ? static_cast<unsigned>(c) : static_cast<unsigned>(c) % n;
}

}  // namespace blkmq::base
