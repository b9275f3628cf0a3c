// The rbd device: connecting to the cluster, opening the image, the queue
// limits, the allocation map, and registration as driver "rbd".
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/registry.h"
#include "blkmq/driver/context.h"
#include "blkmq/driver/device_driver.h"
#include "drivers/extents.h"
#include "drivers/rbd/rbd_dev.h"

namespace blkmq::rbd {
namespace {

constexpr const char* kDriverName = "rbd";
// Discard and write-zeroes lengths travel in Request::data_len (32 bits).
constexpr uint64_t kMaxZeroingSectors = UINT32_MAX >> kSectorShift;

std::atomic<unsigned> g_next_index{0};

// librados and librbd return negative errnos.
Status ceph_error(const std::string& what, int ret) {
  const int err = ret < 0 ? -ret : ret;
  return Status::error(err, "rbd: " + what + ": " + std::strerror(err));
}

}  // namespace

RbdDevice::~RbdDevice() {
  queue_.reset();  // drains: every request librbd holds completes (or times out) first
  tag_set_.reset();
  stop_reaper();
  if (image_) rbd_close(image_);
  if (ioctx_) rados_ioctx_destroy(ioctx_);
  if (cluster_) rados_shutdown(cluster_);
}

const std::string& RbdDevice::driver_name() const {
  static const std::string name = kDriverName;
  return name;
}

Status RbdDevice::connect() {
  const std::string user = rados_user(params_);
  if (int r = rados_create2(&cluster_, params_.clustername.c_str(), user.c_str(), 0); r < 0) {
    cluster_ = nullptr;
    return ceph_error("cannot create a cluster handle for " + user, r);
  }
  const char* conf = params_.conf.empty() ? nullptr : params_.conf.c_str();
  if (int r = rados_conf_read_file(cluster_, conf); r < 0) {
    return ceph_error(conf ? "cannot read conf '" + params_.conf + "'"
                           : "no ceph.conf found for cluster '" + params_.clustername +
                                 "' (give conf=PATH or set CEPH_CONF)",
                      r);
  }
  // CEPH_ARGS, as the ceph tools and fio's rbd engine read it.
  if (int r = rados_conf_parse_env(cluster_, nullptr); r < 0) return ceph_error("bad CEPH_ARGS", r);
  if (params_.osd_op_timeout) {
    const std::string t = std::to_string(params_.osd_op_timeout);
    // The first connection waits for client_mount_timeout (300 s by
    // default): a cluster that is not there fails create_device as soon as
    // it would fail an I/O.
    for (const char* opt : {"rados_osd_op_timeout", "rados_mon_op_timeout", "client_mount_timeout"}) {
      if (int r = rados_conf_set(cluster_, opt, t.c_str()); r < 0) return ceph_error(std::string("setting ") + opt, r);
    }
  }
  if (int r = rados_connect(cluster_); r < 0) {
    return ceph_error("cannot connect to cluster '" + params_.clustername + "' as " + user, r);
  }
  char cache[16] = {};
  if (rados_conf_get(cluster_, "rbd_cache", cache, sizeof cache) == 0) {
    client_cache_ = std::strcmp(cache, "false") != 0;
  }
  return Status::OK();
}

Status RbdDevice::open_image() {
  if (int r = rados_ioctx_create(cluster_, params_.pool.c_str(), &ioctx_); r < 0) {
    ioctx_ = nullptr;
    return ceph_error("cannot open pool '" + params_.pool + "'", r);
  }
  if (int r = rbd_open(ioctx_, params_.rbdname.c_str(), &image_, nullptr); r < 0) {
    image_ = nullptr;
    return ceph_error("cannot open image '" + params_.pool + "/" + params_.rbdname + "'", r);
  }
  rbd_image_info_t info{};
  if (int r = rbd_stat(image_, &info, sizeof info); r < 0) return ceph_error("rbd_stat", r);
  uint64_t stripes = 1;
  if (rbd_get_stripe_count(image_, &stripes) < 0 || stripes == 0) stripes = 1;
  objset_bytes_ = info.obj_size * stripes;
  size_ = info.size - info.size % (1u << kSectorShift);
  if (size_ == 0) return Status::invalid("rbd: image '" + params_.rbdname + "' is smaller than one sector");
  return Status::OK();
}

// As krbd: requests up to one object set, discard and write-zeroes up to
// the same. librbd's writeback cache (rbd_cache, on by default) is volatile
// until a flush; librbd has no FUA, so the core emulates it with a flush
// after the write, as the kernel does for a device without FUA.
QueueConfig RbdDevice::queue_config() const {
  QueueConfig cfg;
  cfg.name = "rbd" + std::to_string(index_);
  QueueLimits& lim = cfg.limits;
  const uint64_t objset_sectors = std::min<uint64_t>(objset_bytes_ >> kSectorShift, kMaxZeroingSectors);
  lim.logical_block_size = 512;
  lim.physical_block_size = 512;
  lim.max_hw_sectors = static_cast<uint32_t>(std::max<uint64_t>(objset_sectors, 8));
  lim.max_sectors = std::min(params_.max_sectors, lim.max_hw_sectors);
  lim.max_segments = kMaxSegments;
  lim.capacity_sectors = size_ >> kSectorShift;
  lim.write_cache = client_cache_;
  lim.fua = false;
  lim.max_discard_sectors = lim.max_hw_sectors;
  lim.max_write_zeroes_sectors = lim.max_hw_sectors;
  lim.rotational = false;
  cfg.queuedata = const_cast<RbdDevice*>(this);
  return cfg;
}

Status RbdDevice::setup() {
  if (Status st = connect(); !st) return st;
  if (Status st = open_image(); !st) return st;
  if (params_.eventfd_completion) {
    if (Status st = start_reaper(); !st) return st;
  }
  index_ = g_next_index.fetch_add(1, std::memory_order_relaxed);
  TagSetConfig cfg;
  cfg.ops = &kRbdOps;
  cfg.driver_data = this;
  cfg.nr_queues[static_cast<unsigned>(HctxType::dflt)] = params_.submit_queues;
  cfg.queue_depth = params_.hw_queue_depth;
  cfg.cmd_size = (sizeof(RbdCmd) + 15) & ~size_t{15};
  // As krbd (BLK_MQ_F_NO_SCHED_BY_DEFAULT there too): the OSDs schedule,
  // so the device starts with "none"; queue/scheduler picks one.
  cfg.flags |= kTagSetNoSchedByDefault;
  auto ts = TagSet::create(cfg);
  if (!ts) return Status::error(ts.status().code(), "rbd: " + ts.status().message());
  tag_set_ = std::move(*ts);
  auto q = Queue::create(*tag_set_, queue_config());
  if (!q) return Status::error(q.status().code(), "rbd: " + q.status().message());
  queue_ = std::move(*q);
  return Status::OK();
}

namespace {

// rbd_diff_iterate2's walk, gathered into extents. Gaps between the
// extents it reports were never written (or were discarded).
struct DiffWalk {
  ExtentBuilder map;
  uint64_t pos;
  bool full = false;
  bool out_of_order = false;
};

int diff_extent(uint64_t off, size_t len, int exists, void* arg) {
  auto* w = static_cast<DiffWalk*>(arg);
  if (off < w->pos) {
    w->out_of_order = true;
    return -EINVAL;
  }
  constexpr uint32_t kHole = kExtentHole | kExtentZero;
  if (!w->map.add(off - w->pos, kHole) || !w->map.add(len, exists ? 0 : kHole)) {
    w->full = true;
    return -ENOSPC;
  }
  w->pos = off + len;
  return 0;
}

}  // namespace

Result<std::vector<Extent>> RbdDevice::allocation(uint64_t offset, uint64_t length, size_t max_extents) {
  if (offset > size_ || length > size_ - offset) return Status::invalid("rbd: allocation range beyond the image");
  DiffWalk w{ExtentBuilder(max_extents), offset};
  const int r = rbd_diff_iterate2(image_, nullptr, offset, length, /*include_parent=*/1, /*whole_object=*/0,
                                  diff_extent, &w);
  if (w.out_of_order) {
    // Not what librbd promises; all data is what is always safe to say.
    ExtentBuilder all(1);
    all.add(length, 0);
    return all.take();
  }
  if (r < 0 && !w.full) return ceph_error("rbd_diff_iterate2", r);
  if (!w.full) w.map.add(offset + length - w.pos, kExtentHole | kExtentZero);
  return w.map.take();
}

Result<std::unique_ptr<Device>> RbdDevice::create(const ParamMap& params) {
  auto parsed = parse_rbd_params(params);
  if (!parsed) return parsed.status();
  RbdParams p = *parsed;
  p.submit_queues = std::min(p.submit_queues, nr_cpu_ids());
  std::unique_ptr<RbdDevice> dev(new RbdDevice(p));
  if (Status st = dev->setup(); !st) return st;
  return std::unique_ptr<Device>(std::move(dev));
}

}  // namespace blkmq::rbd

// The driver, listed by the table CMake generates from src/drivers' folders
// (where librbd is installed).
BLKMQ_BUILTIN(blkmq::DeviceDriver, driver, rbd, 0,
              {blkmq::rbd::kDriverName, &blkmq::rbd::RbdDevice::create, blkmq::rbd::rbd_param_infos()});
