// The scsi driver's create_device() parameters: parsed, then validated by
// the host and LUN configs they fill in.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/status.h"
#include "drivers/scsi/scsi_host.h"

namespace blkmq::scsi {

struct ScsiParams {
  ScsiHostConfig host;
  ScsiLunConfig lun;   // every LUN create_device() makes is alike
  unsigned luns = 1;   // 1..kMaxLuns
};

// Parses and validates `params`. Unknown names and bad values are refused
// with a message naming the parameter and what it accepts. "attr:..."
// entries belong to the core and are skipped. backing=memory makes the
// host blocking (the page store locks and allocates in queue_rq).
Result<ScsiParams> parse_scsi_params(const ParamMap& params);

// One ParamInfo per parameter, in a stable order, with defaults.
std::vector<ParamInfo> scsi_param_infos();

}  // namespace blkmq::scsi
