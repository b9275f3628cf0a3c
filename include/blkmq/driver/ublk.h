// User-space block targets in the style of ublk/ublksrv: a user implements a
// UblkTarget; blkmq puts a full block queue (tags, merging, scheduler,
// accounting) in front of it and hands every request to the target on a
// per-hw-queue server thread ("ublk-srv/N").
//
// Request flow: the core dispatches a request to the driver (queue_rq), the
// driver pushes it onto its hw queue's ring and returns; the queue's server
// thread pops it and calls target->handle(io); the target calls
// io.complete() when done, from the server thread or from any thread of its
// own. The completion is then routed by the core as a completion from task
// context (queue/rq_affinity, queue/task_completion: seed 002): it runs
// inline in the completing thread, or on ksoftirqd, and the bios end there.
//
// The same driver is available by name: create_device("ublk", {{"target",
// "null"|"loop"}, ...}) with the built-in targets (see device_params("ublk")).
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/driver/request.h"
#include "blkmq/status.h"
#include "blkmq/zoned.h"

namespace blkmq {

// One request as a target sees it (ublksrv's ublk_io + its descriptor). It
// stays valid, at the same address, from handle() until the target calls
// complete(); the target must not touch it afterwards (the request is reused).
// The accessors are plain loads: call them from the thread that owns the I/O
// at that moment (handle()'s thread, or the thread it was passed to).
class UblkIo {
 public:
  UblkIo(const UblkIo&) = delete;
  UblkIo& operator=(const UblkIo&) = delete;

  // read, write, flush, discard or write_zeroes; on a zoned device
  // (UblkOptions::zoned) also zone_append and the zone management ops
  // (UBLK_IO_OP_ZONE_*), whose offset() is the zone's start.
  ReqOp op() const { return rq_->op; }
  // A zone append: the byte offset the target wrote its data at, set
  // before complete() (ublksrv's zone_append_lba); the bio's sector says
  // it when it ends. Ignored for other ops.
  void set_zone_append_offset(uint64_t offset) {
    if (rq_->op == ReqOp::zone_append) rq_->sector = offset >> kSectorShift;
  }
  // Byte offset on the device and length in bytes (the range for discard
  // and write_zeroes, 0 for flush). Multiples of the logical block size.
  uint64_t offset() const { return offset_; }
  uint32_t length() const { return length_; }
  // BioFlag bits of the request (kBioFua, kBioPreflush, kBioSync, ...).
  uint32_t flags() const { return rq_->cmd_flags; }
  // Forced unit access: the data must be durable when complete() is called.
  bool fua() const { return rq_->cmd_flags & kBioFua; }
  // Flush the device cache before writing this request's data.
  bool preflush() const { return rq_->cmd_flags & kBioPreflush; }
  // Index of the hw queue (and its server thread) the request came through.
  unsigned queue() const { return queue_; }
  // The underlying request, for targets that need more (ioprio, tag).
  Request* request() const { return rq_; }

  // Calls fn(void* base, size_t len, uint64_t offset_in_request) for every
  // data segment, in order (reads: fill them; writes: consume them). The
  // segments add up to length(). No allocation.
  template <typename Fn>
  void for_each_segment(Fn&& fn) const {
    rq_for_each_segment(rq_, fn);
  }
  // Number of data segments (a walk over the bio chain).
  unsigned nr_segments() const;

  // Ends the I/O. Any thread, exactly once per handle(). A second call
  // before the request is handed out again is a target bug that is ignored
  // (returns false); after that, the io belongs to another request.
  //   st == ok, bytes >= length(): success.
  //   st == ok, bytes <  length(): a short transfer. The first `bytes`
  //     (rounded down to the logical block size) complete successfully and
  //     the bios wholly inside them end ok; the rest of the request ends
  //     with BlkStatus::ioerr (as a SCSI residual; blkmq does not retry the
  //     remainder). bytes is ignored for flush/discard/write_zeroes.
  //   st != ok: the whole request ends with st (bytes ignored).
  //     `resource`/`dev_resource` are not completion statuses; they end the
  //     request with ioerr.
  // Cost: one atomic exchange plus the core's completion routing; it may
  // end bios inline (their end_io runs in the caller's thread).
  bool complete(BlkStatus st, uint32_t bytes);
  // Success with the whole length, or failure of the whole request.
  bool complete(BlkStatus st = BlkStatus::ok) {
    return complete(st, st == BlkStatus::ok ? length_ : 0);
  }

 protected:
  // Only the driver builds these, in each request's driver payload.
  UblkIo() = default;
  ~UblkIo() = default;

