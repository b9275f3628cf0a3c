// An out-of-tree block driver, built against an installed blkmq.
//
// What it shows: a RAM disk is a DriverOps table (blkmq/driver/driver.h)
// with one required hook, queue_rq, that copies a request's segments to or
// from memory; blkmq puts its own tag set and request queue in front of it
// (tags, plugging and merging, the default scheduler, accounting). The same
// driver is then registered by name, as the built-in ones are, so
// create_device("ramdisk", params) makes one, parameters checked.
//
// What it checks (exit status 0 when all hold): data written through the
// queue reads back the same, synchronously and as a plugged batch of
// asynchronous bios; the batch reached the driver as fewer requests than
// bios (the block layer merged them); I/O past the end is refused before
// the driver; bad parameters are refused with a message.
#include <blkmq/blkmq.h>
#include <blkmq/driver/device_driver.h>
#include <blkmq/driver/driver.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

using blkmq::BlkStatus;

// ---- the driver ----

// The disk's memory and what the checks read back. Shared by every hw
// queue: queue_rq may run on several threads at once, each on its own
// request's range, so the copies need no lock.
struct RamDisk {
  std::vector<char> data;
  std::atomic<uint64_t> requests{0};  // requests queue_rq saw
};

BlkStatus ramdisk_queue_rq(blkmq::HwCtx* hctx, const blkmq::QueueData& bd) {
  blkmq::Request* rq = bd.rq;
  auto* disk = static_cast<RamDisk*>(blkmq::queue_data(hctx->queue));
  blkmq::start_request(rq);
  disk->requests.fetch_add(1, std::memory_order_relaxed);
  // The core refused anything past capacity_sectors already.
  char* at = disk->data.data() + (rq->sector << blkmq::kSectorShift);
  switch (rq->op) {
    case blkmq::ReqOp::read:
      blkmq::rq_for_each_segment(rq, [&](void* buf, size_t len, uint64_t off) { std::memcpy(buf, at + off, len); });
      break;
    case blkmq::ReqOp::write:
      blkmq::rq_for_each_segment(rq, [&](void* buf, size_t len, uint64_t off) { std::memcpy(at + off, buf, len); });
      break;
    case blkmq::ReqOp::flush:  // RAM has no volatile cache to write back
      break;
    default:  // discard and write_zeroes are not offered (limits below)
      blkmq::end_request(rq, BlkStatus::notsupp);
      return BlkStatus::ok;
  }
  // Ended inline, in the dispatching thread: nothing here waits.
  blkmq::end_request(rq, BlkStatus::ok);
  return BlkStatus::ok;
}

// A RAM disk with its own tag set and queue. Members are destroyed in
// reverse order: the queue drains its I/O first, then the tag set goes,
// then the memory the last requests copied to.
class RamDiskDevice final : public blkmq::Device {
 public:
  static blkmq::Result<std::unique_ptr<RamDiskDevice>> create(uint64_t bytes, unsigned depth) {
    std::unique_ptr<RamDiskDevice> dev(new RamDiskDevice());
    dev->disk_.data.assign(bytes, 0);
    // Must outlive every tag set that uses it; built once, thread-safely.
    static const blkmq::DriverOps ops = [] {
      blkmq::DriverOps o;
      o.queue_rq = ramdisk_queue_rq;
      return o;
    }();
    blkmq::TagSetConfig tc;
    tc.ops = &ops;
    tc.queue_depth = depth;
    auto set = blkmq::TagSet::create(tc);
    if (!set) return set.status();
    dev->set_ = std::move(*set);
    blkmq::QueueConfig qc;
    qc.name = "ramdisk0";
    qc.queuedata = &dev->disk_;
    qc.limits.capacity_sectors = bytes >> blkmq::kSectorShift;
    auto q = blkmq::Queue::create(*dev->set_, qc);
    if (!q) return q.status();
    dev->q_ = std::move(*q);
    return dev;
  }

  blkmq::Queue& queue() override { return *q_; }
  const std::string& driver_name() const override { return name_; }
  uint64_t size_bytes() const override { return disk_.data.size(); }
  uint64_t requests() const { return disk_.requests.load(); }

