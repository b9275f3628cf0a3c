// The uring device's internal structures, shared by the ring code
// (uring_queue.cc), the driver ops (uring_ops.cc) and device setup
// (uring_device.cc).
#pragma once

#include <liburing.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/driver/driver.h"
#include "blkmq/ioctx.h"
#include "blkmq/queue.h"
#include "blkmq/driver/tagset.h"
#include "drivers/uring/uring_params.h"

namespace blkmq::uring {

class UringDevice;

// Segments per request: bounds the iovec array in every request's payload
// (QueueLimits::max_segments).
constexpr uint16_t kMaxSegments = 128;
// How many CQEs one reaping pass takes before advancing the CQ head.
constexpr unsigned kReapBatch = 32;

// The driver payload behind every Request: the iovecs of the transfer and
// where it stands, so a short transfer continues where it stopped.
struct UringCmd {
  uint64_t offset = 0;     // file offset of the next transfer
  uint32_t left = 0;       // bytes still to transfer
  uint16_t nr_iov = 0;
  uint16_t first = 0;      // iov[first] is where the next transfer starts
  uint16_t retries = 0;    // -EAGAIN and -ECANCELED resubmissions
  // Release-stored after the SQE is prepared, acquire-loaded by the reaper:
  // the kernel orders the two, but a race detector cannot see through it.
  std::atomic<uint32_t> issued{0};
  iovec iov[kMaxSegments];
};
static_assert(alignof(UringCmd) <= 16, "Request::pdu() is only 16-byte aligned");

// What the kernel and the file support, probed once at device setup.
struct Features {
  bool fsync = false;        // IORING_OP_FSYNC
  bool punch_hole = false;   // IORING_OP_FALLOCATE and the file takes PUNCH_HOLE
  bool zero_range = false;   // IORING_OP_FALLOCATE and the file takes ZERO_RANGE
  bool block_device = false;
  bool iopoll = false;       // poll queues use IORING_SETUP_IOPOLL (O_DIRECT on a polling block device)
  bool rt_ioprio = false;    // the RT class may go down with a request (CAP_SYS_NICE or CAP_SYS_ADMIN)
  bool nonvectored = false;  // IORING_OP_READ/WRITE exist (5.6) and the nonvectored parameter is on
};

// How the SQEs of reads and writes went, per ring (under its SQ lock):
// what tests check the registered-buffer and non-vectored paths with.
struct SqeCounts {
  uint64_t vectored = 0;     // READV/WRITEV
  uint64_t nonvectored = 0;  // READ/WRITE
  uint64_t fixed = 0;        // READ_FIXED/WRITE_FIXED (a registered buffer)
};

// The I/O priority a read or write carries to the kernel (sqe->ioprio), as
// the kernel's loop driver passes a request's priority to the backing
// file: the scheduler of the device below then ranks blkmq's requests as
// it would the process's own. io_uring refuses the RT class to a process
// without CAP_SYS_NICE or CAP_SYS_ADMIN, so without it an RT request goes
// with no class (the submitting thread's) rather than fail.
constexpr uint16_t forwarded_ioprio(uint16_t ioprio, bool rt_allowed) {
  return ioprio_class(ioprio) == IoprioClass::rt && !rt_allowed ? kIoprioDefault : ioprio;
}

// One ring per hw queue (hctx->driver_data). Default-type queues have a
// reaper thread that waits for completions in hardirq context; poll-type
// queues are reaped by whoever calls Queue::poll.
class UringQueue {
 public:
  UringQueue(UringDevice* dev, HwCtx* hctx, unsigned idx) : dev_(dev), hctx_(hctx), idx_(idx) {}
  ~UringQueue();
  UringQueue(const UringQueue&) = delete;
  UringQueue& operator=(const UringQueue&) = delete;

  // Creates the ring (and the reaper thread for non-poll queues). Returns
  // a negative errno on failure.
  int start(bool poll_type);

  // Dispatch context. Prepares the SQE for a started request; submits when
  // `last`. Returns ok or dev_resource (the SQ is full of in-flight work).
  BlkStatus issue(Request* rq, bool last);
  // Submits whatever was prepared with last == false.
  void commit();
  // Device::register_buffers for this ring: replaces its registered set
  // (none when `regions` is empty). Control context; takes the SQ lock.
  int register_buffers(std::span<const iovec> regions);
  SqeCounts sqe_counts();
  // Poll queues: reaps what completed (Queue::poll). Task context.
  int poll(IoCompBatch* iob);
  // Queue::wait on a default-type queue (DriverOps::wait, uring_wait.cc):
  // sleeps in the ring until a CQE or a wake of the thread's channel,
  // completing what arrived; one thread at a time, holding cq_mu_ (see
  // uring_wait.cc). -EOPNOTSUPP where it cannot (poll queues, no futex op,
  // waiter_reaps=0), -EAGAIN when another thread holds the CQ lock or the
  // SQ had no room for the arm (the caller sleeps on its word then).
  int wait(const std::atomic<uint32_t>* word, uint32_t val, std::atomic<uint32_t>* channel, uint32_t channel_val);

