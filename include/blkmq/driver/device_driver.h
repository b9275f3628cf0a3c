// Device drivers by name: what a driver author registers so that
// create_device("NAME", params) (blkmq/device.h), `blkmq bench
// --driver=NAME` and `blkmq nbd --driver=NAME` make its devices. The
// descriptor is apart from the per-queue hooks (blkmq/driver/driver.h), as
// SPDK's bdev module is apart from its bdev's function table.
//
// An out-of-tree driver registers once, before its first create_device:
//
//   const blkmq::DeviceDriver kMyDriver{"mydrv", &create_mydrv, {{"size", "1g", "capacity"}}};
//   int main() {
//     if (blkmq::Status st = blkmq::register_device_driver(&kMyDriver); !st) ...
//
// or from a static initializer of its own program. The built-in drivers
// (src/drivers/*/) are there from the first use of the registry on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/status.h"

namespace blkmq {

// Makes a device from the driver's own parameters: `params` holds only
// names the driver listed in DeviceDriver::params (create_device refuses
// others and applies the "attr:PATH" ones itself, after creation). Called
// by create_device, from the caller's thread; may block (opening files,
// starting threads). An error says which parameter is wrong and what it
// accepts (src/base/parse.h's wording for the built-ins).
using DeviceFactory = Result<std::unique_ptr<Device>> (*)(const ParamMap& params);

// A driver: its name, its factory and the parameters it accepts (listed by
// device_params() and `blkmq bench --driver=NAME --help`, in this order).
struct DeviceDriver {
  std::string name;              // required, unique among drivers
  DeviceFactory create;          // required
  std::vector<ParamInfo> params; // may be empty
};

// Registers *drv, which must stay alive (and unchanged) for the rest of the
// process. Refused: an empty name or no create function (EINVAL); a name
// already registered, a built-in's included (EEXIST, "driver 'NAME' is
// already registered"). Any thread, also from a static initializer; cheap
// (a lock and a walk over the drivers).
Status register_device_driver(const DeviceDriver* drv);

}  // namespace blkmq
