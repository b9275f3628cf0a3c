#include "base/sbitmap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "base/percpu.h"
#include "support/stress.h"

namespace blkmq::base {
namespace {

std::vector<int> drain(Sbitmap& sb, unsigned hint = 0) {
  std::vector<int> got;
  for (int nr; (nr = sb.get(hint)) >= 0;) got.push_back(nr);
  return got;
}

TEST(Sbitmap, AutoShiftKeepsAboutFourWords) {
  EXPECT_EQ(Sbitmap(3).shift(), 6u);
  EXPECT_EQ(Sbitmap(4).shift(), 0u);
  EXPECT_EQ(Sbitmap(16).shift(), 2u);
  EXPECT_EQ(Sbitmap(64).shift(), 4u);
  EXPECT_EQ(Sbitmap(256).shift(), 6u);
  EXPECT_EQ(Sbitmap(10000).shift(), 6u);
  EXPECT_EQ(Sbitmap(100, 3).shift(), 3u);
}

TEST(Sbitmap, AllocatesEveryBitExactlyOnceThenFails) {
  for (unsigned depth : {1u, 3u, 7u, 63u, 64u, 100u, 128u, 1000u}) {
    for (int shift : {-1, 0, 3, 6}) {
      for (bool rr : {false, true}) {
        Sbitmap sb(depth, shift, rr);
        std::vector<int> got = drain(sb, depth / 2);
        ASSERT_EQ(got.size(), depth) << depth << " " << shift << " " << rr;
        std::set<int> uniq(got.begin(), got.end());
        ASSERT_EQ(uniq.size(), depth);
        EXPECT_EQ(*uniq.begin(), 0);
        EXPECT_EQ(*uniq.rbegin(), static_cast<int>(depth) - 1);
        EXPECT_EQ(sb.get(0), -1);
        EXPECT_EQ(sb.weight(), depth);
        for (int b : got) EXPECT_TRUE(sb.test_bit(b));
      }
    }
  }
  Sbitmap empty(0);
  EXPECT_EQ(empty.get(0), -1);
  EXPECT_FALSE(empty.any_bit_set());
}

TEST(Sbitmap, DeferredClearIsReused) {
  Sbitmap sb(128, 6);
  ASSERT_EQ(drain(sb).size(), 128u);
  sb.clear_bit(5);
  sb.clear_bit(70);
  EXPECT_FALSE(sb.test_bit(5));
  EXPECT_FALSE(sb.test_bit(70));
  EXPECT_TRUE(sb.test_bit(6));
  EXPECT_EQ(sb.weight(), 126u);
  // Both freed bits come back (folded from `cleared`), and nothing else.
  std::set<int> again;
  for (int nr; (nr = sb.get(0)) >= 0;) again.insert(nr);
  EXPECT_EQ(again, (std::set<int>{5, 70}));
  EXPECT_EQ(sb.weight(), 128u);
  for (unsigned b = 0; b < 128; b++) sb.clear_bit(b);
  EXPECT_FALSE(sb.any_bit_set());
  EXPECT_EQ(drain(sb).size(), 128u);
}

// The per-word split of the whole-map shallow depth, as in the kernel's
// 6.17 example for a 32+32+32+16 map.
TEST(Sbitmap, ShallowDepthSpreadsOverWords) {
  struct Row {
    unsigned shallow;
    unsigned per_word[4];
  };
  const Row rows[] = {{1, {1, 0, 0, 0}},  {4, {1, 1, 1, 1}},   {5, {2, 1, 1, 1}},
                      {11, {3, 3, 3, 2}}, {32, {9, 9, 9, 5}},  {53, {15, 15, 15, 8}},
                      {112, {32, 32, 32, 16}}};
  for (const Row& r : rows) {
    Sbitmap sb(112, 5);
    unsigned per_word[4] = {};
    for (unsigned hint = 0; hint < 112; hint += 13) {
      for (int nr; (nr = sb.get_shallow(hint, r.shallow)) >= 0;) per_word[nr >> 5]++;
    }
    for (int w = 0; w < 4; w++)
      EXPECT_EQ(per_word[w], r.per_word[w]) << "shallow " << r.shallow << " word " << w;
  }
}

TEST(Sbitmap, ShallowDepthLimitsWholeMap) {
  for (unsigned depth : {64u, 256u, 1024u}) {
    for (unsigned shallow : {1u, 2u, 3u, 10u, 48u, 63u, 64u, 100u, 2000u}) {
      Sbitmap sb(depth);
      unsigned n = 0;
      for (unsigned hint = 0; hint < depth; hint += 7)
        while (sb.get_shallow(hint, shallow) >= 0) n++;
      EXPECT_EQ(n, std::min(shallow, depth)) << depth << " " << shallow;
      // A normal get still reaches the rest of the map.
      EXPECT_EQ(drain(sb).size(), depth - n);
    }
  }
}

TEST(Sbitmap, GetBatchTakesBitsFromOneWord) {
  Sbitmap sb(128, 6);
  unsigned off = 99;
  uint64_t m = sb.get_batch(8, &off);
  EXPECT_EQ(off, 0u);
  EXPECT_EQ(m, 0xffull);
  for (unsigned b = 0; b < 8; b++) EXPECT_TRUE(sb.test_bit(b));
  // The rest of word 0, then word 1.
  m = sb.get_batch(64, &off);
  EXPECT_EQ(off, 0u);
  EXPECT_EQ(m, ~0xffull);
  m = sb.get_batch(64, &off, 0);
  EXPECT_EQ(off, 64u);
  EXPECT_EQ(m, ~0ull);
  EXPECT_EQ(sb.get_batch(4, &off), 0u);
  sb.clear_bit(3);
  sb.clear_bit(100);
  m = sb.get_batch(4, &off, 64);  // starts at word 1, folds cleared bits
  EXPECT_EQ(off, 64u);
  EXPECT_EQ(m, 1ull << 36);
  m = sb.get_batch(4, &off, 64);
  EXPECT_EQ(off, 0u);
  EXPECT_EQ(m, 1ull << 3);
  EXPECT_EQ(sb.weight(), 128u);
}

TEST(Sbitmap, GetBatchNeverHandsOutABitTwice) {
  Sbitmap sb(100);
  std::vector<bool> seen(100);
  unsigned total = 0;
  for (unsigned off; uint64_t m = sb.get_batch(5, &off);) {
    for (; m; m &= m - 1) {
      unsigned b = off + static_cast<unsigned>(__builtin_ctzll(m));
      ASSERT_LT(b, 100u);
      ASSERT_FALSE(seen[b]);
      seen[b] = true;
      total++;
    }
  }
  EXPECT_EQ(total, 100u);
}

TEST(Sbitmap, ResizeLimitsAllocationAndKeepsOldBits) {
  Sbitmap sb(128, 4);
  ASSERT_EQ(drain(sb).size(), 128u);
  const int hi = 110;  // stays allocated across the shrink
  for (unsigned b = 0; b < 128; b++)
    if (static_cast<int>(b) != hi) sb.clear_bit(b);
  sb.resize(40);
  EXPECT_EQ(sb.depth(), 40u);
  std::vector<int> got = drain(sb, 77);
  EXPECT_EQ(got.size(), 40u);
  for (int b : got) EXPECT_LT(b, 40);
  EXPECT_TRUE(sb.test_bit(hi));
  bool visited = false;
  sb.for_each_set([&](unsigned b) {
    visited |= static_cast<int>(b) == hi;
    return true;
  });
  EXPECT_TRUE(visited);
  sb.clear_bit(hi);
  sb.resize(1000);  // clamps to the depth given at construction
  EXPECT_EQ(sb.depth(), 128u);
  EXPECT_EQ(drain(sb).size(), 88u);
}

TEST(Sbitmap, ForEachSetVisitsAllocatedBitsInOrder) {
  Sbitmap sb(200);
  drain(sb);
  std::vector<unsigned> expect;
  for (unsigned b = 0; b < 200; b++) {
    if (b % 3) sb.clear_bit(b);
    else expect.push_back(b);
  }
  std::vector<unsigned> seen;
  sb.for_each_set([&](unsigned b) {
    seen.push_back(b);
    return true;
  });
  EXPECT_EQ(seen, expect);
  unsigned calls = 0;
  sb.for_each_set([&](unsigned) { return ++calls < 5; });
  EXPECT_EQ(calls, 5u);
}

TEST(Sbitmap, RoundRobinSearchesFromTheHint) {
  Sbitmap rr(64, 6, true);
  EXPECT_EQ(rr.get(10), 10);
  EXPECT_EQ(rr.get(10), 11);
  EXPECT_EQ(rr.get(63), 63);
  // Nothing free at or after the hint in the last word: wraps to word 0's
  // start instead of failing.
  EXPECT_EQ(rr.get(63), 0);
  Sbitmap dense(64, 6, false);
  EXPECT_EQ(dense.get(10), 0);  // the hint only picks the word
  EXPECT_EQ(dense.get(10), 1);
}

TEST(SbitmapQueue, RoundRobinHandsOutBitsInOrder) {
  cpu_set_t old_set, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(old_set), &old_set), 0);
  CPU_ZERO(&one);
  CPU_SET(static_cast<int>(this_cpu()), &one);
  if (sched_setaffinity(0, sizeof(one), &one) != 0) GTEST_SKIP() << "cannot pin";
  SbitmapQueue q(16, /*round_robin=*/true);
  std::vector<int> got;
  for (int i = 0; i < 8; i++) got.push_back(q.get());
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  q.clear(2, this_cpu());
  q.clear(0, this_cpu());
  EXPECT_EQ(q.get(), 8);  // does not go back to the freed bits
  EXPECT_EQ(q.get(), 9);
  sched_setaffinity(0, sizeof(old_set), &old_set);
}