 private:
  // While a thread holds the CQ (it is submitting, or waiting in the ring)
  // it reaps what arrives itself, so the reaper's eventfd is muted: the
  // kernel then posts completions without waking the reaper. The last
  // holder to leave unmutes it and reaps what came in meanwhile.
  void hold_cq();
  void release_cq();
  void set_reaper_notify(bool on);
  void reaper_sleep();
  // Reaps everything in the CQ if no one else is at it (hardirq context).
  bool try_reap_all();
  bool prep_locked(Request* rq);
  void prep_rw(io_uring_sqe* sqe, Request* rq, int fd);
  // The registered buffer holding [base, base + len), or -1 (sq_mu_ held).
  int fixed_index(const void* base, size_t len) const;
  void submit_locked();
  void resubmit(Request* rq);
  // Handles one CQE's result; true when the request is finished, with *st.
  bool handle_result(Request* rq, int res, BlkStatus* st);
  void reap_ready();
  // Completes up to one batch of CQEs (cq_mu_ held, hardirq context);
  // returns how many it consumed. *stop: the reaper's stop token was among
  // them (only the reaper consumes it; others stop short of it).
  unsigned reap_locked(bool reaper, bool* stop);
  int setup_reaper_notify();
  void reap_loop();
  void stop_reaper();

  UringDevice* dev_;
  HwCtx* hctx_;
  unsigned idx_;
  bool ring_ready_ = false;
  bool poll_type_ = false;
  bool fixed_file_ = false;
  bool sqpoll_ = false;
  io_uring ring_{};
  // Serializes SQ use: dispatchers of this hctx and resubmissions.
  std::mutex sq_mu_;
  unsigned pending_ = 0;  // prepared SQEs not yet submitted (under sq_mu_)
  unsigned async_count_ = 0;  // SQEs since the last forced IOSQE_ASYNC (under sq_mu_)
  std::vector<iovec> fixed_;  // the ring's registered buffers, by index (under sq_mu_)
  SqeCounts counts_;          // under sq_mu_
  // Serializes CQ use: the reaper and submitters reaping after a submit
  // (reap_ready); on poll queues, the pollers (several may share one).
  std::mutex cq_mu_;
  std::thread reaper_;
  int efd_ = -1;             // the reaper's eventfd, registered with the ring
  bool futex_op_ = false;    // IORING_OP_FUTEX_WAIT works (and waiter_reaps)
  uint64_t ring_id_ = 0;     // unique per ring ever made: keys armed futex waits
  std::atomic<unsigned> cq_holders_{0};
};

class UringDevice final : public Device {
 public:
  static Result<std::unique_ptr<Device>> create(const ParamMap& params);
  // Destroys the queue (the core drains I/O; exit_hctx stops the reapers
  // and exits the rings), then the tag set, then closes the file.
  ~UringDevice() override;

  Queue& queue() override { return *queue_; }
  const std::string& driver_name() const override;
  uint64_t size_bytes() const override { return size_; }
  // A regular file's map comes from lseek(SEEK_DATA/SEEK_HOLE); a block
  // device has none the driver can see.
  bool reports_allocation() const override { return !features_.block_device; }
  Result<std::vector<Extent>> allocation(uint64_t offset, uint64_t length, size_t max_extents) override;
  // ZERO_RANGE on a file only marks extents unwritten. On a block device
  // the kernel may fall back to writing zeroes, so it is not cheap there.
  bool write_zeroes_is_cheap() const override { return features_.zero_range && !features_.block_device; }

  const UringParams& params() const { return params_; }
  const Features& features() const { return features_; }
  // Registers the regions with every ring (io_uring_register_buffers); on
  // a ring's failure the rings registered so far are unregistered again.
  Status register_buffers(const iovec* regions, size_t count) override;
  // The sums of every ring's counts. Any thread.
  SqeCounts sqe_counts();
  int fd() const { return fd_; }

  UringQueue* alloc_queue(HwCtx* hctx, unsigned idx);
  void free_queue(UringQueue* uq);

 private:
  explicit UringDevice(const UringParams& p) : params_(p) {}
  Status open_file();
  Status check_direct_alignment();
  void probe_features();
  QueueConfig queue_config();
  Status setup();

  UringParams params_;
  int fd_ = -1;
  uint64_t size_ = 0;
  unsigned index_ = 0;
  bool dev_write_cache_ = true;
  bool rotational_ = false;
  uint32_t dma_mask_ = 0;  // O_DIRECT memory alignment - 1 (direct=1 only)
  dev_t rdev_ = 0;
  Features features_;
  std::unique_ptr<TagSet> tag_set_;
  std::unique_ptr<Queue> queue_;
  std::mutex queues_mu_;
  std::vector<std::unique_ptr<UringQueue>> queues_;
  std::vector<iovec> buffers_;  // register_buffers' regions (under queues_mu_)
};

extern const DriverOps kUringOps;

// uring_wait.cc. Whether IORING_OP_FUTEX_WAIT works on this kernel.
bool probe_futex_wait(io_uring* ring);
// True (and the wait it armed is marked done) for a futex wait's CQE.
bool consume_futex_cqe(uint64_t user_data);

}  // namespace blkmq::uring
