// The built-in drivers. Each driver folder provides a link function that
// registers it; listing them here keeps them linked from a static library.
#include "drivers/null/null.h"
#include "drivers/scsi/scsi.h"
#include "drivers/ublk/ublk.h"
#include "drivers/uring/uring.h"
#if BLKMQ_HAVE_RBD
#include "drivers/rbd/rbd.h"
#endif

namespace blkmq {

void register_builtin_drivers() {
  null_driver_link();
  scsi_driver_link();
  uring_driver_link();
  ublk_driver_link();
#if BLKMQ_HAVE_RBD
  rbd_driver_link();
#endif
}

}  // namespace blkmq
