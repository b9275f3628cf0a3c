// The built-in schedulers. Each scheduler folder provides a register
// function; listing them here keeps them linked from a static library.
#include "blkmq/elevator.h"
#include "sched/deadline/deadline.h"

namespace blkmq {

void register_builtin_elevators() {
  // Schedulers add themselves here as they land (issue 3).
  register_mq_deadline();
}

}  // namespace blkmq
