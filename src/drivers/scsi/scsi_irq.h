// The host's interrupt source for latency_us > 0: commands are posted with
// a due time and completed from one thread per host ("scsi-irq/N") inside a
// HardirqScope, as an HBA's interrupt handler completes them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "blkmq/driver/list.h"
#include "blkmq/driver/request.h"
#include "blkmq/status.h"

namespace blkmq::scsi {

// The driver payload behind every Request (the scsi_cmnd analogue).
struct ScsiCmd {
  uint64_t due_ns;    // when the "device" finishes it (latency mode)
  BlkStatus status;   // what it completes with
};
static_assert(alignof(ScsiCmd) <= 16, "Request::pdu() is only 16-byte aligned");

class ScsiIrq {
 public:
  ScsiIrq(unsigned host_no, uint64_t latency_ns);
  // Completes whatever is still pending, then stops the thread. The host
  // destroys its queues first, so normally nothing is pending by then.
  ~ScsiIrq();
  ScsiIrq(const ScsiIrq&) = delete;
  ScsiIrq& operator=(const ScsiIrq&) = delete;

  // Queues rq to complete with `st` latency_ns from now. Links rq through
  // rq->queuelist until then. Dispatch context; takes a mutex briefly.
  void post(Request* rq, BlkStatus st);

 private:
  void loop();
  // Completes the requests on `batch` (already due) in hardirq context.
  static void fire(ListNode* batch);

  const uint64_t latency_ns_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Due times never decrease along the list: the latency is per host and
  // each due time is taken under mu_ (and kept >= the previous one).
  ListNode pending_;
  uint64_t last_due_ns_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace blkmq::scsi