 private:
  RamDiskDevice() = default;
  RamDisk disk_;
  std::unique_ptr<blkmq::TagSet> set_;
  std::unique_ptr<blkmq::Queue> q_;
  std::string name_ = "ramdisk";
};

// ---- registration by name ----

bool parse_uint(const blkmq::ParamMap& params, const char* name, uint64_t dflt, uint64_t lo, uint64_t hi,
                uint64_t* out, std::string* err) {
  auto it = params.find(name);
  if (it == params.end()) {
    *out = dflt;
    return true;
  }
  const std::string& v = it->second;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  if (ec == std::errc() && end == v.data() + v.size() && *out >= lo && *out <= hi) return true;
  *err = "ramdisk: " + std::string(name) + "='" + v + "': an integer in " + std::to_string(lo) + ".." +
         std::to_string(hi) + " is needed";
  return false;
}

blkmq::Result<std::unique_ptr<blkmq::Device>> create_ramdisk(const blkmq::ParamMap& params) {
  uint64_t mib = 0, depth = 0;
  std::string err;
  if (!parse_uint(params, "size_mib", 16, 1, 4096, &mib, &err) ||
      !parse_uint(params, "queue_depth", 64, 1, blkmq::kMaxQueueDepth, &depth, &err))
    return blkmq::Status::invalid(err);
  auto dev = RamDiskDevice::create(mib << 20, static_cast<unsigned>(depth));
  if (!dev) return dev.status();
  return std::unique_ptr<blkmq::Device>(std::move(*dev));
}

// Registered once, before the first create_device that names it; the
// descriptor must live as long as the process.
const blkmq::DeviceDriver kRamdiskDriver{
    "ramdisk", &create_ramdisk,
    {{"size_mib", "16", "capacity in MiB (1..4096)"}, {"queue_depth", "64", "driver tags"}}};

// ---- the checks ----

int failures = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += !ok;
}

// Data that differs by offset and by pass, so a misplaced or stale block
// is seen.
void fill(char* buf, size_t len, uint64_t offset, uint64_t pass) {
  for (size_t i = 0; i < len; i += 8) {
    uint64_t v = (offset + i) * 0x9E3779B97F4A7C15ull ^ pass;
    std::memcpy(buf + i, &v, 8);
  }
}

// Waits for a batch of bios; end_io may run in any context, so it only
// counts under the lock and notifies.
struct Batch {
  std::mutex mu;
  std::condition_variable cv;
  unsigned left = 0;
  unsigned errors = 0;

  static void end_io(blkmq::Bio* bio) {
    auto* b = static_cast<Batch*>(bio->private_data);
    std::lock_guard<std::mutex> g(b->mu);
    b->errors += bio->status != BlkStatus::ok;
    if (--b->left == 0) b->cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [this] { return left == 0; });
  }
};

// `n` sequential 4 KiB bios from `offset`, submitted under one plug, then
// waited for. Returns the number that failed.
unsigned submit_batch(blkmq::Queue& q, blkmq::ReqOp op, std::vector<char>& buf, uint64_t offset, unsigned n) {
  constexpr uint32_t kBs = 4096;
  std::vector<blkmq::Bio> bios(n);
  std::vector<iovec> vecs(n);
  Batch batch;
  batch.left = n;
  {
    blkmq::Plug plug(n);  // issued together when the plug ends
    for (unsigned i = 0; i < n; i++) {
      vecs[i] = {buf.data() + size_t{i} * kBs, kBs};
      blkmq::Bio& b = bios[i];
      b.op = op;
      b.sector = (offset + uint64_t{i} * kBs) >> blkmq::kSectorShift;
      b.size = kBs;
      b.vec = &vecs[i];
      b.nr_vecs = 1;
      b.end_io = Batch::end_io;
      b.private_data = &batch;
      q.submit_bio(&b);
    }
  }
  batch.wait();
  return batch.errors;
}

