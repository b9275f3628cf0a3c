// A ublk-style target, built against an installed blkmq.
//
// What it shows: a user-space block target is a UblkTarget
// (blkmq/driver/ublk.h): one handle() per request, called on the server
// thread of the request's hw queue, which ends the request with
// io.complete() from that thread or any other. blkmq's ublk driver puts a
// whole block queue in front of it (tags, merging, mq-deadline by default,
// accounting) and create_ublk_device() makes it a Device like any other.
// This target keeps the disk in memory; reads, writes and flushes are done
// in handle() itself, while discards are handed to a thread of the
// target's own and completed there, as a target with an asynchronous
// back end (a network, an io_uring) would complete its I/O.
//
// What it checks (exit status 0 when all hold): data written by several
// threads through the queue reads back the same; a discarded range reads
// back as zeroes, completed by the target's own thread; the target's
// per-queue setup and teardown ran once per queue; and it is the device's
// target (ublk_target()).
#include <blkmq/blkmq.h>
#include <blkmq/driver/context.h>  // nr_cpu_ids
#include <blkmq/driver/ublk.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using blkmq::BlkStatus;

// ---- the target ----

// Outlives the target, which the device destroys last.
std::atomic<unsigned> g_exits{0};

class RamTarget final : public blkmq::UblkTarget {
 public:
  RamTarget(uint64_t bytes, unsigned nr_queues) : data_(bytes, 0), handled_(nr_queues) {
    for (auto& h : handled_) h = 0;
    discarder_ = std::thread([this] { discard_loop(); });
  }
  // Runs after every queue's exit_queue: no I/O is left to hand over.
  ~RamTarget() override {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    discarder_.join();
  }

  // Server thread of io.queue(). Different queues call it at once; each
  // request covers its own range, so the copies need no lock (overlapping
  // I/O in flight together is the submitter's to order, as on a disk).
  void handle(blkmq::UblkIo& io) override {
    handled_[io.queue()].fetch_add(1, std::memory_order_relaxed);
    char* at = data_.data() + io.offset();
    switch (io.op()) {
      case blkmq::ReqOp::read:
        io.for_each_segment([&](void* buf, size_t len, uint64_t off) { std::memcpy(buf, at + off, len); });
        break;
      case blkmq::ReqOp::write:
        io.for_each_segment([&](void* buf, size_t len, uint64_t off) { std::memcpy(at + off, buf, len); });
        break;
      case blkmq::ReqOp::flush:  // nothing volatile: RAM is the medium
        break;
      case blkmq::ReqOp::discard:
      case blkmq::ReqOp::write_zeroes: {
        // Completed later, by another thread: io stays valid until then.
        std::lock_guard<std::mutex> g(mu_);
        pending_.push_back(&io);
        cv_.notify_one();
        return;
      }
      default:  // zone operations: only a zoned target (UblkOptions::zoned) is sent them
        io.complete(BlkStatus::notsupp);
        return;
    }
    io.complete(BlkStatus::ok);
  }

  blkmq::Status init_queue(unsigned q) override {
    inits_++;
    return q < handled_.size() ? blkmq::Status::OK() : blkmq::Status::invalid("ram target: no such queue");
  }
  void exit_queue(unsigned) override { g_exits++; }

  uint64_t handled(unsigned q) const { return handled_[q].load(); }
  unsigned inits() const { return inits_.load(); }
  uint64_t async_completions() const { return async_.load(); }

 private:
  // Zeroes each handed-over range and completes it from this thread.
  void discard_loop() {
    std::unique_lock<std::mutex> g(mu_);
    for (;;) {
      cv_.wait(g, [this] { return stop_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stop_ and nothing left
      blkmq::UblkIo* io = pending_.front();
      pending_.pop_front();
      g.unlock();
      std::memset(data_.data() + io->offset(), 0, io->length());
      async_++;
      io->complete(BlkStatus::ok);
      g.lock();
    }
  }

  std::vector<char> data_;
  std::vector<std::atomic<uint64_t>> handled_;  // requests per hw queue
  std::atomic<unsigned> inits_{0};
  std::atomic<uint64_t> async_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<blkmq::UblkIo*> pending_;
  bool stop_ = false;
  std::thread discarder_;
};

// ---- the checks ----

int failures = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += !ok;
}

void fill(char* buf, size_t len, uint64_t offset, uint64_t gen) {
  for (size_t i = 0; i < len; i += 8) {
    uint64_t v = (offset + i) * 0x9E3779B97F4A7C15ull ^ gen;
    std::memcpy(buf + i, &v, 8);
  }
}

constexpr uint64_t kRegion = 2 << 20;  // bytes each writer owns
constexpr unsigned kWriters = 4;

// Writes and reads back its region in random pieces, then checks it whole.
// Returns the number of failed or mismatched I/Os.
unsigned writer(blkmq::Queue& q, unsigned id) {
  std::mt19937_64 rng(id + 1);
  const uint64_t base = uint64_t{id} * kRegion;
  std::vector<char> shadow(kRegion, 0), buf(128 << 10), back(128 << 10);
  unsigned bad = 0;
  for (uint64_t gen = 1; gen <= 200; gen++) {
    const uint32_t len = 512 * static_cast<uint32_t>(1 + rng() % 256);
    const uint64_t off = 512 * (rng() % ((kRegion - len) / 512));
    fill(buf.data(), len, base + off, gen);
    // Every tenth write with FUA: the core turns it into write + flush
    // (the device has a volatile cache and no native FUA).
    const uint32_t flags = gen % 10 == 0 ? uint32_t{blkmq::kBioFua} : 0u;
    bad += q.write_sync(buf.data(), base + off, len, flags) != BlkStatus::ok;
    std::memcpy(shadow.data() + off, buf.data(), len);
    bad += q.read_sync(back.data(), base + off, len) != BlkStatus::ok ||
           std::memcmp(back.data(), buf.data(), len) != 0;
  }
  std::vector<char> all(kRegion);
  bad += q.read_sync(all.data(), base, kRegion) != BlkStatus::ok || all != shadow;
  return bad;
}

}  // namespace

