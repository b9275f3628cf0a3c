// Waiting in a test for what another thread or process does, without
// guessing how long it takes: a bounded look at a condition nothing
// signals, a thread seen asleep in the kernel, a file appearing, a child
// exiting. Each wait is bounded (a watchdog: a false result fails the
// test), and none of them assumes how long the other side needs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <thread>

namespace blkmq::test {

// Bounded wait for another real thread to reach a state: true once p()
// holds, false after timeout_ms (a watchdog, not a timing assumption).
// For states nothing signals. It yields between its first looks, then
// naps 50 us between the rest: on CI's two cores (and under TSan) a
// waiter that only yields takes a whole core from the thread it waits
// for. The nap is a polling interval; no test's outcome depends on it.
template <typename Pred>
bool eventually(Pred p, int timeout_ms = 10000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (unsigned looks = 0; !p(); looks++) {
    if (std::chrono::steady_clock::now() > end) return false;
    if (looks < 64) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));  // polling interval, see above
  }
  return true;
}

// The calling thread's kernel thread id, for asleep_in().
pid_t this_tid();

// Whether thread `tid` of this process is asleep (state S) inside system
// call `nr`: SYS_futex for a mutex, a condition variable or a blkmq wait,
// SYS_io_uring_enter for a ring. What a test waits for before it checks
// that a sleeper stays asleep, or before it wakes one that must be asleep.
// Reads /proc/self/task/TID/stat and .../syscall (the state alone where
// the second cannot be read). Any thread; a few small file reads.
bool asleep_in(pid_t tid, long nr);

// Whether thread `tid` is asleep in a wait of the core's: a futex, or one
// of the short timed naps a quiesce or freeze takes while it waits for
// others. With a state of the queue only that wait shows (quiesced,
// frozen), what a test checks before it lets the waited-for side go on.
bool asleep_in_core_wait(pid_t tid);

// Waits up to `limit` for `path` to exist. The deepest directory on its
// way that exists is watched with inotify (again as each one below it
// appears), so the wait ends when the entry is made, not at a poll's next
// turn. False on timeout.
bool wait_for_path(const std::string& path, std::chrono::milliseconds limit = std::chrono::seconds(10));

// Waits up to `limit` for child `pid` to exit and reaps it, its waitpid
// status in *status; false (not reaped) if it still runs then. Sleeps on
// a pidfd until the exit.
bool wait_child(pid_t pid, std::chrono::milliseconds limit, int* status);

}  // namespace blkmq::test
