// The hrtimer stand-in. Timers wait in a TimerQueue in expiry order; a
// TimerThread fires them on its own thread at their expiry on
// CLOCK_MONOTONIC, a ManualTimerQueue fires them when its owner says so,
// on the owner's thread, by a clock the owner moves (deterministic tests).
// A driver may run its own TimerThread (null's "null-timer") so its
// completions run on its own thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace blkmq::base {

class TimerQueue;

// A timer owned by its user. Re-armable. The callback runs on the queue's
// firing thread with no timer lock held. Destroying or cancel_sync() waits
// for a running callback to finish (unless called from that callback).
class Timer {
 public:
  Timer() = default;
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  // Binds to a queue (nullptr: TimerThread::global()) and a callback (once,
  // before the first arm).
  void init(TimerQueue* queue, std::function<void()> fn);
  // Arm (or re-arm) to fire at absolute time `when_ns` on the queue's clock.
  void arm_at(uint64_t when_ns);
  // Arm to fire `delay_ns` from now by the queue's clock.
  void arm_after(uint64_t delay_ns);
  // Arm only if not armed, or if `when_ns` is earlier than the current expiry
  // (mod_timer-if-earlier). Returns true if (re)armed.
  bool arm_if_earlier(uint64_t when_ns);
  // Disarm; returns true if it was armed.
  bool cancel();
  // Disarm and wait for a running callback to finish.
  void cancel_sync();
  bool armed() const;
  uint64_t expires() const { return expires_.load(std::memory_order_relaxed); }
  TimerQueue* queue() const { return queue_; }

 private:
  friend class TimerQueue;
  TimerQueue* queue_ = nullptr;
  std::function<void()> fn_;
  std::atomic<uint64_t> expires_{0};
  uint64_t seq_ = 0;           // protected by the queue's lock
  bool queued_ = false;        // protected by the queue's lock
  size_t heap_index_ = 0;      // position in the heap while queued_
};

// Armed timers in expiry order (a binary heap; equal expiries fire in the
// order they were armed), and the rule that a timer's callback runs with
// no lock held while cancel_sync() waits for it. Who fires them, and by
// which clock, is the subclass's.
class TimerQueue {
 public:
  TimerQueue(std::string name, bool hardirq_context) : hardirq_(hardirq_context), name_(std::move(name)) {}
  // Disarms every timer still queued (they do not fire). Subclasses stop
  // firing before this runs.
  virtual ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // The clock timers are armed against (arm_after adds to it). Any thread.
  virtual uint64_t now_ns() const = 0;
  // Whether the calling thread is the one firing this queue's callbacks.
  bool on_this_thread() const;
  // hardirq_context: callbacks stand for hard interrupts; the core reads
  // it to mark its context around the callbacks it registers.
  bool hardirq_context() const { return hardirq_; }
  const std::string& name() const { return name_; }

 protected:
  // Called under the lock when the earliest expiry changed (a new timer
  // went to the front): a firing thread may need to sleep less.
  virtual void earliest_changed() {}
  // Removes the earliest timer if it is due by `now` and runs its callback
  // with the lock dropped; `lk` holds mu_ on entry and on return. Returns
  // false if none was due. `next` (optional) gets the earliest expiry left,
  // UINT64_MAX if none.
  bool fire_one(std::unique_lock<std::mutex>& lk, uint64_t now, uint64_t* next);
  // Disarms every queued timer (stop). Under the lock.
  void clear_locked();
  // The earliest armed expiry, UINT64_MAX if none. Under the lock.
  uint64_t next_locked() const;
  void set_firing_thread();
  void clear_firing_thread();

  mutable std::mutex mu_;

 private:
  friend class Timer;
  struct Entry {
    uint64_t when;
    uint64_t seq;
    Timer* t;
  };
  void add_locked(Timer* t, uint64_t when);
  bool remove_locked(Timer* t);
  bool before(size_t a, size_t b) const;
  void place(size_t i, const Entry& e);
  void sift_up(size_t i);
  void sift_down(size_t i);

  std::vector<Entry> heap_;
  Timer* running_ = nullptr;
  std::condition_variable running_cv_;
  uint64_t next_seq_ = 0;      // FIFO order among equal expiry times
  bool hardirq_;
  std::string name_;
  std::atomic<pid_t> tid_{0};  // the firing thread, 0 while none
};

// A thread running timers at their expiry on CLOCK_MONOTONIC. Named for
// top -H.
class TimerThread final : public TimerQueue {
 public:
  explicit TimerThread(std::string name, bool hardirq_context = false);
  // Stops; pending timers do not fire and become disarmed. Not from one of
  // its own callbacks.
  ~TimerThread() override;
  // The process-wide timer thread (started on first use, never stopped);
  // the process default runtime's.
  static TimerThread& global();
  uint64_t now_ns() const override;

 private:
  void earliest_changed() override { cv_.notify_one(); }
  void run();

  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Timers fired by hand: fire_due() runs, on the calling thread, every
// timer due by the clock it was given, earliest first. The clock is an
// atomic the owner moves (ManualRuntime's); nothing else moves it. For
// deterministic tests; callbacks may arm and cancel timers of this queue.
class ManualTimerQueue final : public TimerQueue {
 public:
  ManualTimerQueue(std::string name, const std::atomic<uint64_t>* clock)
      : TimerQueue(std::move(name), false), clock_(clock) {}
  uint64_t now_ns() const override { return clock_->load(std::memory_order_acquire); }
  // Fires the earliest timer due by now_ns(), if any; returns whether one
  // fired. One at a time, so the owner can run other work in between.
  bool fire_one_due();
  // The earliest armed expiry, UINT64_MAX if none.
  uint64_t next_expiry() const;

 private:
  const std::atomic<uint64_t>* clock_;
};

}  // namespace blkmq::base
