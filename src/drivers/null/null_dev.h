// The null device's internal structures, shared by the driver ops
// (null_ops.cc) and device setup (null_device.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/spinlock.h"
#include "base/timer.h"
#include "blkmq/device.h"
#include "blkmq/driver/driver.h"
#include "blkmq/driver/list.h"
#include "blkmq/queue.h"
#include "blkmq/driver/tagset.h"
#include "drivers/null/null_bw.h"
#include "drivers/null/null_fault.h"
#include "drivers/null/null_params.h"
#include "drivers/null/null_store.h"
#include "drivers/null/null_zoned.h"

namespace blkmq::nullb {

class NullDevice;

// The driver payload behind every Request (nullb_cmd). Constructed in place
// by init_request, destroyed by exit_request.
struct NullCmd {
  // irqmode=2 completion timer. Bound to the tag set's timer thread the
  // first time it is used, then only re-armed.
  base::Timer timer;
  // Status the deferred completion (timer, fake timeout) ends the request
  // with. Atomic because the timeout worker may overwrite it while the
  // timer thread reads it.
  std::atomic<BlkStatus> status{BlkStatus::ok};
  bool fake_timeout = false;  // timeout injection: started, never completed
  bool timer_bound = false;
};
static_assert(alignof(NullCmd) <= 16, "Request::pdu() is only 16-byte aligned");

extern const DriverOps kNullOps;

// A tag set and what must live exactly as long as it: the timer thread the
// commands' timers are bound to. Owned by one device, or with shared_tags
// by every device on it (refcounted through shared_ptr).
class NullSet {
 public:
  static Result<std::shared_ptr<NullSet>> create(const NullParams& p);
  ~NullSet();

  TagSet& tag_set() { return *tag_set_; }
  // Null until a device needs it (irqmode=2 or mbps); never goes away
  // before the set does. Call ensure_timer_thread() under mu().
  base::TimerThread* timer_thread() const { return timer_thread_.get(); }
  void ensure_timer_thread();
  // Whether a device with `p` may share this set; else *why says which
  // parameter differs.
  bool compatible(const NullParams& p, std::string* why) const;

  // Serializes device setup on this set (queue creation, timer thread).
  std::mutex& mu() { return mu_; }
  // The device whose queue is being created under mu(): init_hctx's
  // fallback if the core has not yet made queue_data() valid.
  NullDevice* creating() const { return creating_.load(std::memory_order_acquire); }
  void set_creating(NullDevice* d) { creating_.store(d, std::memory_order_release); }

 private:
  explicit NullSet(const NullParams& p) : params_(p) {}

  NullParams params_;  // the set-level ones: queues, depth, flags
  std::mutex mu_;
  std::atomic<NullDevice*> creating_{nullptr};
  // Declared before tag_set_ so it is destroyed after it: tearing the tag
  // set down destroys the commands' timers, which unlink from this thread.
  std::unique_ptr<base::TimerThread> timer_thread_;
  std::unique_ptr<TagSet> tag_set_;
};

// Per hw queue state (nullb_queue), hctx->driver_data. The hot fields come
// first and are read-only after init_hctx.
struct alignas(64) NullQueue {
  // Bits that send queue_rq off the fast path; 0 on the benchmark path.
  enum SlowBit : uint32_t {
    kSlowFaults = 1u << 0,    // timeout or requeue injection configured
    kSlowThrottle = 1u << 1,  // mbps
    kSlowMemory = 1u << 2,    // memory_backed
    kSlowPoll = 1u << 3,      // poll-type hctx
    kSlowZoned = 1u << 4,     // zoned: every write moves a write pointer
  };
  uint32_t slow = 0;
  IrqMode irqmode = IrqMode::none;
  uint64_t completion_nsec = 0;
  NullDevice* dev = nullptr;
  base::TimerThread* timer_thread = nullptr;

  std::atomic<unsigned> requeue_selection{0};  // requeue injection alternates on it
  alignas(64) base::SpinLock poll_lock;
  ListNode poll_list;  // started requests waiting for poll(), via queuelist
};

class NullDevice final : public Device {
 public:
  static Result<std::unique_ptr<Device>> create(const ParamMap& params);
  // Lifts throttling, destroys the queue (the core drains all I/O), stops
  // the bandwidth tick, then releases the tag set.
  ~NullDevice() override;

  Queue& queue() override { return *queue_; }
  const std::string& driver_name() const override;
  uint64_t size_bytes() const override { return params_.size_bytes(); }
  // Only the memory-backed device has a map: the page store's.
  bool reports_allocation() const override { return store_ != nullptr; }
  Result<std::vector<Extent>> allocation(uint64_t offset, uint64_t length, size_t max_extents) override;

  const NullParams& params() const { return params_; }
  PageStore* store() { return store_.get(); }
  // The zones of a zoned=1 device; null otherwise.
  ZoneTable* zones() { return zones_.get(); }
  BwBudget* bw() { return bw_.get(); }
  FaultAttr& timeout_fault() { return timeout_fault_; }
  FaultAttr& requeue_fault() { return requeue_fault_; }
  FaultAttr& init_hctx_fault() { return init_hctx_fault_; }
  // A power cut of the memory-backed device: its write-back cache is lost
  // (PageStore::power_cut), the durable pages stay; the device keeps
  // working, as after power comes back. What `device/power_cut` does when
  // 1 is written to it. Any thread, while I/O runs. Returns the 4 KiB
  // pages lost; 0 without memory backing or a cache.
  uint64_t power_cut();

  // init_hctx/exit_hctx: per-hctx state, owned by the device so nothing
  // leaks whatever the order of teardown.
  NullQueue* alloc_queue(HwCtx* hctx, NullSet* set);
  void free_queue(NullQueue* nq);

 private:
  explicit NullDevice(const NullParams& p);
  Status setup(std::shared_ptr<NullSet> set);
  QueueConfig queue_config();
  std::vector<DriverAttr> driver_attrs();
  void bw_tick();

  NullParams params_;
  int index_ = -1;
  FaultAttr timeout_fault_;
  FaultAttr requeue_fault_;
  FaultAttr init_hctx_fault_;
  std::unique_ptr<PageStore> store_;
  std::unique_ptr<ZoneTable> zones_;
  Status setup_zones();
  void add_zone_attrs(std::vector<DriverAttr>* v);
  std::atomic<uint64_t> power_cuts_{0};  // device/power_cut reads it
  std::unique_ptr<BwBudget> bw_;
  std::shared_ptr<NullSet> set_;
  std::unique_ptr<Queue> queue_;
  std::unique_ptr<base::Timer> bw_timer_;
  std::atomic<bool> bw_stop_{false};
  uint64_t bw_next_ns_ = 0;  // only the tick touches it
  std::mutex queues_mu_;
  std::vector<std::unique_ptr<NullQueue>> queues_;
};

}  // namespace blkmq::nullb
