// The intrusive red-black tree against std::multiset under random inserts
// and erases, checking the colour rules and parent links after every step;
// an augmented tree's cached subtree minimum against a recomputation, and
// a descent through it against a linear scan.
#include "blkmq/elevator/rbtree.h"
#include "blkmq/elevator/rbtree_augment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <random>
#include <set>
#include <vector>

namespace blkmq {
namespace {

struct Item {
  int key = 0;
  int id = 0;
  RbNode node;
};

Item* item(RbNode* n) { return rb_entry<Item>(n, offsetof(Item, node)); }

// Black height of the subtree, or -1 if a rule is broken below n.
int check(const RbNode* n, const RbNode* parent) {
  if (!n) return 1;
  if (n->parent != parent) return -1;
  if (n->red && ((n->left && n->left->red) || (n->right && n->right->red))) return -1;
  const int l = check(n->left, n);
  const int r = check(n->right, n);
  if (l < 0 || r < 0 || l != r) return -1;
  return l + (n->red ? 0 : 1);
}

void expect_matches(const RbTree& t, const std::multiset<int>& ref) {
  ASSERT_TRUE(!t.root() || !t.root()->red);
  ASSERT_GT(check(t.root(), nullptr), 0);
  std::vector<int> fwd, back;
  for (RbNode* n = t.first(); n; n = RbTree::next(n)) fwd.push_back(item(n)->key);
  for (RbNode* n = t.last(); n; n = RbTree::prev(n)) back.push_back(item(n)->key);
  ASSERT_EQ(fwd, std::vector<int>(ref.begin(), ref.end()));
  ASSERT_EQ(back, std::vector<int>(ref.rbegin(), ref.rend()));
}

TEST(RbTree, RandomInsertEraseKeepsOrderAndBalance) {
  std::mt19937 rng(42);
  std::vector<Item> items(600);
  std::vector<Item*> in, out;
  for (size_t i = 0; i < items.size(); i++) {
    items[i].id = static_cast<int>(i);
    out.push_back(&items[i]);
  }
  RbTree t;
  std::multiset<int> ref;
  auto less = [](RbNode* a, RbNode* b) { return item(a)->key < item(b)->key; };
  for (int step = 0; step < 6000; step++) {
    const bool grow = in.empty() || (!out.empty() && rng() % 100 < 55);
    if (grow) {
      const size_t k = rng() % out.size();
      Item* it = out[k];
      out[k] = out.back();
      out.pop_back();
      it->key = static_cast<int>(rng() % 200);  // many equal keys
      t.insert_ordered(&it->node, less);
      ref.insert(it->key);
      in.push_back(it);
    } else {
      const size_t k = rng() % in.size();
      Item* it = in[k];
      in[k] = in.back();
      in.pop_back();
      t.erase(&it->node);
      ref.erase(ref.find(it->key));
      out.push_back(it);
    }
    if (step % 7 == 0) expect_matches(t, ref);
  }
  expect_matches(t, ref);
  while (!in.empty()) {
    t.erase(&in.back()->node);
    ref.erase(ref.find(in.back()->key));
    in.pop_back();
    expect_matches(t, ref);
  }
  EXPECT_TRUE(t.empty());
}

TEST(RbTree, EqualKeysKeepInsertionOrderAndLowerBound) {
  std::vector<Item> items(10);
  RbTree t;
  auto less = [](RbNode* a, RbNode* b) { return item(a)->key < item(b)->key; };
  for (int i = 0; i < 10; i++) {
    items[i] = Item{i / 3 * 10, i, {}};  // keys 0,0,0,10,10,10,20,20,20,30
    t.insert_ordered(&items[i].node, less);
  }
  int id = 0;
  for (RbNode* n = t.first(); n; n = RbTree::next(n)) EXPECT_EQ(item(n)->id, id++);
  auto at_least = [&](int key) {
    RbNode* n = t.lower_bound([key](RbNode* x) { return item(x)->key < key; });
    return n ? item(n)->id : -1;
  };
  EXPECT_EQ(at_least(-5), 0);
  EXPECT_EQ(at_least(10), 3);
  EXPECT_EQ(at_least(11), 6);
  EXPECT_EQ(at_least(30), 9);
  EXPECT_EQ(at_least(31), -1);
}

// An augmented tree (rbtree_augment.h): each node caches the minimum
// `val` of its subtree, as bfq's active tree caches the minimum start.
struct AugItem {
  int key = 0;
  int val = 0;
  int min_val = 0;
  RbNode node;
};

AugItem* aug_item(const RbNode* n) { return rb_entry<AugItem>(const_cast<RbNode*>(n), offsetof(AugItem, node)); }

struct MinValAug {
  static constexpr bool kAugmented = true;
  static bool update(RbNode* n) {
    AugItem* it = aug_item(n);
    int m = it->val;
    if (n->left) m = std::min(m, aug_item(n->left)->min_val);
    if (n->right) m = std::min(m, aug_item(n->right)->min_val);
    if (m == it->min_val) return false;
    it->min_val = m;
    return true;
  }
  static void copy(const RbNode* from, RbNode* to) { aug_item(to)->min_val = aug_item(from)->min_val; }
};
using MinTree = BasicRbTree<MinValAug>;

// The subtree's minimum recomputed; *ok turns false at a stale cache.
int brute_min(const RbNode* n, bool* ok) {
  if (!n) return INT_MAX;
  const int m = std::min({aug_item(n)->val, brute_min(n->left, ok), brute_min(n->right, ok)});
  if (m != aug_item(n)->min_val) *ok = false;
  return m;
}

// The first node in key order with val <= limit, by descending through
// the cached minimums (the shape of bfq's eligible-first query).
RbNode* first_at_most(const MinTree& t, int limit) {
  const RbNode* n = t.root();
  while (n) {
    if (n->left && aug_item(n->left)->min_val <= limit) {
      n = n->left;
      continue;
    }
    if (aug_item(n)->val <= limit) return const_cast<RbNode*>(n);
    n = n->right && aug_item(n->right)->min_val <= limit ? n->right : nullptr;
  }
  return nullptr;
}

RbNode* scan_at_most(const MinTree& t, int limit) {
  for (RbNode* n = t.first(); n; n = MinTree::next(n))
    if (aug_item(n)->val <= limit) return n;
  return nullptr;
}

TEST(RbTree, AugmentedMinimumStaysRightUnderRandomInsertErase) {
  std::mt19937 rng(7);
  std::vector<AugItem> items(400);
  std::vector<AugItem*> in, out;
  for (AugItem& it : items) {
    it.min_val = -12345;  // a stale value the tree must overwrite
    out.push_back(&it);
  }
  MinTree t;
  auto less = [](RbNode* a, RbNode* b) { return aug_item(a)->key < aug_item(b)->key; };
  for (int step = 0; step < 8000; step++) {
    const bool grow = in.empty() || (!out.empty() && rng() % 100 < 53);
    if (grow) {
      const size_t k = rng() % out.size();
      AugItem* it = out[k];
      out[k] = out.back();
      out.pop_back();
      it->key = static_cast<int>(rng() % 300);
      it->val = static_cast<int>(rng() % 1000);
      t.insert_ordered(&it->node, less);
      in.push_back(it);
    } else {
      const size_t k = rng() % in.size();
      AugItem* it = in[k];
      in[k] = in.back();
      in.pop_back();
      t.erase(&it->node);
      out.push_back(it);
    }
    ASSERT_TRUE(!t.root() || !t.root()->red);
    ASSERT_GT(check(t.root(), nullptr), 0) << "step " << step;
    bool ok = true;
    brute_min(t.root(), &ok);
    ASSERT_TRUE(ok) << "stale cached minimum at step " << step;
    for (int q = 0; q < 3; q++) {
      const int limit = static_cast<int>(rng() % 1100) - 50;
      ASSERT_EQ(first_at_most(t, limit), scan_at_most(t, limit)) << "step " << step << " limit " << limit;
    }
  }
}

}  // namespace
}  // namespace blkmq
