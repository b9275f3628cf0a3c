// The scsi driver's hooks, shared by the host setup and the ops file.
#pragma once

#include "blkmq/driver/driver.h"

namespace blkmq::scsi {

// queue_rq, complete and the budget pair; the ScsiLun is queue_data().
extern const DriverOps kScsiOps;

}  // namespace blkmq::scsi
