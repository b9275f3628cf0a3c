// The SCSI host driver ("scsi", in the spirit of scsi-mq). Devices come from
// blkmq::create_device("scsi", params); hosts with several LUNs from
// scsi::ScsiHost (drivers/scsi/scsi_host.h). This header only exists so that
// the built-in driver list can force the driver into a static link.
#pragma once

namespace blkmq {

// Makes sure the "scsi" driver is registered (see null_driver_link() for why
// a static library needs this). Idempotent and thread-safe.
void scsi_driver_link();

}  // namespace blkmq
