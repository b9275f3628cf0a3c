// The uring device: opening (or creating) the file, probing what the kernel
// and the file system support, the queue limits, and registration as
// driver "uring".
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "base/registry.h"
#include "blkmq/driver/context.h"
#include "blkmq/driver/device_driver.h"
#include "drivers/uring/uring_dev.h"

namespace blkmq::uring {
namespace {

constexpr const char* kDriverName = "uring";
// Discard and write-zeroes lengths travel in Request::data_len (32 bits).
constexpr uint32_t kMaxZeroingSectors = UINT32_MAX >> kSectorShift;

std::atomic<unsigned> g_next_index{0};

Status sys_error(const std::string& what, int err) {
  return Status::error(err, "uring: " + what + ": " + std::strerror(err));
}

// Whether the effective capability set (CapEff in /proc/self/status, a hex
// mask) holds capability `bit`.
bool has_capability(unsigned bit) {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (mask >> bit) & 1;
  }
  return false;
}

// A block device's queue attribute from sysfs ("" when unreadable).
std::string blockdev_attr(dev_t rdev, const char* attr) {
  std::ifstream in("/sys/dev/block/" + std::to_string(major(rdev)) + ":" +
                   std::to_string(minor(rdev)) + "/queue/" + attr);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

UringDevice::~UringDevice() {
  queue_.reset();  // drains I/O; exit_hctx stops the reapers and exits the rings
  tag_set_.reset();
  {
    std::lock_guard lk(queues_mu_);
    queues_.clear();
  }
  if (fd_ >= 0) close(fd_);
}

const std::string& UringDevice::driver_name() const {
  static const std::string name = kDriverName;
  return name;
}

UringQueue* UringDevice::alloc_queue(HwCtx* hctx, unsigned idx) {
  auto uq = std::unique_ptr<UringQueue>(new (std::nothrow) UringQueue(this, hctx, idx));
  if (!uq) return nullptr;
  UringQueue* raw = uq.get();
  std::lock_guard lk(queues_mu_);
  // Before its ring exists this only records them; start() registers them.
  raw->register_buffers(buffers_);
  queues_.push_back(std::move(uq));
  return raw;
}

Status UringDevice::register_buffers(const iovec* regions_in, size_t count) {
  const std::span<const iovec> regions(regions_in, count);
  for (const iovec& r : regions)
    if (!r.iov_base || !r.iov_len)
      return Status::invalid("uring: a registered buffer needs an address and a length");
  std::lock_guard lk(queues_mu_);
  buffers_.assign(regions.begin(), regions.end());
  for (auto& uq : queues_) {
    if (const int r = uq->register_buffers(buffers_); r < 0) {
      buffers_.clear();
      for (auto& q : queues_) q->register_buffers({});
      return Status::error(-r, "uring: io_uring_register_buffers: " + std::string(strerror(-r)));
    }
  }
  return Status::OK();
}

SqeCounts UringDevice::sqe_counts() {
  SqeCounts sum;
  std::lock_guard lk(queues_mu_);
  for (auto& uq : queues_) {
    const SqeCounts c = uq->sqe_counts();
    sum.vectored += c.vectored;
    sum.nonvectored += c.nonvectored;
    sum.fixed += c.fixed;
  }
  return sum;
}

void UringDevice::free_queue(UringQueue* uq) {
  std::unique_ptr<UringQueue> victim;
  {
    std::lock_guard lk(queues_mu_);
    auto it = std::find_if(queues_.begin(), queues_.end(), [&](auto& q) { return q.get() == uq; });
    if (it == queues_.end()) return;
    victim = std::move(*it);
    queues_.erase(it);
  }
  // Joins the reaper: outside the lock.
  victim.reset();
}

Status UringDevice::open_file() {
  const std::string& path = params_.filename;
  int flags = O_RDWR | O_CLOEXEC | (params_.direct ? O_DIRECT : 0);
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return sys_error("cannot stat '" + path + "'", errno);
    if (params_.size == 0) {
      return Status::invalid("uring: '" + path + "' does not exist; give 'size' to create it");
    }
    flags |= O_CREAT;
  } else if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return Status::invalid("uring: '" + path + "' is neither a regular file nor a block device");
  }
  fd_ = open(path.c_str(), flags, 0644);
  if (fd_ < 0) {
    if (params_.direct && errno == EINVAL) {
      return Status::error(EINVAL, "uring: the file system of '" + path + "' refuses O_DIRECT (direct=1)");
    }
    return sys_error("cannot open '" + path + "'", errno);
  }
  if (fstat(fd_, &st) != 0) return sys_error("fstat '" + path + "'", errno);
  uint64_t have = 0;
  if (S_ISBLK(st.st_mode)) {
    features_.block_device = true;
    rdev_ = st.st_rdev;
    if (ioctl(fd_, BLKGETSIZE64, &have) != 0) return sys_error("BLKGETSIZE64 '" + path + "'", errno);
    if (params_.size > have) {
      return Status::invalid("uring: size=" + std::to_string(params_.size) + " is larger than the device '" +
                             path + "' (" + std::to_string(have) + " bytes)");
    }
  } else if (S_ISREG(st.st_mode)) {
    have = static_cast<uint64_t>(st.st_size);
    if (params_.size > have && ftruncate(fd_, static_cast<off_t>(params_.size)) != 0) {
      return sys_error("cannot size '" + path + "' to " + std::to_string(params_.size) + " bytes", errno);
    }
  } else {
    return Status::invalid("uring: '" + path + "' is neither a regular file nor a block device");
  }
  size_ = params_.size ? params_.size : have;
  size_ -= size_ % params_.bs;
  if (size_ == 0) {
    return Status::invalid("uring: '" + path + "' is smaller than one block (bs=" +
                           std::to_string(params_.bs) + "); give 'size' to extend it");
  }
  return Status::OK();
}

