// The radix index against std::map: sparse and dense keys, keys at the top
// of the limit, node freeing on erase, ordered search, and that destruction
// frees every value.
#include "base/radix_index.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace blkmq::base {
namespace {

// Counts live objects, so a test can see that the map freed them all.
struct Counted {
  static inline int live = 0;
  uint64_t key;
  explicit Counted(uint64_t k) : key(k) { live++; }
  ~Counted() { live--; }
};

void put_new(RadixMap<Counted>& m, uint64_t key) {
  auto v = std::make_unique<Counted>(key);
  ASSERT_TRUE(m.put(key, v)) << key;
  EXPECT_FALSE(v) << "key " << key << " was already stored";
}

// The height follows the largest key stored, within the limit, and drops
// back to one level when the tree empties.
TEST(RadixIndex, LevelsGrowWithTheLargestKey) {
  RadixMap<Counted> m(UINT64_MAX);
  EXPECT_EQ(m.levels(), 1u);
  put_new(m, 63);
  EXPECT_EQ(m.levels(), 1u);
  put_new(m, 64);
  EXPECT_EQ(m.levels(), 2u);
  put_new(m, 4096);
  EXPECT_EQ(m.levels(), 3u);
  put_new(m, UINT64_MAX - 1);
  EXPECT_EQ(m.levels(), 11u);
  // The small keys moved down under the new roots and are still found.
  for (uint64_t k : std::initializer_list<uint64_t>{63, 64, 4096, UINT64_MAX - 1}) {
    ASSERT_NE(m.find(k), nullptr) << k;
  }
  EXPECT_EQ(m.find(65), nullptr);
  for (uint64_t k : {63, 64, 4096}) m.take(static_cast<uint64_t>(k));
  EXPECT_EQ(m.levels(), 11u);  // a stored key still needs them
  m.take(UINT64_MAX - 1);
  EXPECT_EQ(m.levels(), 1u);
  // An empty tree starts at the height its first key needs.
  put_new(m, 1u << 20);
  EXPECT_EQ(m.levels(), 4u);
  EXPECT_EQ(m.find(0), nullptr);
}

TEST(RadixIndex, EmptyFindsNothing) {
  RadixMap<Counted> m(1 << 20);
  EXPECT_EQ(m.find(0), nullptr);
  EXPECT_EQ(m.find((1 << 20) - 1), nullptr);
  uint64_t k = 0;
  EXPECT_EQ(m.next(&k), nullptr);
  EXPECT_FALSE(m.take(5));
  EXPECT_TRUE(m.empty());
}

TEST(RadixIndex, KeysOutOfRangeAreRefused) {
  RadixMap<Counted> m(1000);
  auto v = std::make_unique<Counted>(1000);
  EXPECT_FALSE(m.put(1000, v));
  EXPECT_TRUE(v);  // still the caller's
  EXPECT_FALSE(m.put(UINT64_MAX, v));
  EXPECT_EQ(m.find(1000), nullptr);
  EXPECT_EQ(m.find(UINT64_MAX), nullptr);
  // 1000 keys take two levels: slot bits above the limit must not alias.
  put_new(m, 999);
  EXPECT_EQ(m.find(999 + 4096), nullptr);
  EXPECT_EQ(m.size(), 1u);
}

TEST(RadixIndex, DenseKeysThenEraseAllFreesEverything) {
  Counted::live = 0;
  {
    RadixMap<Counted> m(10000);
    for (uint64_t k = 0; k < 10000; k++) put_new(m, k);
    EXPECT_EQ(m.size(), 10000u);
    EXPECT_EQ(Counted::live, 10000);
    for (uint64_t k = 0; k < 10000; k++) {
      Counted* c = m.find(k);
      ASSERT_NE(c, nullptr) << k;
      ASSERT_EQ(c->key, k);
    }
    for (uint64_t k = 0; k < 10000; k += 2) EXPECT_EQ(m.take(k)->key, k);
    EXPECT_EQ(Counted::live, 5000);
    for (uint64_t k = 0; k < 10000; k++) EXPECT_EQ(m.find(k) != nullptr, k % 2 == 1) << k;
  }
  EXPECT_EQ(Counted::live, 0);  // the destructor freed the rest
}

TEST(RadixIndex, SparseKeysAcrossA64BitRange) {
  Counted::live = 0;
  {
    RadixMap<Counted> m(UINT64_MAX);
    const std::vector<uint64_t> keys = {0, 1, 63, 64, 4095, 1ull << 32, (1ull << 60) + 5,
                                        UINT64_MAX - 1, UINT64_MAX - 64};
    for (uint64_t k : keys) put_new(m, k);
    for (uint64_t k : keys) ASSERT_NE(m.find(k), nullptr) << k;
    EXPECT_EQ(m.find(2), nullptr);
    EXPECT_EQ(m.find(UINT64_MAX - 2), nullptr);
    EXPECT_EQ(m.find(1ull << 33), nullptr);
    EXPECT_EQ(m.size(), keys.size());
  }
  EXPECT_EQ(Counted::live, 0);
}

TEST(RadixIndex, KeysAtTheTopOfTheLimit) {
  const uint64_t limit = 64ull << 20;  // 26 bits: five levels, the top one 2 bits wide
  RadixMap<Counted> m(limit);
  for (uint64_t k = limit - 130; k < limit; k++) put_new(m, k);
  for (uint64_t k = limit - 130; k < limit; k++) ASSERT_EQ(m.find(k)->key, k);
  uint64_t k = 0;
  ASSERT_NE(m.next(&k), nullptr);
  EXPECT_EQ(k, limit - 130);
  k = limit - 1;
  ASSERT_NE(m.next(&k), nullptr);
  EXPECT_EQ(k, limit - 1);
}

TEST(RadixIndex, PutReplacesAndHandsBackTheOldValue) {
  RadixMap<Counted> m(100);
  put_new(m, 7);
  Counted* first = m.find(7);
  auto v = std::make_unique<Counted>(7);
  Counted* second = v.get();
  ASSERT_TRUE(m.put(7, v));
  EXPECT_EQ(v.get(), first);
  EXPECT_EQ(m.find(7), second);
  EXPECT_EQ(m.size(), 1u);
}

TEST(RadixIndex, MoveEntryBetweenMaps) {
  Counted::live = 0;
  RadixMap<Counted> a(5000), b(5000);
  put_new(a, 4000);
  put_new(b, 4000);  // overwritten and freed by the move
  Counted* moving = a.find(4000);
  ASSERT_TRUE(a.move_entry(4000, b));
  EXPECT_EQ(a.find(4000), nullptr);
  EXPECT_EQ(b.find(4000), moving);
  EXPECT_EQ(Counted::live, 1);
  EXPECT_TRUE(a.move_entry(4001, b));  // nothing there: nothing to do
  EXPECT_EQ(b.size(), 1u);
}

TEST(RadixIndex, NextWalksKeysInOrder) {
  RadixMap<Counted> m(1 << 24);
  std::mt19937_64 rng(7);
  std::map<uint64_t, bool> ref;
  for (int i = 0; i < 3000; i++) {
    uint64_t k = rng() % (1 << 24);
    if (ref.emplace(k, true).second) put_new(m, k);
  }
  std::vector<uint64_t> seen;
  for (uint64_t k = 0; m.next(&k); k++) seen.push_back(k);
  std::vector<uint64_t> want;
  for (auto& [k, v] : ref) want.push_back(k);
  EXPECT_EQ(seen, want);
  // From inside a gap, next finds the next stored key.
  for (int i = 0; i < 200; i++) {
    uint64_t from = rng() % (1 << 24);
    uint64_t k = from;
    auto it = ref.lower_bound(from);
    if (it == ref.end()) {
      EXPECT_EQ(m.next(&k), nullptr);
      EXPECT_EQ(k, from);
    } else {
      ASSERT_NE(m.next(&k), nullptr);
      EXPECT_EQ(k, it->first);
    }
  }
}

// Random puts and takes against std::map; erasing everything must leave no
// node behind (the next put starts from an empty root again).
TEST(RadixIndex, RandomAgainstStdMap) {
  Counted::live = 0;
  RadixMap<Counted> m(300000);
  std::map<uint64_t, bool> ref;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 100000; i++) {
    // A narrow window makes repeats, a wide one makes sparse nodes.
    uint64_t k = (i % 2) ? rng() % 2000 : rng() % 300000;
    if (rng() % 3) {
      auto v = std::make_unique<Counted>(k);
      ASSERT_TRUE(m.put(k, v));
      EXPECT_EQ(static_cast<bool>(v), ref.count(k) == 1);
      ref[k] = true;
    } else {
      EXPECT_EQ(static_cast<bool>(m.take(k)), ref.erase(k) == 1);
    }
    ASSERT_EQ(m.size(), ref.size());
  }
  for (auto& [k, v] : ref) ASSERT_EQ(m.find(k)->key, k);
  EXPECT_EQ(Counted::live, static_cast<int>(ref.size()));
  for (auto& [k, v] : ref) m.take(k);
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(Counted::live, 0);
  uint64_t k = 0;
  EXPECT_EQ(m.next(&k), nullptr);
}

