// sbitmap micro benchmarks: the cost of taking and freeing tags, the
// operation every request pays twice with a scheduler (a scheduler tag and
// a driver tag) and once without. Depths are the null device's defaults
// where a number is needed (64 driver tags, 256 scheduler requests).
#include <benchmark/benchmark.h>

#include <cstdint>

#include "base/percpu.h"
#include "base/sbitmap.h"

namespace blkmq::micro {
namespace {

constexpr unsigned kDriverDepth = 64;    // null's hw_queue_depth default
constexpr unsigned kSchedDepth = 256;    // a scheduler's nr_requests default

// Raw Sbitmap: one get from a fixed hint and its deferred free, the floor
// under everything the tag code adds (hints, wake-ups).
void sbitmap_get_put(benchmark::State& state) {
  base::Sbitmap sb(kDriverDepth);
  for (auto _ : state) {
    int bit = sb.get(0);
    benchmark::DoNotOptimize(bit);
    sb.clear_bit(static_cast<unsigned>(bit));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(sbitmap_get_put);

// SbitmapQueue: get() with the calling CPU's hint and clear() with the
// waiter check, as the core takes and frees a driver tag with nobody
// waiting. The deferred-clear fold runs whenever a word looks full, so its
// cost is amortised into the per-pair number.
void sbq_get_put(benchmark::State& state) {
  base::SbitmapQueue sbq(kDriverDepth, false);
  const unsigned cpu = base::this_cpu();
  for (auto _ : state) {
    int bit = sbq.get();
    benchmark::DoNotOptimize(bit);
    sbq.clear(static_cast<unsigned>(bit), cpu);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(sbq_get_put);

// Batch allocation, as a plug with nr_ios > 1 takes its tags: get_batch()
// up to N bits from one word, then clear_batch() frees them with one atomic
// per word. items_per_second counts bits, so it compares directly with
// sbq_get_put's pairs per second; bits_per_batch shows how full batches are.
void sbq_get_put_batch(benchmark::State& state) {
  const unsigned nr = static_cast<unsigned>(state.range(0));
  base::SbitmapQueue sbq(kSchedDepth, false);
  int bits[64];
  uint64_t taken = 0;
  for (auto _ : state) {
    unsigned offset = 0;
    uint64_t mask = sbq.get_batch(nr, &offset);
    unsigned n = 0;
    for (uint64_t m = mask; m; m &= m - 1)
      bits[n++] = static_cast<int>(offset + static_cast<unsigned>(__builtin_ctzll(m)));
    sbq.clear_batch(bits, n, 0, 0);
    taken += n;
  }
  if (taken == 0) state.SkipWithError("get_batch returned no bits");
  state.SetItemsProcessed(static_cast<int64_t>(taken));
  // A batch may come back short when the word it lands in is partly used.
  state.counters["bits_per_batch"] = double(taken) / double(state.iterations());
}
BENCHMARK(sbq_get_put_batch)->Arg(8)->Arg(32);

// Two threads taking and freeing tags from one SbitmapQueue, as two CPUs
// submitting to one hw queue do. Per-CPU hints keep them in different words
// when they run on different CPUs; the 1-thread run is the baseline. Real
// time, so the number includes any time lost to cache-line transfers.
void sbq_get_put_contended(benchmark::State& state) {
  static base::SbitmapQueue shared(kDriverDepth, false);
  for (auto _ : state) {
    const unsigned cpu = base::this_cpu();
    int bit = shared.get();
    if (bit < 0) {
      state.SkipWithError("depth exhausted");
      break;
    }
    shared.clear(static_cast<unsigned>(bit), cpu);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(sbq_get_put_contended)->Threads(1)->Threads(2)->UseRealTime();

// The worst case: two threads on one raw Sbitmap searching from the same
// hint, so both hit the same word and its cache line on every operation.
void sbitmap_get_put_same_word(benchmark::State& state) {
  static base::Sbitmap shared(kDriverDepth);
  for (auto _ : state) {
    int bit = shared.get(0);
    if (bit < 0) {
      state.SkipWithError("depth exhausted");
      break;
    }
    shared.clear_bit(static_cast<unsigned>(bit));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(sbitmap_get_put_same_word)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace blkmq::micro
