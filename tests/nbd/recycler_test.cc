// The NBD connection's recycling of request state and small payload
// buffers (nbd/recycler.h, nbd/buffer_pool.h): blocks given back from
// other threads are taken again, each once, and whatever is kept at the
// end is released.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

#include "nbd/buffer_pool.h"
#include "nbd/recycler.h"
#include "support/watchdog.h"

namespace blkmq::nbd {
namespace {

std::atomic<int> g_released{0};
void count_and_free(void* p) {
  g_released++;
  std::free(p);
}

TEST(Recycler, BlocksGivenFromManyThreadsAreTakenOnceEach) {
  test::Watchdog wd("Recycler.BlocksGivenFromManyThreadsAreTakenOnceEach", std::chrono::seconds(60));
  g_released = 0;
  constexpr int kThreads = 4, kEach = 2000;
  {
    Recycler r(count_and_free);
    EXPECT_EQ(r.take(), nullptr);
    // The taker hands blocks to the givers and takes them back while they
    // give, as a connection's reader and its senders do.
    std::vector<std::vector<void*>> handed(kThreads);
    for (int t = 0; t < kThreads; t++)
      for (int i = 0; i < kEach; i++) handed[t].push_back(std::malloc(64));
    std::set<void*> all;
    for (auto& v : handed) all.insert(v.begin(), v.end());
    std::vector<std::thread> givers;
    for (int t = 0; t < kThreads; t++)
      givers.emplace_back([&, t] {
        for (void* p : handed[t]) r.give(p);
      });
    std::set<void*> taken;
    size_t got = 0;
    while (got < all.size() / 2) {
      if (void* p = r.take()) {
        EXPECT_TRUE(taken.insert(p).second) << "a block taken twice";
        EXPECT_TRUE(all.count(p)) << "a block never given";
        got++;
      }
    }
    for (auto& g : givers) g.join();
    // Half taken back: give them again, the rest stays kept.
    for (void* p : taken) r.give(p);
    EXPECT_EQ(g_released.load(), 0);
  }
  // The destructor released every block, each once.
  EXPECT_EQ(g_released.load(), kThreads * kEach);
}

TEST(BufferPool, SmallBuffersComeInPowerOfTwoClassesAndAreReused) {
  BufferPool pool;
  size_t cap = 0;
  char* a = pool.get(12 << 10, &cap);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(cap, 16u << 10);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % BufferPool::kAlign, 0u);
  std::thread([&] { pool.put(a, cap); }).join();  // freed by another thread, as a sender does
  size_t cap2 = 0;
  EXPECT_EQ(pool.get(16 << 10, &cap2), a);  // the same class gets it back
  EXPECT_EQ(cap2, 16u << 10);
  size_t cap3 = 0;
  char* b = pool.get(1, &cap3);  // a smaller class does not
  EXPECT_NE(b, a);
  EXPECT_EQ(cap3, BufferPool::kAlign);
  size_t cap4 = 0;
  char* big = pool.get(BufferPool::kSmallMax + 1, &cap4);  // past the classes: exact pages
  EXPECT_EQ(cap4, BufferPool::kSmallMax + BufferPool::kAlign);
  pool.put(big, cap4);
  pool.put(b, cap3);
  pool.put(a, cap2);
}

}  // namespace
}  // namespace blkmq::nbd
