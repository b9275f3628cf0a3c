// Threads that blkmq starts: named (kblockd/N, ksoftirqd/N, null-timer, ...),
// registered so their CPU time can be reported per group
// (blkmq::thread_usage()), optionally pinned and raised in priority.
#pragma once

#include <functional>
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

}  // namespace blkmq::base
