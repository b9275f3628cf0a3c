// The null driver's sparse page store and write-back cache: no core needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "drivers/null/null_store.h"

namespace blkmq::nullb {
namespace {

constexpr uint64_t kCap = 64ull << 20;

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<unsigned char>(seed * 131 + i * 7 + 1);
  return v;
}

// This process's resident memory (VmRSS), in KiB; -1 if unreadable.
long resident_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

bool all_zero(const std::vector<unsigned char>& v) {
  for (unsigned char c : v) {
    if (c) return false;
  }
  return true;
}

TEST(NullStore, UnwrittenReadsZero) {
  PageStore s(kCap, 0);
  std::vector<unsigned char> buf(8192, 0xAB);
  EXPECT_EQ(s.read(12345 * 512, buf.data(), buf.size()), BlkStatus::ok);
  EXPECT_TRUE(all_zero(buf));
  EXPECT_EQ(s.backing_pages(), 0u);
}

TEST(NullStore, WriteReadBackAcrossPages) {
  PageStore s(kCap, 0);
  auto data = pattern(3 * 4096 + 1024, 1);
  const uint64_t off = 4096 - 512;  // unaligned to pages, spans 5 pages
  ASSERT_EQ(s.write(off, data.data(), data.size(), false), BlkStatus::ok);
  std::vector<unsigned char> out(data.size());
  ASSERT_EQ(s.read(off, out.data(), out.size()), BlkStatus::ok);
  EXPECT_EQ(out, data);
  EXPECT_EQ(s.backing_pages(), 5u);
  // The bytes around the write are still zero.
  std::vector<unsigned char> before(512), after(512);
  s.read(off - 512, before.data(), 512);
  s.read(off + data.size(), after.data(), 512);
  EXPECT_TRUE(all_zero(before));
  EXPECT_TRUE(all_zero(after));
}

TEST(NullStore, OutOfRangeIsInval) {
  PageStore s(1 << 20, 0);
  unsigned char b[512] = {};
  EXPECT_EQ(s.write((1 << 20) - 256, b, 512, false), BlkStatus::inval);
  EXPECT_EQ(s.read(1 << 20, b, 512), BlkStatus::inval);
  EXPECT_EQ(s.read(UINT64_MAX - 100, b, 512), BlkStatus::inval);
  EXPECT_EQ(s.discard(1 << 20, 512), BlkStatus::inval);
  EXPECT_EQ(s.read((1 << 20) - 512, b, 512), BlkStatus::ok);
}

TEST(NullStore, DiscardFreesWholePagesAndZeroesParts) {
  PageStore s(kCap, 0);
  auto data = pattern(4 * 4096, 2);
  ASSERT_EQ(s.write(0, data.data(), data.size(), false), BlkStatus::ok);
  ASSERT_EQ(s.backing_pages(), 4u);
  // Discard [2048, 2048 + 8192): half of page 0, page 1 whole, half of page 2.
  ASSERT_EQ(s.discard(2048, 8192), BlkStatus::ok);
  EXPECT_EQ(s.backing_pages(), 3u);
  std::vector<unsigned char> out(data.size());
  s.read(0, out.data(), out.size());
  for (size_t i = 0; i < out.size(); i++) {
    bool discarded = i >= 2048 && i < 2048 + 8192;
    ASSERT_EQ(out[i], discarded ? 0 : data[i]) << i;
  }
}

TEST(NullStore, CacheHoldsWritesUntilFlush) {
  PageStore s(kCap, 1 << 20, 4);  // 256 pages: 64 per shard
  EXPECT_TRUE(s.has_cache());
  auto data = pattern(16 * 4096, 3);
  ASSERT_EQ(s.write(0, data.data(), data.size(), false), BlkStatus::ok);
  EXPECT_EQ(s.cached_pages(), 16u);
  EXPECT_EQ(s.backing_pages(), 0u);
  std::vector<unsigned char> out(data.size());
  s.read(0, out.data(), out.size());
  EXPECT_EQ(out, data);
  ASSERT_EQ(s.flush(), BlkStatus::ok);
  EXPECT_EQ(s.cached_pages(), 0u);
  EXPECT_EQ(s.backing_pages(), 16u);
  s.read(0, out.data(), out.size());
  EXPECT_EQ(out, data);
}

TEST(NullStore, CachePartialWriteKeepsBackingData) {
  PageStore s(kCap, 1 << 20, 1);
  auto page = pattern(4096, 4);
  ASSERT_EQ(s.write(0, page.data(), 4096, true), BlkStatus::ok);  // FUA: straight to backing
  EXPECT_EQ(s.cached_pages(), 0u);
  EXPECT_EQ(s.backing_pages(), 1u);
  auto part = pattern(512, 5);
  ASSERT_EQ(s.write(1024, part.data(), 512, false), BlkStatus::ok);
  EXPECT_EQ(s.cached_pages(), 1u);
  std::vector<unsigned char> out(4096);
  s.read(0, out.data(), 4096);
  std::memcpy(page.data() + 1024, part.data(), 512);
  EXPECT_EQ(out, page);
  s.flush();
  s.read(0, out.data(), 4096);
  EXPECT_EQ(out, page);
}

TEST(NullStore, CacheEvictsWhenFull) {
  PageStore s(kCap, 8 * 4096, 1);  // 8 cache pages
  auto data = pattern(32 * 4096, 6);
  ASSERT_EQ(s.write(0, data.data(), data.size(), false), BlkStatus::ok);
  EXPECT_LE(s.cached_pages(), 8u);
  EXPECT_EQ(s.cached_pages() + s.backing_pages(), 32u);
  std::vector<unsigned char> out(data.size());
  s.read(0, out.data(), out.size());
  EXPECT_EQ(out, data);
}

TEST(NullStore, FuaWritesThroughCachedPage) {
  PageStore s(kCap, 1 << 20, 1);
  auto a = pattern(4096, 7);
  auto b = pattern(4096, 8);
  s.write(0, a.data(), 4096, false);
  EXPECT_EQ(s.cached_pages(), 1u);
  s.write(0, b.data(), 4096, true);
  EXPECT_EQ(s.cached_pages(), 0u);
  std::vector<unsigned char> out(4096);
  s.read(0, out.data(), 4096);
  EXPECT_EQ(out, b);
}

TEST(NullStore, DiscardDropsCachedCopies) {
  PageStore s(kCap, 1 << 20, 1);
  auto a = pattern(8192, 9);
  s.write(0, a.data(), 8192, false);
  s.flush();
  s.write(0, a.data(), 8192, false);  // cached again over backing copies
  ASSERT_EQ(s.discard(0, 8192), BlkStatus::ok);
  EXPECT_EQ(s.cached_pages(), 0u);
  EXPECT_EQ(s.backing_pages(), 0u);
  std::vector<unsigned char> out(8192, 1);
  s.read(0, out.data(), out.size());
  EXPECT_TRUE(all_zero(out));
}

// The default null device is 250 GiB: its last pages have the largest keys
// the index takes, and a capacity that ends inside a page still stores
// that page's first part.
TEST(NullStore, PagesAtTheEndOfALargeOrRaggedDevice) {
  for (uint64_t cap : {250ull << 30, (1ull << 20) + 512}) {
    for (uint64_t cache : {0ull, 1ull << 20}) {
      PageStore s(cap, cache);
      auto d = pattern(512, 12);
      ASSERT_EQ(s.write(cap - 512, d.data(), 512, false), BlkStatus::ok) << cap;
      ASSERT_EQ(s.write(cap - 4096 - 512, d.data(), 512, false), BlkStatus::ok) << cap;
      std::vector<unsigned char> out(512);
      ASSERT_EQ(s.read(cap - 512, out.data(), 512), BlkStatus::ok);
      EXPECT_EQ(out, d);
      ASSERT_EQ(s.flush(), BlkStatus::ok);
      EXPECT_EQ(s.backing_pages(), 2u);
      ASSERT_EQ(s.read(cap - 4096 - 512, out.data(), 512), BlkStatus::ok);
      EXPECT_EQ(out, d);
      EXPECT_EQ(s.write(cap - 256, d.data(), 512, false), BlkStatus::inval);
      // The last page whole (or what the device has of it), discarded.
      const uint64_t last = (cap - 1) / 4096 * 4096;
      ASSERT_EQ(s.discard(last, cap - last), BlkStatus::ok);
      EXPECT_EQ(s.backing_pages(), cap - last == 4096 ? 1u : 2u) << cap;
    }
  }
}

// A full cache evicts every page in turn, not one page over and over: a
// stream of new pages twice the cache's size leaves only the newest
// cached, and the older ones written back.
TEST(NullStore, EvictionWalksTheCache) {
  PageStore s(kCap, 8 * 4096, 1);  // 8 cache pages, one shard
  for (uint64_t p = 0; p < 16; p++) {
    auto d = pattern(4096, static_cast<unsigned>(p));
    ASSERT_EQ(s.write(p * 4096, d.data(), 4096, false), BlkStatus::ok);
  }
  EXPECT_EQ(s.cached_pages(), 8u);
  EXPECT_EQ(s.backing_pages(), 8u);
  // A power cut loses exactly the cached pages, the 8 newest.
  EXPECT_EQ(s.power_cut(), 8u);
  std::vector<unsigned char> out(4096);
  for (uint64_t p = 0; p < 16; p++) {
    s.read(p * 4096, out.data(), 4096);
    if (p < 8) {
      EXPECT_EQ(out, pattern(4096, static_cast<unsigned>(p))) << p;
    } else {
      EXPECT_TRUE(all_zero(out)) << p;
    }
  }
}

TEST(NullStore, ConcurrentDisjointWriters) {
  PageStore s(kCap, 256 * 4096);
  const int kThreads = 8, kOps = 500;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kOps; i++) {
        // Thread t owns blocks t, t+8, t+16, ... of 1 KiB.
        uint64_t blk = (rng() % 4096) * kThreads + t;
        auto d = pattern(1024, static_cast<unsigned>(blk));
        ASSERT_EQ(s.write(blk * 1024, d.data(), 1024, i % 7 == 0), BlkStatus::ok);
        std::vector<unsigned char> out(1024);
        ASSERT_EQ(s.read(blk * 1024, out.data(), 1024), BlkStatus::ok);
        ASSERT_EQ(out, d);
        if (i % 50 == 0) s.flush();
      }
    });
  }
  for (auto& t : ts) t.join();
}


