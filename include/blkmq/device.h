// Devices: a driver instance with its tag set and queue, created by name
// with string parameters (what `blkmq bench --driver=NAME --PARAM=VALUE`
// and the library both use).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "blkmq/queue.h"
#include "blkmq/status.h"

namespace blkmq {

using ParamMap = std::map<std::string, std::string, std::less<>>;

// One driver parameter: name, default value as a string, and help text.
struct ParamInfo {
  std::string name;
  std::string default_value;
  std::string help;
};

// A configured device: owns its tag set, its queue and its driver threads.
// Destroying it tears the queue down (draining I/O) and stops the driver.
class Device {
 public:
  virtual ~Device() = default;
  virtual Queue& queue() = 0;
  virtual const std::string& driver_name() const = 0;
  // Capacity in bytes.
  virtual uint64_t size_bytes() const = 0;
};

// Creates a device of driver `driver` ("null", ...). Unknown drivers,
// unknown parameters and bad values give an error naming them. Parameters
// named "attr:PATH" are applied as queue attributes after creation:
// queue/scheduler first, then the others in name order.
Result<std::unique_ptr<Device>> create_device(std::string_view driver, const ParamMap& params);
// Registered driver names.
std::vector<std::string> device_drivers();
// Parameters a driver accepts (empty for an unknown driver).
std::vector<ParamInfo> device_params(std::string_view driver);

// Driver registration, done by each driver's translation unit at startup.
using DeviceFactory = Result<std::unique_ptr<Device>> (*)(const ParamMap& params);
struct DeviceDriver {
  std::string name;
  DeviceFactory create;
  std::vector<ParamInfo> params;
};
void register_device_driver(const DeviceDriver* drv);

}  // namespace blkmq
