// The null device's power-cut model: PageStore::power_cut drops the
// volatile write-back cache and keeps what flushes, FUA writes and
// eviction made durable, per whole 4 KiB page; `device/power_cut` reaches
// it from outside. Durability through the core: tests/scenario/powercut_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "base/event.h"
#include "drivers/null/null_store.h"
#include "support/device_test_util.h"
#include "support/watchdog.h"

namespace blkmq::nullb {
namespace {

constexpr uint64_t kCap = 16ull << 20;
constexpr uint32_t kPage = PageStore::kPageSize;

// A page whose every 32-bit word is v: a torn page would mix two values.
std::vector<unsigned char> stamped(uint32_t v, size_t pages = 1) {
  std::vector<unsigned char> b(pages * kPage);
  for (size_t i = 0; i < b.size(); i += 4) std::memcpy(&b[i], &v, 4);
  return b;
}

// The value every word of page `idx` holds, or -1 if the page is torn.
int64_t page_value(PageStore& s, uint64_t idx) {
  std::vector<unsigned char> b(kPage);
  EXPECT_EQ(s.read(idx * kPage, b.data(), kPage), BlkStatus::ok);
  uint32_t first;
  std::memcpy(&first, b.data(), 4);
  for (size_t i = 4; i < kPage; i += 4)
    if (std::memcmp(&b[i], &first, 4) != 0) return -1;
  return first;
}

TEST(NullPowerCut, CachedWritesAreLostFlushedOnesStay) {
  PageStore s(kCap, 1 << 20, 1);
  ASSERT_EQ(s.write(0, stamped(1, 4).data(), 4 * kPage, false), BlkStatus::ok);
  ASSERT_EQ(s.flush(), BlkStatus::ok);
  ASSERT_EQ(s.write(kPage, stamped(2, 2).data(), 2 * kPage, false), BlkStatus::ok);  // pages 1, 2
  ASSERT_EQ(s.write(8 * kPage, stamped(3).data(), kPage, false), BlkStatus::ok);    // never flushed
  EXPECT_EQ(s.power_cut(), 3u);
  EXPECT_EQ(s.cached_pages(), 0u);
  for (uint64_t i = 0; i < 4; i++) EXPECT_EQ(page_value(s, i), 1) << "page " << i;
  EXPECT_EQ(page_value(s, 8), 0) << "a page never made durable reads as never written";
  // The device works on after the cut.
  ASSERT_EQ(s.write(0, stamped(4).data(), kPage, false), BlkStatus::ok);
  EXPECT_EQ(page_value(s, 0), 4);
}

TEST(NullPowerCut, FuaWritesAreDurable) {
  PageStore s(kCap, 1 << 20, 1);
  ASSERT_EQ(s.write(0, stamped(5).data(), kPage, false), BlkStatus::ok);
  ASSERT_EQ(s.write(0, stamped(6).data(), kPage, true), BlkStatus::ok);  // over a cached copy
  ASSERT_EQ(s.write(kPage, stamped(7).data(), kPage, true), BlkStatus::ok);
  EXPECT_EQ(s.power_cut(), 0u);
  EXPECT_EQ(page_value(s, 0), 6);
  EXPECT_EQ(page_value(s, 1), 7);
}

TEST(NullPowerCut, EvictedPagesAreDurable) {
  PageStore s(kCap, 8 * kPage, 1);  // 8 cache pages
  for (uint32_t i = 0; i < 32; i++) ASSERT_EQ(s.write(i * kPage, stamped(100 + i).data(), kPage, false), BlkStatus::ok);
  const uint64_t durable = s.backing_pages();
  EXPECT_EQ(durable, 24u);
  EXPECT_EQ(s.power_cut(), 8u);
  uint64_t kept = 0;
  for (uint32_t i = 0; i < 32; i++) {
    const int64_t v = page_value(s, i);
    EXPECT_TRUE(v == 100 + i || v == 0) << "page " << i << " reads " << v;
    kept += v == 100 + i;
  }
  EXPECT_EQ(kept, durable);
}

TEST(NullPowerCut, PartialWriteIsLostAsAWholePage) {
  PageStore s(kCap, 1 << 20, 1);
  ASSERT_EQ(s.write(0, stamped(9).data(), kPage, false), BlkStatus::ok);
  ASSERT_EQ(s.flush(), BlkStatus::ok);
  const auto part = stamped(10);
  ASSERT_EQ(s.write(1024, part.data(), 512, false), BlkStatus::ok);
  EXPECT_EQ(page_value(s, 0), -1) << "before the cut the page holds both";
  EXPECT_EQ(s.power_cut(), 1u);
  EXPECT_EQ(page_value(s, 0), 9);
}

TEST(NullPowerCut, WithoutACacheNothingIsLost) {
  PageStore s(kCap, 0);
  ASSERT_EQ(s.write(0, stamped(11).data(), kPage, false), BlkStatus::ok);
  EXPECT_EQ(s.power_cut(), 0u);
  EXPECT_EQ(page_value(s, 0), 11);
}

// Writers stamp multi-page writes with rising versions, some FUA, and
// flush now and then while a cutter cuts: every page ends untorn, at a
// version no newer than its last write and no older than the last one
// made durable: by FUA, or by a flush with no cut between the write and
// the flush's end (a cut in between may have dropped it first, as a disk
// would).
TEST(NullPowerCut, CutsWhileWritersRunTearNoPage) {
  test::Watchdog wd("NullPowerCut.CutsWhileWritersRunTearNoPage", std::chrono::seconds(60));
  PageStore s(kCap, 64 * kPage, 4);
  constexpr unsigned kThreads = 4, kPagesEach = 64;
  const unsigned kOps = test::scaled(1500);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> gen{0};  // odd while a cut runs
  base::Event clean_flush;        // a flush ended with no cut since it began
  std::thread cutter([&] {
    while (!stop.load()) {
      gen.fetch_add(1);
      s.power_cut();
      gen.fetch_add(1);
      // Back to back cuts would leave no flush without a cut in it, and
      // the flush half of the check would test nothing: the next cut waits
      // for a flush that ran clear of this one (or for the writers' end).
      clean_flush.wait();
    }
  });
  struct PageLog {
    uint32_t last = 0, floor = 0;
    uint64_t gen = 1;  // when `last` was written; odd: unknown
  };
  std::vector<std::vector<PageLog>> log(kThreads, std::vector<PageLog>(kPagesEach));
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(t + 1);
      for (uint32_t op = 1; op <= kOps; op++) {
        const unsigned first = rng() % (kPagesEach - 3), n = 1 + rng() % 3;
        const uint32_t v = (t << 24) | op;  // rises per thread
        const bool fua = op % 11 == 0;
        const uint64_t g = gen.load();
        ASSERT_EQ(s.write((uint64_t(t) * kPagesEach + first) * kPage, stamped(v, n).data(), n * kPage, fua),
                  BlkStatus::ok);
        for (unsigned i = first; i < first + n; i++) log[t][i] = {v, fua ? v : log[t][i].floor, g};
        if (op % 50 == 0) {
          const uint64_t begin = gen.load();
          ASSERT_EQ(s.flush(), BlkStatus::ok);
          const uint64_t end = gen.load();
          for (PageLog& p : log[t])
            if (p.gen == end && end % 2 == 0) p.floor = p.last;
          if (begin == end && end % 2 == 0) clean_flush.notify();
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  stop = true;
  clean_flush.notify();
  cutter.join();
  s.power_cut();
  unsigned flushed_checks = 0;
  for (unsigned t = 0; t < kThreads; t++) {
    for (unsigned i = 0; i < kPagesEach; i++) {
      const PageLog& p = log[t][i];
      const int64_t v = page_value(s, uint64_t(t) * kPagesEach + i);
      ASSERT_GE(v, 0) << "torn page " << i << " of writer " << t;
      EXPECT_GE(uint32_t(v), p.floor) << "page " << i << " of writer " << t;
      EXPECT_LE(uint32_t(v), p.last) << "page " << i << " of writer " << t;
      flushed_checks += p.floor && (p.floor & 0xffffff) % 11 != 0;
    }
  }
  EXPECT_GT(flushed_checks, 0u) << "no flush ran without a cut: the check tested FUA only";
}

TEST(NullPowerCut, DeviceAttributeCutsTheCache) {
  auto dev = devtest::make_device("null", {{"memory_backed", "1"}, {"size", "16"}, {"cache_size", "16"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  auto a = devtest::pattern(8 * kPage, 1), b = devtest::pattern(8 * kPage, 2);
  ASSERT_EQ(q.write_sync(a.data(), 0, a.size()), BlkStatus::ok);
  ASSERT_EQ(q.flush_sync(), BlkStatus::ok);
  ASSERT_EQ(q.write_sync(b.data(), 0, b.size()), BlkStatus::ok);
  EXPECT_EQ(*q.attr("device/cache_pages"), "8");
  EXPECT_EQ(*q.attr("device/power_cut"), "0");
  ASSERT_TRUE(q.set_attr("device/power_cut", "1\n"));
  EXPECT_EQ(*q.attr("device/power_cut"), "1");
  EXPECT_EQ(*q.attr("device/cache_pages"), "0");
  std::vector<unsigned char> out(a.size());
  ASSERT_EQ(q.read_sync(out.data(), 0, out.size()), BlkStatus::ok);
  EXPECT_EQ(out, a);
  Status bad = q.set_attr("device/power_cut", "2");
  EXPECT_FALSE(bad);
  EXPECT_NE(bad.message().find("write 1"), std::string::npos) << bad.message();
  EXPECT_FALSE(q.set_attr("device/cache_pages", "0"));
  auto names = q.attr_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "device/power_cut"), names.end());
}

TEST(NullPowerCut, OnlyAMemoryBackedDeviceHasTheAttribute) {
  auto dev = devtest::make_device("null", {{"size", "16"}});
  ASSERT_TRUE(dev);
  EXPECT_FALSE(dev->queue().set_attr("device/power_cut", "1"));
  EXPECT_FALSE(dev->queue().attr("device/power_cut"));
}

}  // namespace
}  // namespace blkmq::nullb
