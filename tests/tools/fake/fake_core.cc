// A stand-in for the blkmq core, only to exercise `blkmq bench` end to end
// before the real core links: one "fake" device whose bios complete inline
// (irqmode=0), on a completion thread (irqmode=1) or through Queue::poll
// (polled bios). It can keep data (memory=1), fail the Nth I/O (fail_at=N)
// and corrupt reads (corrupt=1). Not part of the CMake build (tests/tools/
// globs *_test.cc only); build by hand, see run_engine_checks.sh.
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "blkmq/device.h"
#include "blkmq/plug.h"
#include "blkmq/threads.h"

namespace blkmq {
namespace {

class FakeQueue : public Queue {
 public:
  FakeQueue(uint64_t size, int irqmode, bool memory, uint64_t fail_at, bool corrupt)
      : irqmode_(irqmode), fail_at_(fail_at), corrupt_(corrupt) {
    lim_.capacity_sectors = size >> kSectorShift;
    name_ = "fake0";
    if (memory) data_.resize(size);
    if (irqmode_ == 1) thr_ = std::thread([this] { loop(); });
  }
  ~FakeQueue() override {
    if (thr_.joinable()) {
      {
        std::lock_guard g(mu_);
        quit_ = true;
      }
      cv_.notify_one();
      thr_.join();
    }
  }
  void submit(Bio* b) {
    uint64_t n = ++count_;
    if (b->end_sector() > lim_.capacity_sectors) b->status = BlkStatus::inval;
    if (fail_at_ && n == fail_at_) b->status = BlkStatus::ioerr;
    if (b->status == BlkStatus::ok && !data_.empty()) copy(b);
    (b->op == ReqOp::read ? reads_ : writes_).fetch_add(1, std::memory_order_relaxed);
    if (b->flags & kBioPolled) {
      std::lock_guard g(mu_);
      polled_.push_back(b);
      return;
    }
    if (irqmode_ == 0) {
      b->end_io(b);
      return;
    }
    {
      std::lock_guard g(mu_);
      q_.push_back(b);
    }
    cv_.notify_one();
  }
  int do_poll() {
    std::deque<Bio*> done;
    {
      std::lock_guard g(mu_);
      done.swap(polled_);
    }
    for (Bio* b : done) b->end_io(b);
    return static_cast<int>(done.size());
  }
  QueueLimits lim_;
  std::string name_;
  std::atomic<uint64_t> reads_{0}, writes_{0};

 private:
  void copy(Bio* b) {
    char* p = data_.data() + (b->sector << kSectorShift);
    auto* buf = static_cast<char*>(b->vec[0].iov_base);
    if (b->op == ReqOp::write) std::memcpy(p, buf, b->size);
    if (b->op == ReqOp::read) {
      std::memcpy(buf, p, b->size);
      if (corrupt_) buf[100] ^= 1;
    }
  }
  void loop() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [this] { return quit_ || !q_.empty(); });
      if (q_.empty() && quit_) return;
      std::deque<Bio*> batch;
      batch.swap(q_);
      lk.unlock();
      for (Bio* b : batch) b->end_io(b);
      lk.lock();
    }
  }
  int irqmode_;
  uint64_t fail_at_;
  bool corrupt_;
  std::atomic<uint64_t> count_{0};
  std::vector<char> data_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Bio*> q_, polled_;
  bool quit_ = false;
  std::thread thr_;
};

class FakeDevice : public Device {
 public:
  explicit FakeDevice(std::unique_ptr<FakeQueue> q, uint64_t size) : q_(std::move(q)), size_(size) {}
  Queue& queue() override { return *q_; }
  const std::string& driver_name() const override { return name_; }
  uint64_t size_bytes() const override { return size_; }

 private:
  std::unique_ptr<FakeQueue> q_;
  std::string name_ = "fake";
  uint64_t size_;
};

thread_local IoContext tl_ioc;

}  // namespace

Queue::~Queue() = default;
void Queue::submit_bio(Bio* bio) { static_cast<FakeQueue*>(this)->submit(bio); }
int Queue::poll(const Bio*) { return static_cast<FakeQueue*>(this)->do_poll(); }
const QueueLimits& Queue::limits() const { return static_cast<const FakeQueue*>(this)->lim_; }
const std::string& Queue::name() const { return static_cast<const FakeQueue*>(this)->name_; }
DiskStat Queue::disk_stat() const {
  auto* fq = static_cast<const FakeQueue*>(this);
  DiskStat d{};
  d.read_ios = fq->reads_.load();
  d.write_ios = fq->writes_.load();
  return d;
}

Plug::Plug(unsigned) : owner_(true) {}
Plug::~Plug() = default;

IoContext* current_io_context() { return &tl_ioc; }

const char* blk_status_name(BlkStatus s) { return s == BlkStatus::ok ? "ok" : s == BlkStatus::inval ? "inval" : "ioerr"; }
int blk_status_to_errno(BlkStatus s) { return s == BlkStatus::ok ? 0 : s == BlkStatus::inval ? -22 : -5; }

std::vector<std::string> device_drivers() { return {"fake"}; }
std::vector<ParamInfo> device_params(std::string_view) {
  return {{"irqmode", "0", "0 inline, 1 completion thread"},
          {"size", "64m", "device bytes"},
          {"memory", "0", "keep data"},
          {"fail_at", "0", "fail the Nth I/O"},
          {"corrupt", "0", "corrupt reads"}};
}

Result<std::unique_ptr<Device>> create_device(std::string_view, const ParamMap& p) {
  auto get = [&](const char* k, uint64_t d) {
    auto it = p.find(k);
    return it == p.end() ? d : std::stoull(it->second);
  };
  uint64_t size = get("size", 64u << 20);
  auto q = std::make_unique<FakeQueue>(size, static_cast<int>(get("irqmode", 0)), get("memory", 0) != 0,
                                       get("fail_at", 0), get("corrupt", 0) != 0);
  std::unique_ptr<Device> d = std::make_unique<FakeDevice>(std::move(q), size);
  return d;
}

std::map<std::string, ThreadGroupUsage> thread_usage() { return {{"fake-irq", {1000, 1, 0, 0}}}; }

}  // namespace blkmq