// Pages come from a per-shard pool of mapped chunks, and a discarded page
// goes back to it (dropped from memory) for reuse. A reused page must read
// as zeros around a partial write, in the backing store and in the cache,
// or old data would leak into a new page.
TEST(NullStore, ADiscardedPageReusedReadsZerosAroundAPartialWrite) {
  for (uint64_t cache : {uint64_t{0}, uint64_t{1} << 20}) {
    PageStore s(kCap, cache, 1);  // one shard: every page from one pool
    const auto full = pattern(4096, 3);
    ASSERT_EQ(s.write(0, full.data(), full.size(), /*fua=*/true), BlkStatus::ok);
    ASSERT_EQ(s.discard(0, 4096), BlkStatus::ok);
    EXPECT_EQ(s.backing_pages(), 0u);
    const unsigned char one = 0x5c;
    ASSERT_EQ(s.write(5 * 4096 + 100, &one, 1, false), BlkStatus::ok);  // takes the freed page
    std::vector<unsigned char> got(4096);
    ASSERT_EQ(s.read(5 * 4096, got.data(), got.size()), BlkStatus::ok);
    EXPECT_EQ(got[100], one) << "cache " << cache;
    got[100] = 0;
    EXPECT_TRUE(all_zero(got)) << "old data in a reused page, cache " << cache;
  }
}

