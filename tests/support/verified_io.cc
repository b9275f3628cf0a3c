#include "support/verified_io.h"

#include <string>

#include "core/core.h"
#include "sched/kyber/kyber.h"
#include "support/wait.h"

namespace blkmq::test {

using Clock = std::chrono::steady_clock;

namespace {

struct WorkerState {
  std::vector<uint32_t> written;  // pattern last written per block (0 = never)
  std::vector<uint8_t> busy;
  uint64_t base = 0;
};

void reap(VerifiedIo& io, WorkerState& w, IoTotals& t, bool verify) {
  if (io.ends.load() == 0) return;
  if (io.ends.load() > 1) t.doubles++;
  t.ended++;
  w.busy[io.block] = 0;
  if (io.bio.status == BlkStatus::timeout) t.timeouts++;
  else if (io.bio.status != BlkStatus::ok) t.errors++;
  else if (io.is_write) w.written[io.block] = io.pattern;
  else if (verify && w.written[io.block]) {
    uint8_t want[kVerifyBlock];
    verified_fill(want, w.base + io.block, w.written[io.block]);
    if (std::memcmp(want, io.buf, kVerifyBlock) != 0) t.mismatches++;
  }
  io.ends.store(0);
}

constexpr uint32_t kWriteFlagCycle[4] = {0, kBioFua, kBioPreflush, kBioPreflush | kBioFua};

void prepare(VerifiedIo& io, uint64_t lba_block, bool write, uint32_t pattern, uint32_t flags) {
  io.is_write = write;
  io.pattern = pattern;
  if (write) verified_fill(io.buf, lba_block, pattern);
  start_verified_io(io, lba_block, write ? ReqOp::write : ReqOp::read, write ? flags : 0);
}

}  // namespace

void verified_worker(Queue& q, unsigned id, unsigned nblocks, unsigned depth, std::atomic<bool>& stop,
                     IoTotals& t, bool verify, bool flushes) {
  std::vector<VerifiedIo> ios(depth);
  uint64_t n = 0;
  WorkerState w{std::vector<uint32_t>(nblocks, 0), std::vector<uint8_t>(nblocks, 0), uint64_t(id) * nblocks};
  std::mt19937_64 rng(id * 7919 + 1);
  while (!stop.load(std::memory_order_relaxed)) {
    for (VerifiedIo& io : ios) {
      if (!io.done.load(std::memory_order_acquire)) continue;
      reap(io, w, t, verify);
      const uint64_t blk = rng() % nblocks;
      if (w.busy[blk]) continue;  // one I/O per block at a time: its content stays known
      w.busy[blk] = 1;
      io.block = blk;
      const bool write = rng() % 2;
      if (flushes && ++n % 32 == 0) {
        t.flushes++;
        if (q.flush_sync() != BlkStatus::ok) t.flush_errors++;
      }
      prepare(io, w.base + blk, write, static_cast<uint32_t>(rng() | 1), flushes ? kWriteFlagCycle[n % 4] : 0);
      t.submitted++;
      q.submit_bio(&io.bio);
    }
    std::this_thread::yield();
  }
  for (VerifiedIo& io : ios) {
    wait_verified_io(io);
    reap(io, w, t, verify);
  }
}

void run_verified_workers(Device& dev, unsigned nthreads, double seconds, IoTotals& t, bool verify,
                          const std::function<void()>& during) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (unsigned i = 0; i < nthreads; i++)
    th.emplace_back([&, i] { verified_worker(dev.queue(), i, 256, 16, stop, t, verify); });
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    if (during) during();
    // The pace of `during` over a run of fixed length: time is the point.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  for (auto& x : th) x.join();
}

std::unique_ptr<Device> make_null_device(ParamMap p) {
  auto d = create_device("null", p);
  if (!d) ADD_FAILURE() << d.status().message();
  return d ? std::move(d.value()) : nullptr;
}

namespace {

// What the queue still holds; 0 when idle. Reads core and kyber state the
// way debugfs shows it (tags, sched_tags, the scheduler's has_work, kyber's
// domain tokens); racy only against I/O, and the caller has none left.
uint64_t held(Queue& q, std::string* why) {
  QueueImpl* qi = to_impl(&q);
  uint64_t n = q.disk_stat().in_flight;
  if (n) *why += " in_flight=" + std::to_string(n);
  for (unsigned i = 0; i < q.nr_hw_queues(); i++) {
    for (const char* a : {"tags_busy", "sched_tags_busy"}) {
      const std::string path = "mq/" + std::to_string(i) + "/" + a;
      auto v = q.attr(path);
      const uint64_t busy = v ? std::stoull(*v) : 1;
      if (busy) *why += " " + path + "=" + (v ? *v : v.status().message());
      n += busy;
    }
    ElevatorQueue* eq = qi->elevator_;
    if (eq && eq->type->ops.has_work && eq->type->ops.has_work(qi->hctx(i))) {
      *why += " has_work(hctx " + std::to_string(i) + ")";
      n++;
    }
  }
  if (qi->elevator_ && qi->elevator_->type->name == "kyber") {
    const KyberStats k = kyber_stats(&q);
    for (unsigned d = 0; d < kyber::kNrDomains; d++)
      if (k.tokens_in_use[d]) {
        *why += " kyber tokens of domain " + std::to_string(d) + "=" + std::to_string(k.tokens_in_use[d]);
        n += k.tokens_in_use[d];
      }
  }
  return n;
}

}  // namespace

// Nothing signals the last tag's free (it follows the bio's end), so this
// looks until the queue holds nothing.
void expect_queue_idle(Queue& q, const char* what) {
  std::string why;
  const bool idle = eventually(
      [&] {
        why.clear();
        return held(q, &why) == 0;
      },
      1000);
  if (!idle) ADD_FAILURE() << what << ": the queue still holds" << why;
}

}  // namespace blkmq::test
