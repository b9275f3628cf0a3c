// Scheduler micro benchmarks: what each registered elevator adds to one
// I/O. A null device with inline completion (irqmode=0) and one hw queue
// puts the scheduler's insert, dispatch and completion hooks on the path of
// every request with nothing else in the way; comparing against "none"
// gives each scheduler's own cost. bench/sched_cost.sh measures the same
// through `blkmq bench` at queue depth 32; these are the depth-1 and
// plugged-batch points, per call rather than per run. The CPU column (and
// items_per_second) is the whole process's CPU time, so work a scheduler
// hands to kblockd or a timer thread counts, and time the machine gives to
// other processes does not.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "blkmq/blkmq.h"
#include "blkmq/elevator/elevator.h"
#include "micro_util.h"

namespace blkmq::micro {
namespace {

// One unplugged 4k read per iteration: tag (scheduler tag and driver tag
// with an elevator), insert, the synchronous queue run that dispatches it,
// inline completion. The request is the only one in the scheduler, so this
// is the latency-bound, depth-1 cost of the scheduler's hooks.
void sched_single(benchmark::State& state, std::string scheduler) {
  auto dev = make_null_device(state, scheduler);
  if (!dev) return;
  Queue& q = dev->queue();
  BioBatch batch(1);
  for (auto _ : state) {
    batch.submit_all(q);
    if (!batch.wait_all()) {
      state.SkipWithError("bio did not complete");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

// Eight 4k reads (not mergeable: kBioStride apart) under one plug per
// iteration: the plug flush inserts the eight as one list, and one queue
// run dispatches them, so the scheduler holds several requests at once and
// its sorting and dispatch choice are exercised, not only its fast path.
void sched_plug8(benchmark::State& state, std::string scheduler) {
  constexpr unsigned kBatch = 8;
  auto dev = make_null_device(state, scheduler);
  if (!dev) return;
  Queue& q = dev->queue();
  BioBatch batch(kBatch);
  for (auto _ : state) {
    {
      Plug plug(kBatch);
      batch.submit_all(q);
    }
    if (!batch.wait_all()) {
      state.SkipWithError("bios did not complete");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

}  // namespace

void register_sched_benchmarks() {
  // "none" is not an elevator in the registry, but it is the baseline.
  std::vector<std::string> names = {"none"};
  for (std::string& name : registered_elevators()) names.push_back(std::move(name));
  for (const std::string& name : names) {
    benchmark::RegisterBenchmark(("sched_single/" + name).c_str(), sched_single, name)
        ->MeasureProcessCPUTime();
    benchmark::RegisterBenchmark(("sched_plug8/" + name).c_str(), sched_plug8, name)
        ->MeasureProcessCPUTime();
  }
}

}  // namespace blkmq::micro