TEST(NullPagePool, PagesAreZeroedAlignedAndReusedAfterPut) {
  PagePool pool;
  pool.set_max_pages(2);  // chunks of two pages
  std::vector<unsigned char*> pages;
  for (int i = 0; i < 5; i++) {
    auto* p = static_cast<unsigned char*>(pool.get());
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % PagePool::kPageSize, 0u);
    std::vector<unsigned char> page(p, p + PagePool::kPageSize);
    EXPECT_TRUE(all_zero(page));
    std::memset(p, 0xee, PagePool::kPageSize);
    pages.push_back(p);
  }
  // Kept (not released): handed out again, zeroed by hand.
  pool.put(pages[3]);
  auto* again = static_cast<unsigned char*>(pool.get());
  EXPECT_EQ(again, pages[3]);
  EXPECT_TRUE(all_zero(std::vector<unsigned char>(again, again + PagePool::kPageSize)));
  // Released (neighbours 0 and 1 in one call, 4 alone): zeros too.
  for (int i : {4, 0, 1}) pool.put(pages[i]);
  pool.release();
  std::vector<unsigned char*> back;
  for (int i = 0; i < 3; i++) back.push_back(static_cast<unsigned char*>(pool.get()));
  std::sort(back.begin(), back.end());
  std::vector<unsigned char*> want{pages[0], pages[1], pages[4]};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(back, want);
  for (unsigned char* p : back) EXPECT_TRUE(all_zero(std::vector<unsigned char>(p, p + PagePool::kPageSize)));
}

// A discard gives the pages' memory back to the kernel, as null_blk frees
// them: the process's resident memory falls by about what was discarded
// (the store kept it before the pool: glibc kept freed pages in its arena).
TEST(NullStore, DiscardGivesTheMemoryBack) {
  constexpr uint64_t kBytes = 64ull << 20;
  PageStore s(kBytes, 0);
  const auto data = pattern(1 << 20, 9);
  for (uint64_t off = 0; off < kBytes; off += data.size())
    ASSERT_EQ(s.write(off, data.data(), data.size(), false), BlkStatus::ok);
  const long before = resident_kib();
  ASSERT_EQ(s.discard(0, kBytes), BlkStatus::ok);
  const long after = resident_kib();
  EXPECT_EQ(s.backing_pages(), 0u);
  EXPECT_GT(before - after, static_cast<long>(kBytes / 1024 * 9 / 10))
      << "resident " << before << " KiB before the discard, " << after << " after";
}

}  // namespace
}  // namespace blkmq::nullb
