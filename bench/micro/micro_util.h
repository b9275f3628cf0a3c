// What the device micro benchmarks share: a null device with inline
// completion, and a fixed set of reusable 4k read bios that count their own
// completions so a benchmark loop can submit, wait and resubmit without
// allocating.
#pragma once

#include <benchmark/benchmark.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "blkmq/blkmq.h"

namespace blkmq::micro {

constexpr uint32_t kIoBytes = 4096;
// Bios of one batch are this far apart, so neither the plug nor a scheduler
// merges them: every bio becomes its own request, and the benchmark measures
// insert and dispatch per request rather than the merge path.
constexpr uint64_t kBioStride = 1ull << 20;

// Creates a null device with one submission queue, no poll queue, inline
// completion (irqmode=0: the driver ends each request inside queue_rq) and
// the given scheduler. On failure it marks the benchmark state as failed
// (SkipWithError) and returns nullptr; the caller then returns at once.
// Task context; allocates and may start threads, so keep it outside the
// timed loop.
std::unique_ptr<Device> make_null_device(benchmark::State& state, std::string_view scheduler);

// N read bios with their own 4k buffers, kBioStride apart. Not thread-safe:
// one benchmark thread owns a batch. The bios' end_io may run on any thread
// (inline in submit, or on kblockd when a scheduler punts the queue run).
class BioBatch {
 public:
  explicit BioBatch(unsigned nr);
  BioBatch(const BioBatch&) = delete;
  BioBatch& operator=(const BioBatch&) = delete;

  // Resets every bio and submits all of them to q, in order. The previous
  // round must have completed (wait_all() returned true).
  void submit_all(Queue& q);
  // Waits until every bio of the last submit_all() has ended: spins, then
  // yields, so a completion run elsewhere (kblockd) can make progress on a
  // shared CPU. False after about 5 s, or if any bio failed.
  bool wait_all();
  unsigned size() const { return static_cast<unsigned>(bios_.size()); }

 private:
  static void end_io(Bio* bio);

  std::vector<Bio> bios_;
  std::vector<iovec> iovs_;
  std::vector<unsigned char> bufs_;
  std::atomic<unsigned> ended_{0};
  std::atomic<unsigned> errors_{0};
};

// Registers sched_single/NAME and sched_plug8/NAME for every elevator in
// registered_elevators(), and for "none" first. Called once from main() before
// the benchmarks run; not thread-safe.
void register_sched_benchmarks();

}  // namespace blkmq::micro
