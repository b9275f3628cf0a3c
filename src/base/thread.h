// Threads that blkmq starts: named (kblockd/N, ksoftirqd/N, null-timer, ...),
// registered so their CPU time can be reported per group
// (base::thread_usage(), which the bench reports), optionally pinned and raised in priority.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

namespace blkmq::base {

struct ThreadOptions {
  std::string name;        // <= 15 chars shown by top -H; group = prefix before '/'
  int pin_cpu = -1;        // >= 0: pin to that CPU
  bool high_priority = false;  // try nice -10 (ignored where not permitted)
};

// Starts a registered thread. The thread's CPU time is added to its group's
// total when it exits.
std::thread start_thread(const ThreadOptions& opts, std::function<void()> fn);

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

}  // namespace blkmq::base
