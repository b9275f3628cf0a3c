// The Device that create_device("scsi", ...) returns: a host with `luns`
// identical LUNs. queue() is LUN 0's queue; host() reaches the others.
#pragma once

#include <memory>
#include <string>

#include "blkmq/device.h"
#include "drivers/scsi/scsi_host.h"

namespace blkmq::scsi {

class ScsiDevice final : public Device {
 public:
  static Result<std::unique_ptr<Device>> create(const ParamMap& params);
  // Destroys the host: LUN queues (draining), irq thread, tag set.
  ~ScsiDevice() override = default;

  Queue& queue() override { return host_->lun(0).queue(); }
  const std::string& driver_name() const override;
  uint64_t size_bytes() const override { return host_->lun(0).size_bytes(); }
  ScsiHost& host() { return *host_; }

 private:
  explicit ScsiDevice(std::unique_ptr<ScsiHost> host) : host_(std::move(host)) {}
  std::unique_ptr<ScsiHost> host_;
};

}  // namespace blkmq::scsi