// Threads allocate and free through every API; a per-bit owner flag catches
// a bit handed out twice.
TEST(SbitmapQueue, ConcurrentAllocFreeNeverDoubleAllocates) {
  constexpr unsigned kDepth = 96;
  SbitmapQueue q(kDepth, false);
  std::unique_ptr<std::atomic<int>[]> owner(new std::atomic<int>[kDepth]);
  for (unsigned i = 0; i < kDepth; i++) owner[i].store(0);
  std::atomic<unsigned> doubles{0}, ops{0};
  const unsigned iters = test::scaled(40000);
  test::TimeLimit limit(std::chrono::seconds(3));
  auto take = [&](unsigned b) {
    if (b >= kDepth || owner[b].exchange(1, std::memory_order_acquire) != 0) doubles++;
  };
  auto give = [&](unsigned b) { owner[b].store(0, std::memory_order_release); };
  auto worker = [&](int id) {
    std::vector<unsigned> held;
    for (unsigned i = 0; i < iters && !(i % 256 == 0 && limit.passed()); i++) {
      switch ((i + id) % 3) {
        case 0: {
          int nr = q.get();
          if (nr >= 0) take(nr), held.push_back(nr);
          break;
        }
        case 1: {
          int nr = q.get_shallow(kDepth / 2);
          if (nr >= 0) take(nr), held.push_back(nr);
          break;
        }
        default: {
          unsigned off;
          for (uint64_t m = q.get_batch(4, &off); m; m &= m - 1) {
            unsigned b = off + static_cast<unsigned>(__builtin_ctzll(m));
            take(b);
            held.push_back(b);
          }
        }
      }
      ops++;
      while (held.size() > 6 || (!held.empty() && i % 2)) {
        unsigned b = held.back();
        held.pop_back();
        give(b);
        q.clear(b, this_cpu());
      }
    }
    for (unsigned b : held) give(b), q.clear(b, this_cpu());
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; i++) ts.emplace_back(worker, i);
  for (auto& t : ts) t.join();
  EXPECT_EQ(doubles.load(), 0u);
  EXPECT_GT(ops.load(), 0u);
  EXPECT_FALSE(q.bitmap().any_bit_set());
  std::set<int> all;
  for (int nr; (nr = q.get()) >= 0;) all.insert(nr);
  EXPECT_EQ(all.size(), kDepth);
}

}  // namespace
}  // namespace blkmq::base
