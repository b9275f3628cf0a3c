// Per-thread plugging (blk_plug): requests submitted by this thread inside a
// plug are held and issued together when the plug is flushed.
#pragma once

#include "blkmq/driver/request.h"

namespace blkmq {

constexpr unsigned kPlugMaxRequests = 32;       // BLK_MAX_REQUEST_COUNT (x2 across queues)
constexpr uint32_t kPlugFlushSize = 128 * 1024;  // BLK_PLUG_FLUSH_SIZE

// RAII plug. Nested plugs are no-ops: only the outermost one flushes. The
// plug flushes at kPlugMaxRequests requests (2x when it spans queues), when
// the last request is >= 128 KiB, when finish() runs or the object dies, and
// when the thread is about to block waiting inside blkmq (for a tag or a
// synchronous completion). Task context; one thread only.
class Plug {
 public:
  // nr_ios: how many requests the thread is about to submit; the first
  // allocation takes that many tags at once (capped at 32).
  explicit Plug(unsigned nr_ios = 1);
  ~Plug();
  Plug(const Plug&) = delete;
  Plug& operator=(const Plug&) = delete;
  // Flushes now (blk_finish_plug) and leaves the plug inactive.
  void finish();

 private:
  bool owner_;
};

// Flushes the calling thread's plug, if any, as the scheduler does before the
// thread sleeps. from_schedule = true makes queue runs asynchronous.
void flush_current_plug(bool from_schedule);

}  // namespace blkmq