int main() {
  // Two hw queues, each its own server thread, where there are two CPUs.
  const unsigned kQueues = std::min(2u, blkmq::nr_cpu_ids());
  constexpr uint64_t kSize = kWriters * kRegion + (4 << 20);
  auto owned = std::make_unique<RamTarget>(kSize, kQueues);
  RamTarget* target = owned.get();
  blkmq::UblkOptions opts;
  opts.nr_hw_queues = kQueues;
  opts.queue_depth = 32;
  opts.size = kSize;
  opts.write_cache = true;  // so flushes reach the target
  opts.discard = true;      // and discards and write-zeroes
  auto dev = blkmq::create_ublk_device(std::move(owned), opts);
  if (!dev) {
    std::fprintf(stderr, "create_ublk_device: %s\n", dev.status().message().c_str());
    return 1;
  }
  blkmq::Queue& q = (*dev)->queue();
  check(blkmq::ublk_target(**dev) == target, "ublk_target() is ours");
  check(target->inits() == kQueues, "init_queue ran on each of the " + std::to_string(kQueues) + " queues");
  auto sched = q.attr("queue/scheduler");
  check(sched.ok() && sched.value().find("[mq-deadline]") != std::string::npos,
        "a ublk device starts with mq-deadline: " + (sched.ok() ? sched.value() : sched.status().message()));

  // Writers on more threads than queues: the CPU each runs on picks its
  // hw queue, so both server threads get requests.
  std::vector<std::thread> threads;
  std::atomic<unsigned> bad{0};
  for (unsigned i = 0; i < kWriters; i++) threads.emplace_back([&, i] { bad += writer(q, i); });
  for (std::thread& t : threads) t.join();
  check(bad.load() == 0, "4 writers x 200 writes, each read back, then their regions whole: " +
                             std::to_string(bad.load()) + " wrong");
  check(q.flush_sync() == BlkStatus::ok, "flush");

  // Discard: completed by the target's own thread, and then reads as zeroes.
  const uint64_t doff = kWriters * kRegion;
  std::vector<char> buf(1 << 20), zero(1 << 20, 0);
  fill(buf.data(), buf.size(), doff, 7);
  check(q.write_sync(buf.data(), doff, buf.size()) == BlkStatus::ok, "write 1 MiB");
  blkmq::Bio bio;  // a discard carries a range and no data vector
  bio.op = blkmq::ReqOp::discard;
  bio.sector = doff >> blkmq::kSectorShift;
  bio.size = 1 << 20;
  std::atomic<uint32_t> done{0};
  bio.private_data = &done;
  bio.end_io = [](blkmq::Bio* b) {
    auto* d = static_cast<std::atomic<uint32_t>*>(b->private_data);
    d->store(1);
    blkmq::wake_waiters(d);  // Queue::wait's wake-up
  };
  q.submit_bio(&bio);
  while (done.load() == 0) q.wait(&bio, &done, 0);
  check(bio.status == BlkStatus::ok, std::string("discard 1 MiB: ") + blkmq::blk_status_name(bio.status));
  check(q.read_sync(buf.data(), doff, buf.size()) == BlkStatus::ok && buf == zero, "it reads back as zeroes");
  check(target->async_completions() > 0, "the target completed it from its own thread");

  // Which queue a request takes follows the CPU its submitter ran on.
  uint64_t served = 0;
  std::string per_queue;
  for (unsigned i = 0; i < kQueues; i++) {
    served += target->handled(i);
    per_queue += (i ? ", " : "") + std::to_string(target->handled(i));
  }
  check(served > 0, "the target served " + std::to_string(served) + " requests (per hw queue: " + per_queue + ")");
  blkmq::DiskStat st = q.disk_stat();
  check(st.write_ios > 0 && st.read_ios > 0 && st.discard_ios == 1,
        "the disk stat counts them: " + std::to_string(st.read_ios) + " reads, " + std::to_string(st.write_ios) +
            " writes, " + std::to_string(st.discard_ios) + " discard");

  dev->reset();  // drains the queue, runs exit_queue on each, destroys the target
  check(g_exits == kQueues, "exit_queue ran on each queue at teardown");
  std::printf("%s\n", failures ? "ublk target example: FAILED" : "ublk target example: all checks passed");
  return failures ? 1 : 0;
}
