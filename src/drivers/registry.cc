// The device-driver registry: create_device(), device_drivers(),
// device_params() and register_device_driver(). It lives with the drivers,
// not in the core, because it refers to the drivers: the table CMake
// generates from the folders of src/drivers (base/registry.h says why).
#include <algorithm>
#include <cerrno>

#include "base/registry.h"
#include "blkmq/device.h"
#include "blkmq/driver/device_driver.h"

// The generated table (CMakeLists.txt, blkmq_builtin_table).
extern const blkmq::base::BuiltinTable<blkmq::DeviceDriver> blkmq_builtin_drivers;

namespace blkmq {
namespace {

Status check_driver(const DeviceDriver& d) {
  if (d.name.empty()) return Status::invalid("driver: a name is required");
  if (!d.create) return Status::invalid("driver '" + d.name + "': a create function is required");
  return Status::OK();
}

base::Registry<DeviceDriver>& drivers() {
  static base::Registry<DeviceDriver> r("driver", blkmq_builtin_drivers, &check_driver);
  return r;
}

}  // namespace

Status register_device_driver(const DeviceDriver* drv) { return drivers().add(drv); }

std::vector<std::string> device_drivers() { return drivers().names(); }

std::vector<ParamInfo> device_params(std::string_view driver) {
  const DeviceDriver* d = drivers().find(driver);
  return d ? d->params : std::vector<ParamInfo>{};
}

Result<std::unique_ptr<Device>> create_device(std::string_view driver, const ParamMap& params) {
  const DeviceDriver* d = drivers().find(driver);
  if (!d) {
    std::string list;
    for (const std::string& n : device_drivers()) list += (list.empty() ? "" : ", ") + n;
    return Status::invalid("unknown driver '" + std::string(driver) + "'; available: " + list);
  }
  ParamMap driver_params;
  std::vector<std::pair<std::string, std::string>> attrs;
  for (const auto& [k, v] : params) {
    if (k.rfind("attr:", 0) == 0) {
      attrs.emplace_back(k.substr(5), v);
      continue;
    }
    bool known = false;
    for (const ParamInfo& p : d->params) known |= p.name == k;
    if (!known) return Status::invalid("driver " + d->name + ": unknown parameter '" + k + "'");
    driver_params.emplace(k, v);
  }
  auto dev = d->create(driver_params);
  if (!dev) return dev.status();
  // queue/scheduler first: queue/iosched/* and nr_requests act on the
  // scheduler that is in place, as they do after `echo NAME > scheduler`.
  std::stable_partition(attrs.begin(), attrs.end(),
                        [](const auto& a) { return a.first == "queue/scheduler"; });
  for (const auto& [path, value] : attrs) {
    if (Status s = dev.value()->queue().set_attr(path, value); !s) return s;
  }
  return std::move(dev.value());
}

}  // namespace blkmq
