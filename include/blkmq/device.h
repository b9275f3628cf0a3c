// Devices: a driver instance with its tag set and queue, created by name
// with string parameters (what `blkmq bench --driver=NAME --PARAM=VALUE`
// and the library both use).
#pragma once

#include <sys/uio.h>

#include <cerrno>
#include <cstdint>
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

// One run of a device's allocation map, as allocation() reports it. The
// flags match NBD's base:allocation context.
enum ExtentFlag : uint32_t {
  kExtentHole = 1u << 0,  // no storage is allocated for the range
  kExtentZero = 1u << 1,  // the range reads as zeroes
};
struct Extent {
  uint64_t length = 0;  // bytes, never 0
  uint32_t flags = 0;   // ExtentFlag bits; 0: allocated data (what is always safe to say)
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

  // Whether allocation() answers for this device. Optional: the default is
  // false, and a server then does not offer an allocation map (NBD's
  // base:allocation). Fixed for the device's lifetime; any thread.
  virtual bool reports_allocation() const { return false; }
  // The allocation map of [offset, offset + length): consecutive extents
  // from `offset`, adjacent ones with equal flags merged, the last one
  // clipped to the range; at most `max_extents` of them, so they may cover
  // only a prefix of the range (at least one extent when length > 0).
  // offset and length must be multiples of the logical block size and lie
  // within the device (else EINVAL); extent lengths are multiples of it too.
  // The answer is a snapshot: it reflects every write, discard and
  // write-zeroes that completed before the call; I/O in flight meanwhile
  // may or may not show. Any thread, outside the I/O path: it may sleep and
  // costs a system call or a lock per extent (or per page for the null
  // store), so callers bound max_extents. Default: EOPNOTSUPP.
  virtual Result<std::vector<Extent>> allocation(uint64_t offset, uint64_t length, size_t max_extents) {
    (void)offset, (void)length, (void)max_extents;
    return Status::error(EOPNOTSUPP, driver_name() + ": no allocation map");
  }
  // True when a write_zeroes request costs about the same whatever its
  // length because it only changes metadata (fallocate ZERO_RANGE on a
  // file) and never falls back to writing zeroes; what NBD's FAST_ZERO asks
  // for. Optional, default false. Fixed for the device's lifetime; any thread.
  virtual bool write_zeroes_is_cheap() const { return false; }

  // Registers the memory the caller does its I/O from and into, as fio's
  // `fixedbufs` registers its buffers with io_uring: a driver that can map
  // it ahead (uring: io_uring_register_buffers on every ring) then moves a
  // bio whose data is one segment inside a region without pinning its
  // pages per I/O. Replaces any earlier set; count 0 unregisters.
  // The regions must stay mapped until they are replaced or the device is
  // destroyed, and no I/O into an earlier set may be in flight during the
  // call. Any thread, outside the I/O path: a system call per ring, and
  // the kernel pins every page. Optional: the default is EOPNOTSUPP, for
  // drivers with nothing to gain; the I/O works the same without it.
  virtual Status register_buffers(const iovec* regions, size_t count) {
    (void)regions, (void)count;
    return Status::error(EOPNOTSUPP, driver_name() + ": no registered buffers");
  }
};

// Creates a device of driver `driver` (a built-in: "null", "uring",
// "ublk", "scsi", "rbd" where built; or one registered with
// register_device_driver, blkmq/driver/device_driver.h). Unknown drivers,
// unknown parameters and bad values give an error naming them. Parameters
// named "attr:PATH" are applied as queue attributes after creation:
// queue/scheduler first, then the others in name order. Any thread; blocks
// while the driver sets the device up.
Result<std::unique_ptr<Device>> create_device(std::string_view driver, const ParamMap& params);
// Registered driver names: the built-ins in their folders' order, then the
// others in registration order. Any thread.
std::vector<std::string> device_drivers();
// Parameters a driver accepts (empty for an unknown driver). Any thread.
std::vector<ParamInfo> device_params(std::string_view driver);

}  // namespace blkmq
