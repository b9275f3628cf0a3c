// The hrtimer stand-in: one timer thread per process runs callbacks at
// their expiry times. A driver may run its own TimerThread (null's
// "null-timer") so its completions run on its own thread.
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

class TimerThread;

// A timer owned by its user. Re-armable. Callback runs on the timer thread
// with no timer lock held. Destroying or cancel_sync() waits for a running
// callback to finish (unless called from that callback).
class Timer {
 public:
  Timer() = default;
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  // Bind to a thread (nullptr: TimerThread::global()) and a callback (once,
  // before the first arm).
  void init(TimerThread* thread, std::function<void()> fn);
  // Arm (or re-arm) to fire at absolute monotonic time `when_ns`.
  void arm_at(uint64_t when_ns);
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

 private:
  friend class TimerThread;
  TimerThread* thread_ = nullptr;
  std::function<void()> fn_;
  std::atomic<uint64_t> expires_{0};
  uint64_t seq_ = 0;           // protected by the thread's lock
  bool queued_ = false;        // protected by the thread's lock
  size_t heap_index_ = 0;      // position in the heap while queued_
};

// A thread running timers in expiry order (binary heap). Named for top -H.
class TimerThread {
 public:
  // hardirq_context: callbacks stand for hard interrupts; the core reads it
  // to mark its context around the callbacks it registers.
  explicit TimerThread(std::string name, bool hardirq_context = false);
  // Stops; pending timers do not fire and become disarmed. Not from one of
  // its own callbacks.
  ~TimerThread();
  // The process-wide timer thread (started on first use, never stopped).
  static TimerThread& global();
  bool on_this_thread() const;
  bool hardirq_context() const { return hardirq_; }
  const std::string& name() const { return name_; }

 private:
  friend class Timer;
  struct Entry {
    uint64_t when;
    uint64_t seq;
    Timer* t;
  };
  void run();
  void add_locked(Timer* t, uint64_t when);
  bool remove_locked(Timer* t);
  bool before(size_t a, size_t b) const;
  void place(size_t i, const Entry& e);
  void sift_up(size_t i);
  void sift_down(size_t i);

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Entry> heap_;
  Timer* running_ = nullptr;
  std::condition_variable running_cv_;
  uint64_t next_seq_ = 0;      // FIFO order among equal expiry times
  bool stop_ = false;
  bool hardirq_;
  std::string name_;
  std::thread thread_;
  std::atomic<pid_t> tid_{0};
};

}  // namespace blkmq::base
