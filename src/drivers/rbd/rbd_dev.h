// The rbd device's internal structures, shared by the driver ops
// (rbd_ops.cc) and device setup (rbd_device.cc).
#pragma once

#include <rados/librados.h>
#include <rbd/librbd.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/driver/driver.h"
#include "blkmq/queue.h"
#include "blkmq/driver/tagset.h"
#include "drivers/rbd/rbd_params.h"

namespace blkmq::rbd {

// Segments per request: bounds the iovec array in every request's payload
// (QueueLimits::max_segments).
constexpr uint16_t kMaxSegments = 128;

// The driver payload behind every Request. librbd keeps a pointer to a
// read's iovec array until the read completes, so the array lives here and
// not on the dispatcher's stack.
struct RbdCmd {
  iovec iov[kMaxSegments];
};
static_assert(alignof(RbdCmd) <= 16, "Request::pdu() is only 16-byte aligned");

// One connection to a cluster, one pool and one open image. librbd's image
// handle is thread-safe: every hw queue issues to it, and completions
// arrive on librbd's own threads (rbd_ops.cc).
class RbdDevice final : public Device {
 public:
  // Connects, opens the image and creates the queue; a clear error (with
  // librados's or librbd's errno) when any step fails.
  static Result<std::unique_ptr<Device>> create(const ParamMap& params);
  // Destroys the queue first (the core drains the I/O in flight: librbd
  // completes or times out every operation), then closes the image and the
  // connection.
  ~RbdDevice() override;

  Queue& queue() override { return *queue_; }
  const std::string& driver_name() const override;
  uint64_t size_bytes() const override { return size_; }
  // From rbd_diff_iterate2 against the image's creation: what was never
  // written or was discarded is a hole that reads as zeroes.
  bool reports_allocation() const override { return true; }
  Result<std::vector<Extent>> allocation(uint64_t offset, uint64_t length, size_t max_extents) override;

  rbd_image_t image() const { return image_; }
  // completion=eventfd: completions are created without a callback and
  // librbd signals efd_ instead.
  bool eventfd_completion() const { return efd_ >= 0; }

 private:
  explicit RbdDevice(const RbdParams& p) : params_(p) {}
  Status connect();
  Status open_image();
  QueueConfig queue_config() const;
  Status setup();
  // completion=eventfd: the eventfd, registered with the image, and the
  // thread that drains rbd_poll_io_events whenever it fires (rbd_ops.cc).
  Status start_reaper();
  void stop_reaper();
  void reap_loop();

  RbdParams params_;
  rados_t cluster_ = nullptr;
  rados_ioctx_t ioctx_ = nullptr;
  rbd_image_t image_ = nullptr;
  uint64_t size_ = 0;
  uint64_t objset_bytes_ = 0;  // object size times stripe count: krbd's request limit
  bool client_cache_ = true;   // librbd's writeback cache (rbd_cache) is on: flushes matter
  unsigned index_ = 0;
  std::unique_ptr<TagSet> tag_set_;
  std::unique_ptr<Queue> queue_;
  int efd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread reaper_;
};

extern const DriverOps kRbdOps;

}  // namespace blkmq::rbd
