// Orders the NBD server's read-modify-writes against every other write to
// the same queue. A byte-granular WRITE (from a client that did not
// negotiate block sizes) reads the sectors that cover it, patches them and
// writes them back; a write to one of those sectors in between would be
// lost. The gate lets an RMW run only when no write of any connection to
// the queue is in flight, and holds new writes back until it is done.
// Cost on the ordinary path: one atomic add at submit and one at
// completion; the mutex is only taken while an RMW waits or runs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace blkmq {
class Queue;
}

namespace blkmq::nbd {

class WriteGate {
 public:
  // The gate of `q`, shared by every connection to it; a reference per
  // caller, dropped with release(). Any thread.
  static WriteGate* acquire(const Queue* q);
  static void release(WriteGate* g);

  // Before a write (WRITE, TRIM, WRITE_ZEROES) is submitted: false while an
  // RMW runs or waits; the caller must then submit nothing it has plugged
  // before calling wait_open(), and try again. Reader thread.
  bool try_enter();
  // A write let in by try_enter() has completed. Any context, the driver's
  // completion included.
  void exit();
  // Blocks until no RMW holds the gate (then try_enter again). Reader
  // thread, with its plug flushed.
  void wait_open();
  // Blocks until every write in flight has completed and keeps new ones
  // out until end_rmw(); RMWs of different connections run one at a time.
  // Reader thread, with its plug flushed.
  void begin_rmw();
  void end_rmw();

 private:
  WriteGate() = default;
  std::atomic<uint64_t> writers_{0};
  std::atomic<bool> closed_{false};
  std::mutex rmw_mu_;   // one RMW at a time, held from begin_rmw to end_rmw
  std::mutex mu_;
  std::condition_variable cv_;
  const Queue* q_ = nullptr;
  unsigned refs_ = 0;
};

}  // namespace blkmq::nbd
