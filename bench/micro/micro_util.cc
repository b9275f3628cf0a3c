// Device and bio helpers for the micro benchmarks (see micro_util.h).
#include "micro_util.h"

#include <chrono>
#include <thread>

namespace blkmq::micro {

std::unique_ptr<Device> make_null_device(benchmark::State& state, std::string_view scheduler) {
  // 1 GiB keeps the strided offsets of a 32-bio batch far inside capacity.
  auto made = create_device("null", {{"irqmode", "0"}, {"poll_queues", "0"}, {"size", "1024"}});
  if (!made) {
    state.SkipWithError(("create_device(null): " + made.status().message()).c_str());
    return nullptr;
  }
  Status st = made.value()->queue().set_attr("queue/scheduler", scheduler);
  if (!st) {
    state.SkipWithError(("queue/scheduler=" + std::string(scheduler) + ": " + st.message()).c_str());
    return nullptr;
  }
  return std::move(made.value());
}

BioBatch::BioBatch(unsigned nr) : bios_(nr), iovs_(nr), bufs_(size_t(nr) * kIoBytes) {
  for (unsigned i = 0; i < nr; i++) {
    iovs_[i] = {bufs_.data() + size_t(i) * kIoBytes, kIoBytes};
    Bio& b = bios_[i];
    b.op = ReqOp::read;
    b.sector = (uint64_t(i) * kBioStride) >> kSectorShift;
    b.size = kIoBytes;
    b.vec = &iovs_[i];
    b.nr_vecs = 1;
    b.end_io = &BioBatch::end_io;
    b.private_data = this;
  }
}

void BioBatch::end_io(Bio* bio) {
  auto* self = static_cast<BioBatch*>(bio->private_data);
  if (bio->status != BlkStatus::ok) self->errors_.fetch_add(1, std::memory_order_relaxed);
  self->ended_.fetch_add(1, std::memory_order_release);
}

void BioBatch::submit_all(Queue& q) {
  ended_.store(0, std::memory_order_relaxed);
  for (Bio& b : bios_) {
    bio_reinit(&b);
    q.submit_bio(&b);
  }
}

bool BioBatch::wait_all() {
  const unsigned want = size();
  // The common case: inline completion has already ended everything.
  if (ended_.load(std::memory_order_acquire) == want) return errors_.load() == 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (unsigned spins = 0; ended_.load(std::memory_order_acquire) < want; spins++) {
    if (spins < 64) continue;
    std::this_thread::yield();
    if ((spins & 1023) == 0 && std::chrono::steady_clock::now() > deadline) return false;
  }
  return errors_.load() == 0;
}

}  // namespace blkmq::micro