Status UringDevice::check_direct_alignment() {
  if (!params_.direct) return Status::OK();
  unsigned need = 0, mem_align = 512;
  if (features_.block_device) {
    int lss = 0;
    if (ioctl(fd_, BLKSSZGET, &lss) == 0 && lss > 0) need = static_cast<unsigned>(lss);
    const std::string dma = blockdev_attr(rdev_, "dma_alignment");  // a mask
    if (!dma.empty()) mem_align = static_cast<unsigned>(std::strtoul(dma.c_str(), nullptr, 10)) + 1;
  } else {
    struct statx stx {};
    if (statx(fd_, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN)) {
      need = stx.stx_dio_offset_align;
      if (stx.stx_dio_mem_align) mem_align = stx.stx_dio_mem_align;
    }
  }
  // The buffers go to the device as they are: what O_DIRECT needs of their
  // addresses becomes the queue's dma_alignment, so a misaligned bio ends
  // with inval at submission instead of EINVAL from the kernel later.
  if (mem_align && !(mem_align & (mem_align - 1)) && mem_align <= 4096) dma_mask_ = mem_align - 1;
  if (need > params_.bs) {
    return Status::invalid("uring: bs=" + std::to_string(params_.bs) + " is below the O_DIRECT alignment of '" +
                           params_.filename + "' (" + std::to_string(need) + " bytes); use bs=" +
                           std::to_string(need) + " or direct=0");
  }
  return Status::OK();
}

void UringDevice::probe_features() {
  bool falloc = false;
  if (io_uring_probe* probe = io_uring_get_probe()) {
    features_.fsync = io_uring_opcode_supported(probe, IORING_OP_FSYNC);
    falloc = io_uring_opcode_supported(probe, IORING_OP_FALLOCATE);
    features_.nonvectored = params_.nonvectored && io_uring_opcode_supported(probe, IORING_OP_READ) &&
                            io_uring_opcode_supported(probe, IORING_OP_WRITE);
    io_uring_free_probe(probe);
  } else {
    // Kernels without IORING_REGISTER_PROBE (< 5.6) had fsync from the start.
    features_.fsync = true;
  }
  if (falloc && features_.block_device) {
    // The block layer turns these into discard / zero-out; a device that
    // cannot fails the request with -EOPNOTSUPP (notsupp).
    features_.punch_hole = features_.zero_range = true;
  } else if (falloc) {
    // Probe past the end of the file with KEEP_SIZE: the data is untouched.
    // A zero range there may allocate blocks, so punch them out again.
    const off_t end = lseek(fd_, 0, SEEK_END);
    const off_t len = params_.bs;
    features_.punch_hole = fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, end, len) == 0;
    features_.zero_range = fallocate(fd_, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, end, len) == 0;
    if (features_.zero_range && features_.punch_hole) {
      (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, end, len);
    }
  }
  constexpr unsigned kCapSysAdmin = 21, kCapSysNice = 23;  // linux/capability.h
  features_.rt_ioprio = has_capability(kCapSysNice) || has_capability(kCapSysAdmin);
  if (features_.block_device) {
    if (params_.direct) dev_write_cache_ = blockdev_attr(rdev_, "write_cache") != "write through";
    rotational_ = blockdev_attr(rdev_, "rotational") == "1";
    features_.iopoll = params_.direct && params_.poll_queues > 0 && blockdev_attr(rdev_, "io_poll") == "1";
  }
}

