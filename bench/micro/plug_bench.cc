// Plug micro benchmarks: what a blkmq::Plug costs and saves. N 4k reads go
// to a null device without a scheduler (irqmode=0, so each request ends
// inside queue_rq and no other thread is involved); the plugged variant
// holds them and flushes them as one list when the Plug object ends. CPU
// time (and items_per_second) is the whole process's, as in sched_bench.cc.
#include <benchmark/benchmark.h>

#include "blkmq/blkmq.h"
#include "micro_util.h"

namespace blkmq::micro {
namespace {

// N bios added to a plug (tags taken as one batch of N) and one flush that
// issues the whole list. N = 32 is kPlugMaxRequests, the most a plug on one
// queue holds: a 33rd request would flush the 32 first.
void plug_add_flush(benchmark::State& state) {
  const unsigned nr = static_cast<unsigned>(state.range(0));
  auto dev = make_null_device(state, "none");
  if (!dev) return;
  Queue& q = dev->queue();
  BioBatch batch(nr);
  for (auto _ : state) {
    {
      Plug plug(nr);
      batch.submit_all(q);
    }
    if (!batch.wait_all()) {
      state.SkipWithError("bios did not complete");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * nr);
}
BENCHMARK(plug_add_flush)->Arg(1)->Arg(8)->Arg(32)->MeasureProcessCPUTime();

// The same N bios without a plug: each is issued on its own inside
// submit_bio. The baseline that shows what plugging buys per bio.
void submit_unplugged(benchmark::State& state) {
  const unsigned nr = static_cast<unsigned>(state.range(0));
  auto dev = make_null_device(state, "none");
  if (!dev) return;
  Queue& q = dev->queue();
  BioBatch batch(nr);
  for (auto _ : state) {
    batch.submit_all(q);
    if (!batch.wait_all()) {
      state.SkipWithError("bios did not complete");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * nr);
}
BENCHMARK(submit_unplugged)->Arg(1)->Arg(8)->Arg(32)->MeasureProcessCPUTime();

}  // namespace
}  // namespace blkmq::micro
