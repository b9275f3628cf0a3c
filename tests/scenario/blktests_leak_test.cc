// blktests block/033 ("add & delete ublk device and test if gendisk is
// leaked": ublk add -t null, 512 MiB of direct reads, del) and block/034
// ("load/unload null_blk memory_backed=1 to check memleak": 50 MiB written,
// the module unloaded, five times, MemFree must come back). Here: the same
// create / I/O / destroy loops, bounded, after a warm-up (the process-wide
// workers start with the first device and stay), checking that neither the
// allocator's bytes in use (support/proc_usage.h: exact, unlike RSS or
// MemFree) nor the thread count grow over the loop. The bound is relative:
// what one live device holds, so a device or its data left behind once
// per iteration fails by a wide margin.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/proc_usage.h"
#include "support/stress.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

struct LoopUsage {
  size_t base_bytes = 0, live_bytes = 0, end_bytes = 0;
  unsigned base_threads = 0, end_threads = 0;
};

// Runs `cycle` (create a device, do I/O, destroy it) twice to warm up,
// then `n` times; `cycle` reports the bytes in use while its device lived.
LoopUsage measure_loop(unsigned n, const std::function<size_t()>& cycle) {
  LoopUsage u;
  cycle();
  cycle();
  u.base_bytes = allocated_bytes();
  u.base_threads = thread_count();
  for (unsigned i = 0; i < n; i++) u.live_bytes = std::max(u.live_bytes, cycle());
  u.end_bytes = allocated_bytes();
  u.end_threads = thread_count();
  return u;
}

void expect_no_growth(const LoopUsage& u, unsigned n, const char* what) {
  const double held = double(u.live_bytes) - double(u.base_bytes);
  const double grown = double(u.end_bytes) - double(u.base_bytes);
  std::printf("[          ] %s: a live device holds %.0f KiB; after %u more cycles %+.0f KiB, threads %u -> %u\n",
              what, held / 1024, n, grown / 1024, u.base_threads, u.end_threads);
  EXPECT_GT(held, 0) << what;
  EXPECT_LT(grown, held / 4) << what << ": memory grew over the create/destroy loop";
  EXPECT_EQ(u.end_threads, u.base_threads) << what << ": threads grew over the create/destroy loop";
}

// block/033: a ublk device on the built-in null target, 8 MiB of reads, gone.
TEST(BlktestsLeak, UblkAddReadDeleteLeavesNothing) {
  Watchdog wd("block/033 ublk add/del loop", std::chrono::seconds(90));
  const unsigned n = scaled(8);
  std::vector<uint8_t> buf(1 << 20);  // outside the count: only the device's own memory is
  const LoopUsage u = measure_loop(n, [&] {
    auto r = create_device("ublk", {{"target", "null"}, {"size", "64m"}, {"nr_hw_queues", "2"}});
    EXPECT_TRUE(r) << (r ? "" : r.status().message());
    if (!r) return size_t{0};
    for (int i = 0; i < 8; i++) EXPECT_EQ((*r)->queue().read_sync(buf.data(), uint64_t(i) << 20, 1 << 20), BlkStatus::ok);
    const size_t live = allocated_bytes();
    r->reset();
    return live;
  });
  expect_no_growth(u, n, "ublk");
}

// block/034: a memory-backed null device gets 16 MiB of data, then
// is destroyed; its pages must go with it.
TEST(BlktestsLeak, MemoryBackedNullFreesItsDataWhenDestroyed) {
  Watchdog wd("block/034 null memory_backed loop", std::chrono::seconds(90));
  const unsigned n = scaled(5);
  std::vector<uint8_t> buf(1 << 20);
  const LoopUsage u = measure_loop(n, [&] {
    auto r = create_device("null", {{"memory_backed", "1"}, {"size", "64"}, {"poll_queues", "0"}});
    EXPECT_TRUE(r) << (r ? "" : r.status().message());
    if (!r) return size_t{0};
    for (int i = 0; i < 16; i++) {
      // blktests writes urandom so that nothing could be shared; null
      // stores every page written, so a byte per MiB does as well.
      std::memset(buf.data(), i + 1, buf.size());
      EXPECT_EQ((*r)->queue().write_sync(buf.data(), uint64_t(i) << 20, 1 << 20), BlkStatus::ok);
    }
    const size_t live = allocated_bytes();
    r->reset();
    return live;
  });
  expect_no_growth(u, n, "null memory_backed");
}

}  // namespace
}  // namespace blkmq::test
