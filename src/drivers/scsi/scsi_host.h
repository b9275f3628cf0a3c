// A SCSI-style host adapter (Scsi_Host analogue) and its logical units
// (scsi_device analogues). The host owns ONE tag set of can_queue tags that
// every LUN's request queue shares, so the core's fair tag sharing applies
// between LUNs; each LUN limits its own commands in flight to queue_depth
// through the dispatch budget (get_budget/put_budget), as scsi-mq does.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "blkmq/queue.h"
#include "blkmq/status.h"
#include "blkmq/driver/tagset.h"

namespace blkmq::nullb {
class PageStore;
}

namespace blkmq::scsi {

class ScsiIrq;
class ScsiHost;

constexpr unsigned kMaxLuns = 256;
constexpr unsigned kMaxHwQueues = 4096;
constexpr uint64_t kMaxLatencyUs = 10ull * 1000 * 1000;  // 10 s
constexpr uint64_t kMaxLunSize = 1ull << 52;             // 4 PiB
// How long a LUN whose budget ran out with nothing in flight waits before
// its queue is rerun (SCSI_QUEUE_DELAY).
constexpr unsigned kBudgetRetryMs = 3;

enum class ScsiBacking : uint8_t {
  null,    // no data: reads leave the buffer alone, writes are dropped
  memory,  // sparse 4 KiB pages; never written bytes read as zeros
};

// Host-wide settings. Field names match the create_device() parameters.
struct ScsiHostConfig {
  unsigned can_queue = 64;     // host tags: per hw queue, or shared with host_tagset
  unsigned nr_hw_queues = 1;   // clamped to the number of CPUs
  uint64_t latency_us = 0;     // 0: complete inline in queue_rq; else from the irq thread
  bool no_sched = false;       // kTagSetNoSched: no I/O scheduler (seed 001)
  bool host_tagset = false;    // kTagSetSharedTags: one tag space for all hw queues
  bool blocking = false;       // kTagSetBlocking; required by memory-backed LUNs
};

// Per-LUN settings.
struct ScsiLunConfig {
  unsigned queue_depth = 32;   // commands in flight on this LUN (device budget)
  ScsiBacking backing = ScsiBacking::null;
  uint64_t size = 250ull << 30;  // bytes, a multiple of bs
  unsigned bs = 512;           // logical block size: power of two in 512..4096
};

// Checks a config; the message names the offending parameter and its range.
Status validate(const ScsiHostConfig& c);
Status validate(const ScsiLunConfig& c);

// One logical unit: a request queue plus its device budget and counters.
// The counters are exact (atomics) and may be read from any thread.
class ScsiLun {
 public:
  ~ScsiLun();
  Queue& queue() { return *queue_; }
  ScsiHost& host() const { return *host_; }
  unsigned lun_id() const { return id_; }
  const ScsiLunConfig& config() const { return cfg_; }
  uint64_t size_bytes() const { return cfg_.size; }

  unsigned queue_depth() const { return depth_.load(std::memory_order_relaxed); }
  // Changes the depth at run time (sysfs device/queue_depth); 1..10240.
  Status set_queue_depth(unsigned depth);

  // Budgets held: from get_budget until the command completes or the core
  // hands the budget back (device_busy).
  unsigned device_busy() const { return device_busy_.load(std::memory_order_relaxed); }
  unsigned max_device_busy() const { return max_device_busy_.load(std::memory_order_relaxed); }
  // Commands inside the driver: from queue_rq until completion.
  unsigned inflight() const { return inflight_.load(std::memory_order_relaxed); }
  unsigned max_inflight() const { return max_inflight_.load(std::memory_order_relaxed); }
  uint64_t dispatched() const { return dispatched_.load(std::memory_order_relaxed); }
  uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  uint64_t budget_denied() const { return budget_denied_.load(std::memory_order_relaxed); }
  // Completions whose ops.complete ran in interrupt context.
  uint64_t irq_completions() const { return irq_completions_.load(std::memory_order_relaxed); }
  // Restarts the high-water marks (e.g. once a test's load is in place).
  void reset_max();

