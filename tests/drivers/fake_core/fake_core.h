// A minimal stand-in for the core, used only to unit-test the null driver's
// ops before the real core links (see README). Records what the driver asks
// of the core; completes nothing by itself except complete_request, which
// calls ops.complete inline.
#pragma once

#include <memory>
#include <vector>

#include "blkmq/context.h"
#include "blkmq/driver.h"
#include "blkmq/queue.h"
#include "blkmq/tagset.h"

namespace blkmq::fake {

struct Ended {
  Request* rq;
  BlkStatus st;
  ExecContext ctx;
};

struct Record {
  int started = 0;
  int requeued = 0;
  int stops = 0;
  int starts = 0;
  int completes = 0;
  bool stopped = false;
  std::vector<Ended> ended;
  int registered = 0;
};
Record& rec();
void reset();

class FakeQueue : public Queue {
 public:
  ~FakeQueue() override;
  TagSet* set = nullptr;
  QueueConfig cfg;
  std::vector<std::unique_ptr<HwCtx>> hctxs;
  std::vector<Request*> rqs;  // per queue, 8 per hctx, pdu initialized
  Request* request(unsigned hctx, unsigned i);
};
FakeQueue& fake(Queue& q);
const DriverOps& ops(Queue& q);

// Runs every armed timer's callback once (timers armed meanwhile wait for
// the next call). Returns how many ran.
int fire_timers();

}  // namespace blkmq::fake
