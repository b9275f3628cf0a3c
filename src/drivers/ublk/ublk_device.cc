// The ublk device: options to tag set and queue, server threads, teardown
// order, and the public create_ublk_device().
#include "blkmq/driver/context.h"
#include "blkmq/elevator/elevator.h"
#include "drivers/index_alloc.h"
#include "drivers/ublk/ublk_dev.h"

namespace blkmq::ublkd {
namespace {

constexpr unsigned kMaxUblkDepth = 4096;  // UBLK_MAX_QUEUE_DEPTH

// Device names ublkb0, ublkb1, ...: the lowest free index, as ublk's idr.
IndexAllocator g_indexes;

Status bad(const std::string& what) { return Status::invalid("ublk: " + what); }

bool mq_deadline_registered() {
  for (const std::string& n : registered_elevators())
    if (n == "mq-deadline") return true;
  return false;
}

}  // namespace

Status validate_options(const UblkOptions& o) {
  const unsigned cpus = nr_cpu_ids();
  if (o.nr_hw_queues < 1 || o.nr_hw_queues > cpus)
    return bad("nr_hw_queues must be in 1.." + std::to_string(cpus) + " (the CPU count); got " +
               std::to_string(o.nr_hw_queues));
  if (o.queue_depth < 1 || o.queue_depth > kMaxUblkDepth)
    return bad("queue_depth must be in 1.." + std::to_string(kMaxUblkDepth) + "; got " +
               std::to_string(o.queue_depth));
  const uint32_t bs = o.logical_block_size;
  if (bs < 512 || bs > 4096 || (bs & (bs - 1)))
    return bad("logical block size must be a power of two in 512..4096; got " + std::to_string(bs));
  if (o.size == 0 || o.size % bs)
    return bad("size must be a non-zero multiple of the logical block size (" + std::to_string(bs) +
               "); got " + std::to_string(o.size));
  if (o.max_sectors < (bs >> kSectorShift) || o.max_sectors > 65535)
    return bad("max_sectors must be in " + std::to_string(bs >> kSectorShift) +
               "..65535 (at least one block); got " + std::to_string(o.max_sectors));
  if (o.fua && !o.write_cache) return bad("fua needs write_cache (FUA only matters with a volatile cache)");
  if (o.zoned) {
    const uint32_t z = o.zone_sectors;
    if (z == 0 || (z & (z - 1)) || (uint64_t{z} << kSectorShift) < bs)
      return bad("zone_sectors must be a power of two of at least one block; got " + std::to_string(z));
    if (o.max_zone_append_sectors > o.max_sectors)
      return bad("max_zone_append_sectors must be at most max_sectors (" + std::to_string(o.max_sectors) + ")");
  }
  return Status::OK();
}

UblkDevice::UblkDevice(std::unique_ptr<UblkTarget> target, const UblkOptions& opts)
    : opts_(opts), target_(std::move(target)) {
  index_ = g_indexes.alloc();
}

UblkDevice::~UblkDevice() {
  // The order is the contract: the queue drains while servers and target
  // still run; the servers stop once nothing can reach them; the target
  // goes last because a server may still be inside it until it stops.
  queue_.reset();
  for (auto& s : servers_) s->stop();
  servers_.clear();
  tag_set_.reset();
  target_.reset();
  g_indexes.free(index_);
}

const std::string& UblkDevice::driver_name() const {
  static const std::string name = kDriverName;
  return name;
}

QueueConfig UblkDevice::queue_config() const {
  QueueConfig cfg;
  cfg.name = opts_.name.empty() ? "ublkb" + std::to_string(index_) : opts_.name;
  QueueLimits& lim = cfg.limits;
  lim.logical_block_size = opts_.logical_block_size;
  lim.physical_block_size = opts_.logical_block_size;
  lim.max_hw_sectors = opts_.max_sectors - opts_.max_sectors % (opts_.logical_block_size >> kSectorShift);
  lim.max_sectors = lim.max_hw_sectors;
  lim.capacity_sectors = opts_.size >> kSectorShift;
  lim.write_cache = opts_.write_cache;
  lim.fua = opts_.fua;
  lim.max_discard_sectors = opts_.discard ? (UINT32_MAX >> kSectorShift) : 0;
  lim.max_write_zeroes_sectors = opts_.discard ? (UINT32_MAX >> kSectorShift) : 0;
  if (opts_.zoned) {
    lim.zoned = true;
    lim.chunk_sectors = opts_.zone_sectors;
    lim.max_open_zones = opts_.max_open_zones;
    lim.max_active_zones = opts_.max_active_zones;
    lim.max_zone_append_sectors = opts_.max_zone_append_sectors;
    UblkTarget* t = target_.get();
    cfg.report_zones = [t](uint64_t sector, unsigned max) { return t->report_zones(sector, max); };
  }
  cfg.queuedata = const_cast<UblkDevice*>(this);
  // ublk devices default to mq-deadline whatever their queue count; the
  // core's empty-name rule would pick none for several hw queues.
  cfg.scheduler = opts_.scheduler;
  if (cfg.scheduler.empty()) cfg.scheduler = mq_deadline_registered() ? "mq-deadline" : "none";
  return cfg;
}

Status UblkDevice::setup() {
  // Servers first: init_hctx hands each hctx its server, and a failing
  // init_queue() should fail creation before any queue exists.
  for (unsigned q = 0; q < opts_.nr_hw_queues; q++) {
    servers_.push_back(std::make_unique<UblkServer>(this, q, opts_.queue_depth));
    if (Status st = servers_.back()->start(opts_.pin); !st) return st;
  }
  TagSetConfig tc;
  tc.ops = &kUblkOps;
  tc.driver_data = this;
  tc.nr_queues[static_cast<unsigned>(HctxType::dflt)] = opts_.nr_hw_queues;
  tc.queue_depth = opts_.queue_depth;
  tc.cmd_size = (sizeof(UblkCmd) + 15) & ~size_t{15};
  tc.timeout_ms = opts_.timeout_ms;
  auto ts = TagSet::create(tc);
  if (!ts) return Status::error(ts.status().code(), "ublk: " + ts.status().message());
  tag_set_ = std::move(*ts);
  auto q = Queue::create(*tag_set_, queue_config());
  if (!q) return Status::error(q.status().code(), "ublk: " + q.status().message());
  queue_ = std::move(*q);
  return Status::OK();
}

Result<std::unique_ptr<Device>> UblkDevice::create(std::unique_ptr<UblkTarget> target,
                                                   const UblkOptions& opts) {
  if (!target) return bad("a target is required");
  if (Status st = validate_options(opts); !st) return st;
  std::unique_ptr<UblkDevice> dev(new UblkDevice(std::move(target), opts));
  // On failure the destructor unwinds whatever setup() built, in order.
  if (Status st = dev->setup(); !st) return st;
  return std::unique_ptr<Device>(std::move(dev));
}

}  // namespace blkmq::ublkd

namespace blkmq {

Result<std::unique_ptr<Device>> create_ublk_device(std::unique_ptr<UblkTarget> target,
                                                   const UblkOptions& opts) {
  return ublkd::UblkDevice::create(std::move(target), opts);
}

UblkTarget* ublk_target(Device& dev) {
  auto* u = dynamic_cast<ublkd::UblkDevice*>(&dev);
  return u ? u->target() : nullptr;
}

}  // namespace blkmq