  // ---- for the driver ops (scsi_ops.cc) ----
  // q is this LUN's queue (the hooks get it from the core: queue_ is
  // already cleared while the queue drains in teardown).
  bool get_budget(Queue* q);
  void put_budget();
  // A command entered queue_rq: counts it and moves its data.
  BlkStatus issue(Request* rq);
  // A command completed: counters, budget, and the queue rerun a denied
  // budget asked for. Runs before the request ends (the queue may go then).
  void finish(Request* rq);

 private:
  friend class ScsiHost;
  ScsiLun(ScsiHost* host, unsigned id, const ScsiLunConfig& cfg);
  BlkStatus transfer(Request* rq);
  static void bump_max(std::atomic<unsigned>& max, unsigned v);

  ScsiHost* host_;
  unsigned id_;
  ScsiLunConfig cfg_;
  int name_index_ = -1;
  std::unique_ptr<nullb::PageStore> store_;
  std::unique_ptr<Queue> queue_;
  std::atomic<unsigned> depth_;
  // Written by every dispatcher and completer: a line of their own.
  alignas(64) std::atomic<unsigned> device_busy_{0};
  // Denied budgets since the last completion (scsi_device::restarts).
  std::atomic<unsigned> restarts_{0};
  std::atomic<unsigned> inflight_{0};
  alignas(64) std::atomic<unsigned> max_device_busy_{0};
  std::atomic<unsigned> max_inflight_{0};
  std::atomic<uint64_t> dispatched_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> budget_denied_{0};
  std::atomic<uint64_t> irq_completions_{0};
};

// The host. create/add_lun/destruction from task context. lun() and the
// counters from any thread; add_lun is safe while other LUNs do I/O.
class ScsiHost {
 public:
  static Result<std::unique_ptr<ScsiHost>> create(const ScsiHostConfig& cfg);
  // Teardown order: every LUN queue (the core drains its I/O, completions
  // still arriving from the irq thread), then the irq thread, then the tag
  // set that the queues were using.
  ~ScsiHost();

  // Adds a LUN with its own request queue on the host's tag set.
  Result<ScsiLun*> add_lun(const ScsiLunConfig& cfg);
  unsigned nr_luns() const { return nr_luns_.load(std::memory_order_acquire); }
  ScsiLun& lun(unsigned i) { return *luns_[i]; }  // i < nr_luns()

  const ScsiHostConfig& config() const { return cfg_; }
  unsigned host_no() const { return host_no_; }
  TagSet& tag_set() { return *tag_set_; }
  // Commands inside the driver across all LUNs (host_busy) and its maximum.
  unsigned host_busy() const { return host_busy_.load(std::memory_order_relaxed); }
  unsigned max_host_busy() const { return max_host_busy_.load(std::memory_order_relaxed); }
  void reset_max();

  // ---- for the driver ops ----
  uint64_t latency_ns() const { return latency_ns_; }
  ScsiIrq* irq() const { return irq_.get(); }
  void cmd_started();
  void cmd_done() { host_busy_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  explicit ScsiHost(const ScsiHostConfig& cfg);
  uint32_t tag_set_flags() const;

  ScsiHostConfig cfg_;
  unsigned host_no_;
  uint64_t latency_ns_;
  std::unique_ptr<TagSet> tag_set_;
  std::unique_ptr<ScsiIrq> irq_;
  std::mutex add_mu_;  // serializes add_lun
  std::array<std::unique_ptr<ScsiLun>, kMaxLuns> luns_;
  std::atomic<unsigned> nr_luns_{0};
  alignas(64) std::atomic<unsigned> host_busy_{0};
  std::atomic<unsigned> max_host_busy_{0};
};

}  // namespace blkmq::scsi
