// The built-in schedulers. Each scheduler folder provides a register
// function; listing them here keeps them linked from a static library.
#include "blkmq/elevator.h"
#include "sched/kyber/kyber.h"

namespace blkmq {

void register_builtin_elevators() {
  // Schedulers add themselves here as they land (issue 3).
  kyber::register_kyber();
}

}  // namespace blkmq