void verify_device(RamDiskDevice& dev, const std::string& how) {
  blkmq::Queue& q = dev.queue();
  // Synchronous: 1 MiB at an odd sector, larger than one request may be.
  std::vector<char> out(1 << 20), in(1 << 20);
  const uint64_t off = 3 * 512;
  fill(out.data(), out.size(), off, 1);
  check(q.write_sync(out.data(), off, out.size()) == BlkStatus::ok, how + ": write_sync 1 MiB");
  check(q.read_sync(in.data(), off, in.size()) == BlkStatus::ok && in == out, how + ": read_sync returns it");

  // Asynchronous under a plug: 64 bios of 4 KiB back to back.
  const unsigned n = 64;
  const uint64_t boff = 8 << 20;
  std::vector<char> wbuf(n * 4096), rbuf(n * 4096);
  fill(wbuf.data(), wbuf.size(), boff, 2);
  const uint64_t before = dev.requests();
  check(submit_batch(q, blkmq::ReqOp::write, wbuf, boff, n) == 0, how + ": 64 plugged write bios end ok");
  const uint64_t reqs = dev.requests() - before;
  check(reqs < n, how + ": the queue merged them: " + std::to_string(reqs) + " requests for 64 bios");
  check(submit_batch(q, blkmq::ReqOp::read, rbuf, boff, n) == 0 && rbuf == wbuf, how + ": 64 read bios return it");

  check(q.flush_sync() == BlkStatus::ok, how + ": flush");
  char block[512];
  check(q.read_sync(block, dev.size_bytes(), sizeof block) == BlkStatus::inval, how + ": a read past the end is inval");
}

}  // namespace

int main() {
  // 1. The driver on its own tag set and queue.
  {
    auto dev = RamDiskDevice::create(16 << 20, 64);
    if (!dev) {
      std::fprintf(stderr, "ramdisk: %s\n", dev.status().message().c_str());
      return 1;
    }
    verify_device(**dev, "own queue");
  }

  // 2. The same driver by name, as create_device("null", ...) works.
  if (blkmq::Status st = blkmq::register_device_driver(&kRamdiskDriver); !st.ok()) {
    std::fprintf(stderr, "register_device_driver: %s\n", st.message().c_str());
    return 1;
  }
  check(!blkmq::register_device_driver(&kRamdiskDriver).ok(), "a second registration of the name is refused");
  const auto names = blkmq::device_drivers();
  bool listed = false;
  for (const std::string& n : names) listed |= n == "ramdisk";
  check(listed, "device_drivers() lists ramdisk");
  check(blkmq::device_params("ramdisk").size() == 2, "device_params(\"ramdisk\") has its two parameters");

  auto dev = blkmq::create_device("ramdisk", {{"size_mib", "32"}, {"queue_depth", "32"}});
  if (!dev) {
    std::fprintf(stderr, "create_device(ramdisk): %s\n", dev.status().message().c_str());
    return 1;
  }
  check((*dev)->size_bytes() == 32u << 20, "size_mib=32 gives 32 MiB");
  verify_device(static_cast<RamDiskDevice&>(**dev), "create_device");
  // Attributes work as for any queue: the kernel's default rule gives a
  // single hw queue mq-deadline, and the application may switch it.
  auto sched = (*dev)->queue().attr("queue/scheduler");
  check(sched.ok() && sched.value().find("[mq-deadline]") != std::string::npos,
        "queue/scheduler reads " + (sched.ok() ? sched.value() : sched.status().message()));
  check((*dev)->queue().set_attr("queue/scheduler", "none").ok(), "queue/scheduler=none");
  sched = (*dev)->queue().attr("queue/scheduler");
  check(sched.ok() && sched.value().find("[none]") != std::string::npos, "queue/scheduler reads [none]");
  verify_device(static_cast<RamDiskDevice&>(**dev), "create_device, no scheduler");

  auto bad = blkmq::create_device("ramdisk", {{"size_mib", "lots"}});
  check(!bad.ok() && bad.status().message().find("size_mib") != std::string::npos,
        "size_mib=lots is refused: " + (bad.ok() ? std::string("(accepted)") : bad.status().message()));
  auto unknown = blkmq::create_device("ramdisk", {{"colour", "blue"}});
  check(!unknown.ok(), "an unknown parameter is refused: " +
                           (unknown.ok() ? std::string("(accepted)") : unknown.status().message()));

  std::printf("%s\n", failures ? "ramdisk example: FAILED" : "ramdisk example: all checks passed");
  return failures ? 1 : 0;
}
