// create_device("scsi"): parameters to a host with its LUNs, and the
// driver's registration.
#include "drivers/scsi/scsi_device.h"

#include "base/registry.h"
#include "blkmq/driver/device_driver.h"
#include "drivers/scsi/scsi_params.h"

namespace blkmq::scsi {
namespace {

// A literal, not a std::string: registration may run before this file's
// dynamic initializers.
constexpr const char* kDriverName = "scsi";

}  // namespace

const std::string& ScsiDevice::driver_name() const {
  static const std::string name = kDriverName;
  return name;
}

Result<std::unique_ptr<Device>> ScsiDevice::create(const ParamMap& params) {
  auto parsed = parse_scsi_params(params);
  if (!parsed) return parsed.status();
  auto host = ScsiHost::create(parsed->host);
  if (!host) return host.status();
  for (unsigned i = 0; i < parsed->luns; i++) {
    auto lun = (*host)->add_lun(parsed->lun);
    if (!lun) return lun.status();
  }
  return std::unique_ptr<Device>(new ScsiDevice(std::move(*host)));
}

}  // namespace blkmq::scsi

// The driver, listed by the table CMake generates from src/drivers' folders.
BLKMQ_BUILTIN(blkmq::DeviceDriver, driver, scsi, 0,
              {blkmq::scsi::kDriverName, &blkmq::scsi::ScsiDevice::create, blkmq::scsi::scsi_param_infos()});
