// create_device("scsi"): parameters to a host with its LUNs, and the
// driver's registration.
#include "drivers/scsi/scsi_device.h"

#include "drivers/scsi/scsi.h"
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

namespace blkmq {
namespace {

Result<std::unique_ptr<Device>> create_scsi_device(const ParamMap& params) {
  return scsi::ScsiDevice::create(params);
}

bool register_scsi_driver() {
  // Function-local statics: registered once, whatever the order of static
  // initialization.
  static const DeviceDriver driver{scsi::kDriverName, &create_scsi_device, scsi::scsi_param_infos()};
  static const bool registered = (register_device_driver(&driver), true);
  return registered;
}

[[maybe_unused]] const bool kScsiRegistered = register_scsi_driver();

}  // namespace

void scsi_driver_link() { (void)register_scsi_driver(); }

}  // namespace blkmq