  Request* rq_ = nullptr;
  uint64_t offset_ = 0;
  uint32_t length_ = 0;
  unsigned queue_ = 0;
  uint32_t lbs_ = 512;          // logical block size, for short transfers
  uint32_t short_bytes_ = 0;    // good bytes of a short transfer
  bool short_ = false;          // complete() saw a short transfer
  std::atomic<uint8_t> completed_{0};
};

// What a user implements (ublksrv's target ops). One instance serves every
// hw queue of its device; handle() is called concurrently from the
// different queues' server threads (never concurrently for one queue).
class UblkTarget {
 public:
  virtual ~UblkTarget();

  // REQUIRED. Start one I/O. Runs on the server thread of io.queue(), task
  // context. Do the work inline and call io.complete(), or hand `io` to
  // another thread (or an asynchronous engine) that completes it later.
  // Must not block for long: the queue's next requests wait behind it.
  virtual void handle(UblkIo& io) = 0;

  // Optional. Called once on queue q's server thread before its first
  // request (per-queue setup: rings, buffers). A non-ok status fails
  // create_ublk_device() with that message.
  virtual Status init_queue([[maybe_unused]] unsigned q) { return Status::OK(); }
  // Optional. Called once on queue q's server thread after the queue was
  // torn down (every request of the device has completed).
  virtual void exit_queue([[maybe_unused]] unsigned q) {}

  // Optional. Called in the context where the core routed the completion
  // (the completing thread, or ksoftirqd/N with queue/task_completion=
  // softirq), just before the request's bios end; `io` is still valid.
  // For tracing and tests; must not block. Only called when
  // UblkOptions::completion_hook is set (it costs a virtual call per I/O).
  virtual void completed([[maybe_unused]] UblkIo& io) {}
  // REQUIRED for a zoned device (UblkOptions::zoned), else unused: up to
  // `max` zones from the one holding `sector`, in 512-byte sectors, as the
  // target's zones are now (UBLK_IO_OP_REPORT_ZONES). Called in the
  // asker's thread (the queue's creation, Queue::report_zones, a
  // resynchronization after a failed write), task context, while I/O may
  // run on the server threads: thread-safe; it may sleep. The kernel's ublk
  // sends the report through a hw queue instead. Default: EOPNOTSUPP.
  virtual Result<std::vector<Zone>> report_zones([[maybe_unused]] uint64_t sector, [[maybe_unused]] unsigned max) {
    return Status::error(EOPNOTSUPP, "ublk target: no zones");
  }
};

// Device options, with ublk's defaults where it has them.
struct UblkOptions {
  unsigned nr_hw_queues = 1;      // hw queues, one server thread each; 1..nr_cpu_ids()
  unsigned queue_depth = 128;     // driver tags per hw queue; 1..4096
  uint64_t size = 0;              // capacity in bytes; required, a multiple of lbs
  uint32_t logical_block_size = 512;  // power of two, 512..4096
  bool pin = false;               // pin server thread N to CPU N % nr_cpu_ids()
  // Scheduler at creation. "" = the ublk default: "mq-deadline" when it is
  // registered (registered_elevators()), for any number of hw queues (ublk
  // devices default to mq-deadline, seed 000), else "none". Any other value
  // is applied as queue/scheduler would be.
  std::string scheduler;
  bool write_cache = false;       // volatile cache: flush requests reach the target
  bool fua = false;               // native FUA (else the core emulates it with a flush)
  bool discard = false;           // discard and write_zeroes reach the target
  uint32_t max_sectors = 2560;    // max request size in 512 B sectors (1280 KiB)
  unsigned timeout_ms = 30000;    // the target owns a request: on timeout the timer is re-armed
  bool completion_hook = false;   // call UblkTarget::completed() (see there)
  // A host-managed zoned device (UBLK_F_ZONED with ublk_param_zoned): zone
  // ops and appends reach the target, which reports its zones
  // (UblkTarget::report_zones). zone_sectors: the zone size, a power of
  // two (required when zoned); the limits are 0 for none; a native append
  // limit of 0 has the core emulate appends with writes.
  bool zoned = false;
  uint32_t zone_sectors = 0;
  unsigned max_open_zones = 0;
  unsigned max_active_zones = 0;
  uint32_t max_zone_append_sectors = 0;
  std::string name;               // queue name; "" = "ublkbN", lowest free N
};

// Creates a ublk device serving `target` (ownership passes to the device).
// Starts one server thread per hw queue and runs init_queue() on each before
// returning. Bad options give an error naming the option and what is
// accepted. Task context; sleeps.
//
// Teardown (destroying the device): the queue is destroyed first (new bios
// fail, every bio in flight drains: the servers and the target keep running
// until each request was completed), then the servers run exit_queue() and
// stop, then the target is destroyed. A target that never completes an I/O
// therefore blocks teardown.
Result<std::unique_ptr<Device>> create_ublk_device(std::unique_ptr<UblkTarget> target,
                                                   const UblkOptions& opts);

// The target of a device made by create_ublk_device() or create_device(
// "ublk"), or nullptr for a device of another driver. Valid as long as the
// device.
UblkTarget* ublk_target(Device& dev);

}  // namespace blkmq
