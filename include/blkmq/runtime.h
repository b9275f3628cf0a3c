// The runtime: the execution contexts the kernel gives its block layer,
// owned by one object. kblockd's work queues (immediate and delayed queue
// runs, requeues, the timeout scan), the BLOCK_SOFTIRQ/IPI completion
// workers, the timers (hrtimer), and the clock every queue keeps time by.
//
// Runtime::process_default() runs them on real threads (kblockd/N and
// ksoftirqd/N per CPU, started on first use, and one timer thread), on
// CLOCK_MONOTONIC: what every tag set gets unless its config names another
// runtime (TagSetConfig::runtime), and what the seeds' measurements need.
//
// ManualRuntime runs nothing by itself: queued work and raised completions
// wait until run_pending(), and time stands still until advance(), which
// fires the timers that fall due, in order, on the caller's thread. A test
// of the core's logic (restart, requeue delays, timeouts, schedulers'
// timers) then needs neither sleeps nor luck, as with SPDK's poll_threads
// and Seastar's manual clock. Threads a driver starts itself (null's timer,
// uring's reaper, a ublk server) stay real.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace blkmq {

namespace base {
class TimerQueue;
}

class Runtime {
 public:
  // The process's runtime: real threads, CLOCK_MONOTONIC. Created on first
  // use, never destroyed (its threads may serve static objects until exit).
  // Any thread.
  static Runtime& process_default();
  virtual ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The runtime's clock in ns: CLOCK_MONOTONIC (a vDSO read), or a manual
  // runtime's time (one load). Any thread, any context.
  uint64_t now_ns() const;
  // Whether this is a ManualRuntime. Any thread.
  bool is_manual() const { return manual_clock_ != nullptr; }
  // The manual clock a queue reads directly (nullptr for real time), so a
  // queue's clock costs no virtual call. Library-internal.
  const std::atomic<uint64_t>* manual_clock() const { return manual_clock_; }

  // The timers' context: for the library's own schedulers (base/timer.h:
  // bfq's idle timer, kyber's window). Any thread.
  base::TimerQueue& timers() const;

  // The work queues and completion lists behind the contexts (defined in
  // src/core/runtime.h). Library-internal.
  class Ops;
  Ops& ops() const { return *ops_; }

 protected:
  Runtime(std::unique_ptr<Ops> ops, const std::atomic<uint64_t>* manual_clock);

 private:
  std::unique_ptr<Ops> ops_;
  const std::atomic<uint64_t>* manual_clock_;
};

// A runtime a test drives by hand. Every call below is for the thread that
// owns the runtime (the test's); other threads (a driver's completion
// thread) may still queue work and completions to it, which then wait for
// the next run_pending(). It must outlive every tag set created on it.
class ManualRuntime final : public Runtime {
 public:
  // The clock starts at `start_ns` (default 1000 s: far from zero, since
  // the schedulers subtract times).
  explicit ManualRuntime(uint64_t start_ns = 1000ull * 1000 * 1000 * 1000);
  ~ManualRuntime() override;

  // Runs what is queued, in the order it was queued, on the calling thread,
  // until nothing is left (what the work itself queues runs too): kblockd
  // work items (the thread marked as kblockd), and raised or IPI'd
  // completions (in softirq context). Returns how many ran. The clock does
  // not move.
  size_t run_pending();
  // Moves the clock forward by `ns`. On the way, each timer due fires in
  // expiry order (equal expiries in arming order) with the clock set to its
  // expiry, and run_pending() runs before it and after it; the clock ends at
  // the old time + ns. Returns how many timers fired.
  size_t advance(uint64_t ns);
  // Work items and completions waiting for run_pending().
  size_t pending() const;
  // Completions waiting for `cpu`'s softirq (raised there, or sent there by
  // a completion IPI), for tests of completion routing.
  size_t pending_completions(unsigned cpu) const;
  // When the earliest armed timer fires; UINT64_MAX if none.
  uint64_t next_timer_ns() const;

 private:
  class Impl;
  Impl* impl_;  // owned by Runtime (its Ops)
  std::atomic<uint64_t> now_;
};

}  // namespace blkmq
