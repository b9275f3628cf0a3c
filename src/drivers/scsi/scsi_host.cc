// Host and LUN setup, teardown, the device budget and the counters.
#include "drivers/scsi/scsi_host.h"

#include <algorithm>

#include "blkmq/driver/context.h"
#include "blkmq/driver/driver.h"
#include "drivers/index_alloc.h"
#include "drivers/null/null_store.h"
#include "drivers/scsi/scsi_irq.h"
#include "drivers/scsi/scsi_ops.h"

namespace blkmq::scsi {
namespace {

// The tag set's command timeout (the sd driver's default, 30 s).
constexpr unsigned kScsiTimeoutMs = 30000;

std::atomic<unsigned> g_next_host_no{0};

// Disk names sda..sdz, sdaa..: the lowest free index, as sd's ida.
IndexAllocator g_name_indexes;

// sd_format_disk_name: base-26 with letters, where "z" is followed by "aa".
std::string disk_name(int index) {
  std::string s;
  for (int i = index + 1; i > 0; i = (i - 1) / 26) s.insert(s.begin(), char('a' + (i - 1) % 26));
  return "sd" + s;
}

Status range_error(const char* name, const std::string& accepted, uint64_t got) {
  return Status::invalid(std::string("scsi: parameter '") + name + "' must be " + accepted +
                         "; got " + std::to_string(got));
}

}  // namespace

Status validate(const ScsiHostConfig& c) {
  if (c.can_queue < 1 || c.can_queue > kMaxQueueDepth)
    return range_error("can_queue", "in 1.." + std::to_string(kMaxQueueDepth), c.can_queue);
  if (c.nr_hw_queues < 1 || c.nr_hw_queues > kMaxHwQueues)
    return range_error("nr_hw_queues", "in 1.." + std::to_string(kMaxHwQueues), c.nr_hw_queues);
  if (c.latency_us > kMaxLatencyUs)
    return range_error("latency_us", "in 0.." + std::to_string(kMaxLatencyUs), c.latency_us);
  return Status::OK();
}

Status validate(const ScsiLunConfig& c) {
  if (c.queue_depth < 1 || c.queue_depth > kMaxQueueDepth)
    return range_error("queue_depth", "in 1.." + std::to_string(kMaxQueueDepth), c.queue_depth);
  if (c.bs < 512 || c.bs > 4096 || (c.bs & (c.bs - 1)))
    return range_error("bs", "a power of two in 512..4096", c.bs);
  if (c.size < c.bs || c.size > kMaxLunSize || c.size % c.bs)
    return range_error("size", "a multiple of bs (" + std::to_string(c.bs) + ") in " +
                                   std::to_string(c.bs) + ".." + std::to_string(kMaxLunSize),
                       c.size);
  return Status::OK();
}

// ---- ScsiLun ----

ScsiLun::ScsiLun(ScsiHost* host, unsigned id, const ScsiLunConfig& cfg)
    : host_(host), id_(id), cfg_(cfg), depth_(cfg.queue_depth) {
  if (cfg_.backing == ScsiBacking::memory) store_ = std::make_unique<nullb::PageStore>(cfg_.size, 0);
  name_index_ = g_name_indexes.alloc();
}

ScsiLun::~ScsiLun() {
  queue_.reset();
  g_name_indexes.free(name_index_);
}

Status ScsiLun::set_queue_depth(unsigned depth) {
  if (depth < 1 || depth > kMaxQueueDepth)
    return range_error("queue_depth", "in 1.." + std::to_string(kMaxQueueDepth), depth);
  const unsigned old = depth_.exchange(depth);
  // Commands held back by the old depth may go now.
  if (depth > old) run_hw_queues(queue_.get(), true);
  return Status::OK();
}

void ScsiLun::bump_max(std::atomic<unsigned>& max, unsigned v) {
  unsigned m = max.load(std::memory_order_relaxed);
  while (v > m && !max.compare_exchange_weak(m, v, std::memory_order_relaxed)) {
  }
}

void ScsiLun::reset_max() {
  max_device_busy_.store(device_busy(), std::memory_order_relaxed);
  max_inflight_.store(inflight(), std::memory_order_relaxed);
}

bool ScsiLun::get_budget(Queue* q) {
  const unsigned depth = depth_.load(std::memory_order_relaxed);
  unsigned busy = device_busy_.load(std::memory_order_relaxed);
  // A CAS rather than add-then-undo: an undone add would make concurrent
  // callers see a full device that is not.
  while (busy < depth) {
    if (device_busy_.compare_exchange_weak(busy, busy + 1, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
      bump_max(max_device_busy_, busy + 1);
      return true;
    }
  }
  budget_denied_.fetch_add(1, std::memory_order_relaxed);
  // Ask the next completion for a rerun. Pairs with scsi_host.cc:
  // ScsiLun::finish (device_busy_ dropped by put_budget, then restarts_
  // read): either it sees this increment and reruns, or we see its
  // decrement below (scsi_mq_get_budget's smp_mb__after_atomic; the
  // completion side is scsi_run_queue_async's).
  restarts_.fetch_add(1, std::memory_order_seq_cst);
  // Nothing in flight means no completion will come to rerun the queue.
  // (The read half of the pairing above.)
  if (device_busy_.load(std::memory_order_seq_cst) == 0)
    delay_run_hw_queues(q, kBudgetRetryMs);
  return false;
}

// seq_cst: the first half of finish()'s side of the pairing with
// ScsiLun::get_budget (see there); a budget returned for a request never
// issued needs only the count.
void ScsiLun::put_budget() { device_busy_.fetch_sub(1, std::memory_order_seq_cst); }

BlkStatus ScsiLun::issue(Request* rq) {
  dispatched_.fetch_add(1, std::memory_order_relaxed);
  bump_max(max_inflight_, inflight_.fetch_add(1, std::memory_order_relaxed) + 1);
  host_->cmd_started();
  return store_ ? transfer(rq) : BlkStatus::ok;
}

void ScsiLun::finish(Request* rq) {
  if (in_interrupt()) irq_completions_.fetch_add(1, std::memory_order_relaxed);
  completed_.fetch_add(1, std::memory_order_relaxed);
  inflight_.fetch_sub(1, std::memory_order_relaxed);
  host_->cmd_done();
  put_budget();
  // Only a LUN that turned a dispatch away needs a rerun (scsi's
  // "restarts"): an unconditional one would cost a kblockd run per I/O.
  // After put_budget's decrement: pairs with ScsiLun::get_budget's
  // increment of restarts_ and read of device_busy_.
  unsigned old = restarts_.load(std::memory_order_seq_cst);
  if (old && restarts_.compare_exchange_strong(old, 0)) run_hw_queues(rq->q, true);
}

BlkStatus ScsiLun::transfer(Request* rq) {
  const uint64_t off = rq->sector << kSectorShift;
  switch (rq->op) {
    case ReqOp::read:
    case ReqOp::write:
      break;
    case ReqOp::flush:
      return BlkStatus::ok;  // write-through: nothing is ever cached
    default:
      return BlkStatus::notsupp;
  }
  // The core checks capacity; this only guards against a core bug.
  if (off > cfg_.size || rq->data_len > cfg_.size - off) return BlkStatus::inval;
  return store_->transfer(rq, off);  // no cache: FUA changes nothing
}

// ---- ScsiHost ----

ScsiHost::ScsiHost(const ScsiHostConfig& cfg)
    : cfg_(cfg), host_no_(g_next_host_no.fetch_add(1)), latency_ns_(cfg.latency_us * 1000) {}

ScsiHost::~ScsiHost() {
  // Queues first: their drain needs completions from the irq thread.
  for (unsigned i = nr_luns(); i-- > 0;) luns_[i]->queue_.reset();
  irq_.reset();
  for (auto& lun : luns_) lun.reset();
  tag_set_.reset();
}

uint32_t ScsiHost::tag_set_flags() const {
  uint32_t f = 0;
  if (cfg_.no_sched) f |= kTagSetNoSched;
  if (cfg_.host_tagset) f |= kTagSetSharedTags;
  if (cfg_.blocking) f |= kTagSetBlocking;
  return f;
}

Result<std::unique_ptr<ScsiHost>> ScsiHost::create(const ScsiHostConfig& cfg) {
  if (Status st = validate(cfg); !st) return st;
  ScsiHostConfig c = cfg;
  // The core maps CPUs to hw queues; more queues than CPUs would sit idle.
  c.nr_hw_queues = std::min(c.nr_hw_queues, nr_cpu_ids());
  std::unique_ptr<ScsiHost> host(new ScsiHost(c));
  TagSetConfig tc;
  tc.ops = &kScsiOps;
  tc.driver_data = host.get();
  tc.nr_queues[static_cast<unsigned>(HctxType::dflt)] = c.nr_hw_queues;
  tc.queue_depth = c.can_queue;
  tc.cmd_size = (sizeof(ScsiCmd) + 15) & ~size_t{15};
  tc.timeout_ms = kScsiTimeoutMs;
  tc.flags = host->tag_set_flags();
  auto ts = TagSet::create(tc);
  if (!ts) return Status::error(ts.status().code(), "scsi: " + ts.status().message());
  host->tag_set_ = std::move(*ts);
  if (host->latency_ns_) host->irq_ = std::make_unique<ScsiIrq>(host->host_no_, host->latency_ns_);
  return Result<std::unique_ptr<ScsiHost>>(std::move(host));
}

Result<ScsiLun*> ScsiHost::add_lun(const ScsiLunConfig& cfg) {
  if (Status st = validate(cfg); !st) return st;
  if (cfg.backing == ScsiBacking::memory && !cfg_.blocking)
    return Status::invalid("scsi: a memory-backed LUN needs a blocking host "
                           "(ScsiHostConfig::blocking; backing=memory sets it)");
  std::lock_guard lk(add_mu_);
  const unsigned id = nr_luns_.load(std::memory_order_relaxed);
  if (id >= kMaxLuns) return Status::invalid("scsi: a host has at most " + std::to_string(kMaxLuns) + " LUNs");
  std::unique_ptr<ScsiLun> lun(new ScsiLun(this, id, cfg));
  QueueConfig qc;
  qc.name = disk_name(lun->name_index_);
  qc.limits.logical_block_size = cfg.bs;
  qc.limits.physical_block_size = cfg.bs;
  qc.limits.capacity_sectors = cfg.size >> kSectorShift;
  qc.queuedata = lun.get();
  auto q = Queue::create(*tag_set_, qc);
  if (!q) return Status::error(q.status().code(), "scsi: " + q.status().message());
  lun->queue_ = std::move(*q);
  luns_[id] = std::move(lun);
  nr_luns_.store(id + 1, std::memory_order_release);
  return luns_[id].get();
}

void ScsiHost::cmd_started() {
  ScsiLun::bump_max(max_host_busy_, host_busy_.fetch_add(1, std::memory_order_relaxed) + 1);
}

void ScsiHost::reset_max() { max_host_busy_.store(host_busy(), std::memory_order_relaxed); }

}  // namespace blkmq::scsi
