// The scsi driver's DriverOps: the per-LUN device budget, issue, and
// completion inline or from the host's irq thread.
#include "blkmq/driver/driver.h"
#include "drivers/scsi/scsi_host.h"
#include "drivers/scsi/scsi_irq.h"
#include "drivers/scsi/scsi_ops.h"

namespace blkmq::scsi {
namespace {

inline ScsiLun* lun_of(const Queue* q) { return static_cast<ScsiLun*>(queue_data(q)); }

int scsi_get_budget(Queue* q) {
  // One budget is as good as another: the token only says "held".
  return lun_of(q)->get_budget(q) ? 0 : -1;
}

void scsi_put_budget(Queue* q, int /*token*/) { lun_of(q)->put_budget(); }

BlkStatus scsi_queue_rq(HwCtx* /*hctx*/, const QueueData& bd) {
  Request* rq = bd.rq;
  ScsiLun* lun = lun_of(rq->q);
  start_request(rq);
  const BlkStatus st = lun->issue(rq);
  ScsiIrq* irq = lun->host().irq();
  if (irq) {
    irq->post(rq, st);
  } else {
    // A command the "device" finishes at once (scsi_done from queue_rq):
    // the core routes it like any completion.
    complete_request(rq, st);
  }
  return BlkStatus::ok;
}

void scsi_complete(Request* rq) {
  // Budget back and queue rerun first: after end_request the LUN's queue
  // may be torn down.
  lun_of(rq->q)->finish(rq);
  end_request(rq, rq->status);
}

}  // namespace

// No queue_rqs: the core never batches requests that need a budget each,
// and no commit_rqs: there is no doorbell to ring.
const DriverOps kScsiOps = {
    .queue_rq = scsi_queue_rq,
    .queue_rqs = nullptr,
    .commit_rqs = nullptr,
    .get_budget = scsi_get_budget,
    .put_budget = scsi_put_budget,
    .timeout = nullptr,
    .poll = nullptr,
    .complete = scsi_complete,
    .init_hctx = nullptr,
    .exit_hctx = nullptr,
    .init_request = nullptr,
    .exit_request = nullptr,
    .busy = nullptr,
};

}  // namespace blkmq::scsi
