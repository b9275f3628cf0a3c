// The server-wide bound on payload bytes in flight: every connection's
// READ and WRITE buffers come out of it, so the server's memory is bounded
// whatever the number of connections (each also has its own bound,
// ConnLimits::max_bytes). A connection that does not fit waits, with its
// plug flushed, until replies of any connection give bytes back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace blkmq::nbd {

class ByteBudget {
 public:
  // `max` bytes in all; at least one largest request must fit (the
  // constructor raises a smaller value to that).
  explicit ByteBudget(uint64_t max);
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // The default: an eighth of the machine's memory, at least 256 MiB.
  static uint64_t default_max();

  // Takes n bytes if they fit; false otherwise. Any thread; lock-free (a
  // compare-and-swap on the count: every request of every connection
  // passes here, and a mutex there was contended by readers and repliers).
  bool try_take(uint64_t n);
  // Gives back bytes taken, waking waiters (the lock and the notify only
  // when some thread waits in take()). Any thread.
  void give(uint64_t n);
  // Blocks until n bytes fit (and takes them: true) or `give_up()` is true
  // (false); give_up is checked at every give() and every 100 ms.
  bool take(uint64_t n, const std::function<bool()>& give_up);

  uint64_t max() const { return max_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  const uint64_t max_;
  std::mutex mu_;  // only for take()'s sleep
  std::condition_variable cv_;
  std::atomic<uint64_t> used_{0};
  std::atomic<unsigned> waiters_{0};
};

}  // namespace blkmq::nbd
