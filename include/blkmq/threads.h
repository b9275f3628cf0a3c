// The threads blkmq starts (kblockd/N, ksoftirqd/N, null-timer, ...) and
// their CPU time, for reports.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace blkmq {

struct ThreadGroupUsage {
  uint64_t cpu_ns = 0;       // user+system CPU time of all threads of the group, living and exited
  unsigned nr_threads = 0;   // threads ever started in the group
  uint64_t nvcsw = 0;        // voluntary context switches (living threads)
  uint64_t nivcsw = 0;       // involuntary context switches (living threads)
};

// CPU time per thread group; the group is the thread name up to the first
// '/' ("kblockd/3" -> "kblockd"). Any task context; reads /proc for the
// context-switch counts, so not for hot paths.
std::map<std::string, ThreadGroupUsage> thread_usage();

}  // namespace blkmq