QueueConfig UringDevice::queue_config() {
  QueueConfig cfg;
  cfg.name = "uring" + std::to_string(index_);
  QueueLimits& lim = cfg.limits;
  const uint32_t block_sectors = params_.bs >> kSectorShift;
  lim.logical_block_size = params_.bs;
  lim.physical_block_size = params_.bs;
  lim.max_hw_sectors = params_.max_sectors;
  lim.max_sectors = params_.max_sectors;
  lim.max_segments = kMaxSegments;
  lim.capacity_sectors = size_ >> kSectorShift;
  // The page cache (direct=0) or the device's own cache is volatile until
  // fdatasync; RWF_DSYNC gives a real FUA.
  lim.write_cache = dev_write_cache_;
  lim.fua = dev_write_cache_;
  const uint32_t zmax = kMaxZeroingSectors - kMaxZeroingSectors % block_sectors;
  lim.max_discard_sectors = features_.punch_hole ? zmax : 0;
  lim.max_write_zeroes_sectors = features_.zero_range ? zmax : 0;
  lim.rotational = rotational_;
  lim.dma_alignment = dma_mask_;
  lim.poll = params_.poll_queues > 0;
  cfg.queuedata = this;
  return cfg;
}

Status UringDevice::setup() {
  if (Status st = open_file(); !st) return st;
  if (Status st = check_direct_alignment(); !st) return st;
  probe_features();
  index_ = g_next_index.fetch_add(1, std::memory_order_relaxed);
  TagSetConfig cfg;
  cfg.ops = &kUringOps;
  cfg.driver_data = this;
  cfg.nr_queues[static_cast<unsigned>(HctxType::dflt)] = params_.submit_queues;
  cfg.nr_queues[static_cast<unsigned>(HctxType::poll)] = params_.poll_queues;
  cfg.queue_depth = params_.hw_queue_depth;
  cfg.cmd_size = (sizeof(UringCmd) + 15) & ~size_t{15};
  // As the kernel's loop driver (BLK_MQ_F_NO_SCHED_BY_DEFAULT): the file
  // system and the device below schedule already, so a single-queue uring
  // device starts with "none", not mq-deadline; queue/scheduler or
  // --scheduler picks one.
  cfg.flags |= kTagSetNoSchedByDefault;
  auto ts = TagSet::create(cfg);
  if (!ts) return Status::error(ts.status().code(), "uring: " + ts.status().message());
  tag_set_ = std::move(*ts);
  auto q = Queue::create(*tag_set_, queue_config());
  if (!q) return Status::error(q.status().code(), "uring: " + q.status().message());
  queue_ = std::move(*q);
  return Status::OK();
}

Result<std::unique_ptr<Device>> UringDevice::create(const ParamMap& params) {
  auto parsed = parse_uring_params(params);
  if (!parsed) return parsed.status();
  UringParams p = *parsed;
  // More rings than CPUs only adds reaper threads.
  const unsigned cpus = nr_cpu_ids();
  p.submit_queues = std::min(p.submit_queues, cpus);
  p.poll_queues = std::min(p.poll_queues, cpus);
  std::unique_ptr<UringDevice> dev(new UringDevice(p));
  if (Status st = dev->setup(); !st) return st;
  return std::unique_ptr<Device>(std::move(dev));
}

}  // namespace blkmq::uring

// The driver, listed by the table CMake generates from src/drivers' folders.
BLKMQ_BUILTIN(blkmq::DeviceDriver, driver, uring, 0,
              {blkmq::uring::kDriverName, &blkmq::uring::UringDevice::create, blkmq::uring::uring_param_infos()});
