// The ublk driver's internal structures, shared by the driver ops
// (ublk_ops.cc), the server threads (ublk_server.cc) and device setup
// (ublk_device.cc).
#pragma once

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
#include "blkmq/driver/ublk.h"
#include "drivers/ublk/ublk_ring.h"

namespace blkmq::ublkd {

// The name create_device() knows this driver by. A literal: registration
// may run before the drivers' dynamic initializers.
inline constexpr const char* kDriverName = "ublk";

// The driver payload behind every Request: the UblkIo the target sees.
// Constructed in place by init_request, destroyed by exit_request.
struct UblkCmd final : UblkIo {
  // Fresh per-issue state; queue_rq calls it before the hand-off.
  void prepare(Request* rq, unsigned q, uint32_t lbs) {
    rq_ = rq;
    offset_ = rq->sector << kSectorShift;
    length_ = rq->data_len;
    queue_ = q;
    lbs_ = lbs;
    short_ = false;
    short_bytes_ = 0;
    completed_.store(0, std::memory_order_relaxed);
  }
  bool is_short() const { return short_; }
  uint32_t short_bytes() const { return short_bytes_; }
};
static_assert(alignof(UblkCmd) <= 16, "Request::pdu() is only 16-byte aligned");

inline UblkCmd* to_cmd(Request* rq) { return rq->pdu_as<UblkCmd>(); }

extern const DriverOps kUblkOps;

// What the built-in loop target adds to the server loop: its own event
// source (an io_uring) that the server must wait on together with its ring.
// User targets do not see this; the server finds it by dynamic_cast once.
class ServerHooks {
 public:
  virtual ~ServerHooks() = default;
  // After a batch of handle() calls: submit what was batched, reap what
  // completed, without waiting. Server thread of q.
  virtual void after_batch(unsigned q) = 0;
  // Sleep until a completion arrives or wake_fd (an eventfd) becomes
  // readable, reap what completed, and return. Server thread of q.
  virtual void wait(unsigned q, int wake_fd) = 0;
};

class UblkDevice;

// One hw queue's server (ublksrv's ublk_queue + its pthread). The ring and
// the sleep flag are what queue_rq touches; the rest is the server's.
// The completion batch of the server thread's current pass over its ring
// (UblkServer::drain), or null on any other thread: UblkIo::complete puts
// a request a target ends within handle() into it, and drain ends them all
// together (end_request_batch) when the pass is over.
IoCompBatch*& ublk_pass_batch();

class UblkServer {
 public:
  UblkServer(UblkDevice* dev, unsigned q, unsigned depth);
  ~UblkServer();

  // Starts the thread and waits for init_queue(); its status.
  Status start(bool pin);
  // Stops the thread after the queue was drained; runs exit_queue there.
  void stop();

  // queue_rq: hand over, waking the server only if it sleeps. False when
  // the ring is full.
  bool post(Request* rq);

 private:
  void run();
  void loop();
  unsigned drain();
  void sleep();
  void wake();

  UblkDevice* dev_;
  unsigned q_;
  MpscRing<Request> ring_;
  // 1 while the server is (about to be) asleep. A producer that finds 1
  // swaps it to 0 and wakes it: one syscall per sleep, none per I/O while
  // the server is busy.
  alignas(64) std::atomic<uint32_t> sleeping_{0};
  std::atomic<bool> stop_{false};
  int wake_fd_ = -1;            // eventfd when the target has ServerHooks
  ServerHooks* hooks_ = nullptr;
  std::thread thread_;
  Status init_status_;
  bool started_ = false;
};

class UblkDevice final : public Device {
 public:
  static Result<std::unique_ptr<Device>> create(std::unique_ptr<UblkTarget> target,
                                                const UblkOptions& opts);
  // Queue first (drains), then the servers, then the target.
  ~UblkDevice() override;

  Queue& queue() override { return *queue_; }
  const std::string& driver_name() const override;
  uint64_t size_bytes() const override { return opts_.size; }

  UblkTarget* target() const { return target_.get(); }
  const UblkOptions& options() const { return opts_; }
  UblkServer* server(unsigned q) { return servers_[q].get(); }

 private:
  UblkDevice(std::unique_ptr<UblkTarget> target, const UblkOptions& opts);
  Status setup();
  QueueConfig queue_config() const;

  UblkOptions opts_;
  int index_ = -1;
  std::unique_ptr<UblkTarget> target_;
  std::vector<std::unique_ptr<UblkServer>> servers_;
  std::unique_ptr<TagSet> tag_set_;
  std::unique_ptr<Queue> queue_;
};

// Validates options; the error names the option and the accepted range.
Status validate_options(const UblkOptions& o);

}  // namespace blkmq::ublkd
