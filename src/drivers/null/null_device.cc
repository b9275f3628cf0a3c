// The null device: parameters to tag set and queue, the process-wide shared
// tag set, the bandwidth tick, and registration as driver "null".
#include <algorithm>
#include <mutex>

#include <cstdio>

#include "base/clock.h"
#include "base/parse.h"
#include "base/registry.h"
#include "blkmq/driver/context.h"
#include "blkmq/driver/device_driver.h"
#include "drivers/index_alloc.h"
#include "drivers/null/null_dev.h"

namespace blkmq::nullb {
namespace {

// A literal, not a std::string: registration may run before this file's
// dynamic initializers (the registry's first use from a static initializer).
constexpr const char* kDriverName = "null";
// null_blk's tag set timeout.
constexpr unsigned kNullTimeoutMs = 5000;
// Discard without a size limit of our own (null_blk: UINT_MAX >> 9).
constexpr uint32_t kMaxDiscardSectors = UINT32_MAX >> kSectorShift;

// Device names nullb0, nullb1, ...: the lowest free index, as null_blk's ida.
IndexAllocator g_indexes;

// The set every shared_tags=1 device uses. Built from the first such
// device's parameters (null_blk builds it from the module parameters);
// freed when the last device on it goes.
std::mutex g_shared_mu;
std::weak_ptr<NullSet> g_shared_set;

Result<std::shared_ptr<NullSet>> acquire_shared_set(const NullParams& p) {
  std::lock_guard lk(g_shared_mu);
  if (auto set = g_shared_set.lock()) {
    std::string why;
    if (!set->compatible(p, &why)) {
      return Status::invalid("null: shared_tags: " + why +
                             "; devices sharing tags must agree on submit_queues, poll_queues, "
                             "hw_queue_depth, blocking (memory_backed forces it), "
                             "shared_tag_bitmap and no_sched");
    }
    return set;
  }
  auto set = NullSet::create(p);
  if (set) g_shared_set = *set;
  return set;
}

}  // namespace

// ---- NullSet ----

Result<std::shared_ptr<NullSet>> NullSet::create(const NullParams& p) {
  std::shared_ptr<NullSet> set(new NullSet(p));
  TagSetConfig cfg;
  cfg.ops = &kNullOps;
  cfg.driver_data = set.get();
  cfg.nr_queues[static_cast<unsigned>(HctxType::dflt)] = p.submit_queues;
  cfg.nr_queues[static_cast<unsigned>(HctxType::read)] = 0;
  cfg.nr_queues[static_cast<unsigned>(HctxType::poll)] = p.poll_queues;
  cfg.queue_depth = p.hw_queue_depth;
  cfg.cmd_size = (sizeof(NullCmd) + 15) & ~size_t{15};
  cfg.timeout_ms = kNullTimeoutMs;
  cfg.flags = p.tag_set_flags();
  auto ts = TagSet::create(cfg);
  if (!ts) return Status::error(ts.status().code(), "null: " + ts.status().message());
  set->tag_set_ = std::move(*ts);
  return set;
}

NullSet::~NullSet() {
  // Explicit order: the tag set's requests hold timers bound to the thread.
  tag_set_.reset();
  timer_thread_.reset();
}

void NullSet::ensure_timer_thread() {
  // Completions run there as if from an interrupt: the callbacks enter
  // HardirqScope themselves, so the thread is a plain one.
  if (!timer_thread_) timer_thread_ = std::make_unique<base::TimerThread>("null-timer");
}

bool NullSet::compatible(const NullParams& p, std::string* why) const {
  auto differs = [&](const char* name, uint64_t mine, uint64_t theirs) {
    *why = std::string("this device's ") + name + "=" + std::to_string(theirs) +
           " differs from the shared tag set's " + std::to_string(mine);
    return false;
  };
  if (p.submit_queues != params_.submit_queues)
    return differs("submit_queues", params_.submit_queues, p.submit_queues);
  if (p.poll_queues != params_.poll_queues)
    return differs("poll_queues", params_.poll_queues, p.poll_queues);
  if (p.hw_queue_depth != params_.hw_queue_depth)
    return differs("hw_queue_depth", params_.hw_queue_depth, p.hw_queue_depth);
  if (p.blocking != params_.blocking) return differs("blocking", params_.blocking, p.blocking);
  if (p.shared_tag_bitmap != params_.shared_tag_bitmap)
    return differs("shared_tag_bitmap", params_.shared_tag_bitmap, p.shared_tag_bitmap);
  if (p.no_sched != params_.no_sched) return differs("no_sched", params_.no_sched, p.no_sched);
  return true;
}

// ---- NullDevice ----

NullDevice::NullDevice(const NullParams& p) : params_(p) {
  timeout_fault_.configure(p.timeout_inject);
  requeue_fault_.configure(p.requeue);
  init_hctx_fault_.configure(p.init_hctx);
  if (p.memory_backed) store_ = std::make_unique<PageStore>(p.size_bytes(), p.cache_size_mib * kMiB);
  if (p.mbps) bw_ = std::make_unique<BwBudget>(p.mbps);
  index_ = g_indexes.alloc();
}

NullDevice::~NullDevice() {
  if (bw_) {
    // Requests held back by the cap must drain: lift it and restart the
    // queues before the tick goes away (queue_rq rechecks the budget after
    // stopping, so none can stay stopped).
    bw_->disable();
    if (queue_) start_stopped_hw_queues(queue_.get(), true);
  }
  if (bw_timer_) {
    // Pairs with bw_tick's read before it re-arms: a tick that missed
    // this store re-armed already, and the second cancel_sync takes it.
    bw_stop_.store(true, std::memory_order_seq_cst);
    // A tick that was running may have re-armed before it saw bw_stop_;
    // the second cancel catches that one.
    bw_timer_->cancel_sync();
    bw_timer_->cancel_sync();
    bw_timer_.reset();
  }
  queue_.reset();
  {
    // exit_hctx normally freed these; anything left is ours.
    std::lock_guard lk(queues_mu_);
    queues_.clear();
  }
  set_.reset();
  g_indexes.free(index_);
}

const std::string& NullDevice::driver_name() const {
  static const std::string name = kDriverName;
  return name;
}

Result<std::vector<Extent>> NullDevice::allocation(uint64_t offset, uint64_t length, size_t max_extents) {
  if (!store_) return Device::allocation(offset, length, max_extents);
  if (offset % params_.bs || length % params_.bs) {
    return Status::invalid("null: allocation query not aligned to bs=" + std::to_string(params_.bs));
  }
  // Units of a whole block and a whole page, so every extent is a multiple
  // of the block size (bs is a power of two).
  const uint32_t granule = std::max<uint32_t>(params_.bs, PageStore::kPageSize);
  return store_->allocation(offset, length, granule, max_extents);
}

NullQueue* NullDevice::alloc_queue(HwCtx* hctx, NullSet* set) {
  auto nq = std::unique_ptr<NullQueue>(new (std::nothrow) NullQueue);
  if (!nq) return nullptr;
  nq->dev = this;
  nq->irqmode = params_.irqmode;
  nq->completion_nsec = params_.completion_nsec;
  nq->timer_thread = set->timer_thread();
  if (params_.io_faults()) nq->slow |= NullQueue::kSlowFaults;
  if (bw_) nq->slow |= NullQueue::kSlowThrottle;
  if (store_) nq->slow |= NullQueue::kSlowMemory;
  if (zones_) nq->slow |= NullQueue::kSlowZoned;
  if (hctx->type == HctxType::poll) nq->slow |= NullQueue::kSlowPoll;
  NullQueue* raw = nq.get();
  std::lock_guard lk(queues_mu_);
  queues_.push_back(std::move(nq));
  return raw;
}

void NullDevice::free_queue(NullQueue* nq) {
  std::lock_guard lk(queues_mu_);
  for (auto it = queues_.begin(); it != queues_.end(); ++it) {
    if (it->get() == nq) {
      queues_.erase(it);
      return;
    }
  }
}

QueueConfig NullDevice::queue_config() {
  QueueConfig cfg;
  cfg.name = "nullb" + std::to_string(index_);
  QueueLimits& lim = cfg.limits;
  lim.logical_block_size = params_.bs;
  lim.physical_block_size = params_.bs;
  lim.max_hw_sectors = params_.max_sectors;
  lim.max_sectors = params_.max_sectors;
  lim.capacity_sectors = params_.size_bytes() >> kSectorShift;
  lim.write_cache = store_ && store_->has_cache();
  lim.fua = lim.write_cache && params_.fua;
  lim.max_discard_sectors = params_.discard ? kMaxDiscardSectors : 0;
  lim.rotational = params_.rotational;
  lim.poll = params_.poll_queues > 0;
  if (zones_) {
    const ZonedConfig& z = zones_->config();
    lim.zoned = true;
    lim.chunk_sectors = static_cast<uint32_t>(z.zone_size_sectors);
    // As null_blk: native append up to the parameter, within a zone and a
    // request; 0 leaves it to the core's emulation.
    lim.max_zone_append_sectors = static_cast<uint32_t>(
        std::min<uint64_t>({params_.zone_append_max_sectors, z.zone_size_sectors, params_.max_sectors}));
    lim.max_open_zones = z.max_open;
    lim.max_active_zones = z.max_active;
    cfg.report_zones = [this](uint64_t sector, unsigned max) -> Result<std::vector<Zone>> {
      if (sector >= zones_->config().capacity_sectors) return Status::invalid("null: report past the end");
      return zones_->report(sector, max);
    };
  }
  cfg.queuedata = this;
  cfg.driver_attrs = driver_attrs();
  return cfg;
}

uint64_t NullDevice::power_cut() {
  power_cuts_.fetch_add(1, std::memory_order_relaxed);
  return store_ ? store_->power_cut() : 0;
}

// Only a memory-backed device has data to lose. The queue dies before the
// device, so capturing `this` is safe.
std::vector<DriverAttr> NullDevice::driver_attrs() {
  std::vector<DriverAttr> v;
  if (zones_) add_zone_attrs(&v);
  if (!store_) return v;
  v.push_back({"device/power_cut",
               [this]() -> Result<std::string> { return std::to_string(power_cuts_.load()); },
               [this](std::string_view val) -> Status {
                 if (val != "1") return Status::invalid("device/power_cut: write 1 to cut the power, got '" +
                                                        std::string(val) + "'");
                 power_cut();
                 return Status::OK();
               }});
  v.push_back({"device/cache_pages",
               [this]() -> Result<std::string> { return std::to_string(store_->cached_pages()); }, nullptr});
  return v;
}

// null_blk's configfs zone_readonly and zone_offline: writing a sector
// makes its zone read-only or offline (or empty again, asked twice).
void NullDevice::add_zone_attrs(std::vector<DriverAttr>* v) {
  auto fault = [this](const char* name, ZoneCond cond) {
    return DriverAttr{std::string("device/") + name, nullptr, [this, name, cond](std::string_view val) -> Status {
                        uint64_t sector = 0;
                        auto r = base::parse_uint(std::string("device/") + name, val, 0, UINT64_MAX);
                        if (!r) return r.status();
                        sector = *r;
                        PageStore* st = store_.get();
                        return zones_->set_condition(sector, cond, [st](uint64_t s, uint64_t n) {
                          if (st) st->discard(s << kSectorShift, n << kSectorShift);
                        });
                      }};
  };
  v->push_back(fault("zone_readonly", ZoneCond::readonly));
  v->push_back(fault("zone_offline", ZoneCond::offline));
}

Status NullDevice::setup_zones() {
  if (!params_.zoned) return Status::OK();
  // chunk_sectors is 32 bits: zones up to 1 TiB.
  if (params_.zone_size_mib > (uint64_t{1} << 20))
    return Status::invalid("null: zone_size " + std::to_string(params_.zone_size_mib) + " MiB is above 1 TiB");
  constexpr uint64_t kSectorsPerMib = kMiB >> kSectorShift;
  ZonedConfig c;
  c.capacity_sectors = params_.size_bytes() >> kSectorShift;
  c.zone_size_sectors = params_.zone_size_mib * kSectorsPerMib;
  c.zone_capacity_sectors = params_.zone_capacity_mib * kSectorsPerMib;
  c.nr_conv = params_.zone_nr_conv;
  c.max_open = params_.zone_max_open;
  c.max_active = params_.zone_max_active;
  c.full = params_.zone_full;
  std::vector<std::string> notes;
  auto t = ZoneTable::create(c, &notes);
  if (!t) return t.status();
  // null_blk says these in the kernel log; here they go to stderr.
  for (const std::string& n : notes) std::fprintf(stderr, "null: %s\n", n.c_str());
  zones_ = std::move(*t);
  return Status::OK();
}

Status NullDevice::setup(std::shared_ptr<NullSet> set) {
  if (Status st = setup_zones(); !st) return st;
  set_ = std::move(set);
  {
    std::lock_guard lk(set_->mu());
    if (params_.irqmode == IrqMode::timer || bw_) set_->ensure_timer_thread();
    set_->set_creating(this);
    auto q = Queue::create(set_->tag_set(), queue_config());
    set_->set_creating(nullptr);
    if (!q) return Status::error(q.status().code(), "null: " + q.status().message());
    queue_ = std::move(*q);
  }
  if (bw_) {
    bw_timer_ = std::make_unique<base::Timer>();
    bw_timer_->init(set_->timer_thread(), [this] { bw_tick(); });
    bw_next_ns_ = base::now_ns() + BwBudget::kTickNs;
    bw_timer_->arm_at(bw_next_ns_);
  }
  return Status::OK();
}

void NullDevice::bw_tick() {
  {
    // null_blk's bandwidth timer is an hrtimer: hardirq context.
    HardirqScope irq;
    if (bw_->refill() && bw_->take_throttled()) start_stopped_hw_queues(queue_.get(), true);
  }
  if (bw_stop_.load(std::memory_order_seq_cst)) return;  // pairs with the teardown's store
  // A fixed cadence, not "20 ms after this one ran", so the rate does not
  // drift with timer latency.
  bw_next_ns_ += BwBudget::kTickNs;
  uint64_t now = base::now_ns();
  if (bw_next_ns_ < now) bw_next_ns_ = now + BwBudget::kTickNs;
  bw_timer_->arm_at(bw_next_ns_);
}

Result<std::unique_ptr<Device>> NullDevice::create(const ParamMap& params) {
  auto parsed = parse_null_params(params);
  if (!parsed) return parsed.status();
  NullParams p = *parsed;
  // As null_blk: more hw queues than CPUs is never useful.
  const unsigned cpus = nr_cpu_ids();
  if (p.submit_queues > cpus) p.submit_queues = cpus;
  if (p.poll_queues > cpus) p.poll_queues = cpus;

  auto set = p.shared_tags ? acquire_shared_set(p) : NullSet::create(p);
  if (!set) return set.status();
  std::unique_ptr<NullDevice> dev(new NullDevice(p));
  if (Status st = dev->setup(std::move(*set)); !st) return st;
  return std::unique_ptr<Device>(std::move(dev));
}

}  // namespace blkmq::nullb

// The driver, listed by the table CMake generates from src/drivers' folders.
BLKMQ_BUILTIN(blkmq::DeviceDriver, driver, null, 0,
              {blkmq::nullb::kDriverName, &blkmq::nullb::NullDevice::create, blkmq::nullb::null_param_infos()});