TEST(RadixIndex, MoveAssignFreesTheOldContents) {
  Counted::live = 0;
  RadixMap<Counted> a(100), b(200);
  put_new(a, 1);
  put_new(b, 150);
  a = std::move(b);
  EXPECT_EQ(Counted::live, 1);
  EXPECT_EQ(a.limit(), 200u);
  EXPECT_NE(a.find(150), nullptr);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.find(150), nullptr);
  a.clear();
  EXPECT_EQ(Counted::live, 0);
  put_new(a, 3);  // usable after clear
  EXPECT_EQ(a.size(), 1u);
}


// A stateful Free (a pool's) gets every value the map lets go of: the one
// a put replaces (through the caller's handle), take, move_entry's
// overwritten value in the target, clear, and the destructor.
struct Recorder {
  std::vector<uint64_t>* freed = nullptr;
  void operator()(Counted* c) const {
    freed->push_back(c->key);
    delete c;
  }
};

TEST(RadixIndex, StatefulFreeGetsEveryValueTheMapLetsGo) {
  Counted::live = 0;
  std::vector<uint64_t> by_map, by_handle;
  using Map = RadixMap<Counted, Recorder>;
  // The caller's handle frees (through its own Free) what a put replaced.
  auto put = [&](Map& m, uint64_t key, uint64_t tag) {
    Map::Owned v(new Counted(tag), Recorder{&by_handle});
    EXPECT_TRUE(m.put(key, v));
  };
  {
    Map a(1000, Recorder{&by_map}), b(1000, Recorder{&by_map});
    put(a, 1, 1);
    put(a, 1, 11);  // 1 comes back to the handle
    put(a, 2, 2);
    put(b, 2, 22);
    put(a, 3, 3);
    EXPECT_TRUE(a.take(3));           // the handle take returns carries the map's Free
    EXPECT_TRUE(a.move_entry(2, b));  // b's 22 is freed by b
    a.clear();                        // 11
  }  // b's destructor: 2
  EXPECT_EQ(by_map, (std::vector<uint64_t>{3, 22, 11, 2}));
  EXPECT_EQ(by_handle, (std::vector<uint64_t>{1}));
  EXPECT_EQ(Counted::live, 0);
}

}  // namespace
}  // namespace blkmq::base
