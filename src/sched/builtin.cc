// The built-in schedulers. Each scheduler folder provides a register
// function; listing them here keeps them linked from a static library. The
// order is the order queue/scheduler lists them in, as sysfs does.
#include "blkmq/elevator/elevator.h"
#include "sched/bfq/bfq.h"
#include "sched/deadline/deadline.h"
#include "sched/kyber/kyber.h"

namespace blkmq {

void register_builtin_elevators() {
  register_mq_deadline();
  register_kyber();
  register_bfq();
}

}  // namespace blkmq
