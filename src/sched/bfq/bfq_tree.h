// bfq's per-class trees of entities, ordered by finish time then uid
// (bfq-wf2q.c's active and idle trees). Intrusive through
// BfqEntity::rb_node, which an entity uses for whichever of the two holds
// it, so queueing and dequeueing allocate nothing. The active tree caches
// in each node the smallest start time of its subtree
// (BfqEntity::min_start, bfq_update_min), so B-WF2Q+'s choice, the
// eligible entity with the smallest finish, is one descent. Under
// BfqData::lock; an entity's start and finish must not change while it is
// on a tree.
#pragma once

#include <cstdint>

#include "blkmq/elevator/rbtree.h"

namespace blkmq::bfq {

struct BfqEntity;

// The active tree's cached value (rbtree.h's Aug policy): the minimum
// start of a node's subtree.
struct MinStartAug {
  static constexpr bool kAugmented = true;
  static bool update(RbNode* n);
  static void copy(const RbNode* from, RbNode* to);
};

}  // namespace blkmq::bfq

namespace blkmq {
extern template class BasicRbTree<bfq::MinStartAug>;  // bfq_tree.cc
}  // namespace blkmq

namespace blkmq::bfq {

class ActiveTree {
 public:
  bool empty() const { return t_.empty(); }
  void insert(BfqEntity* e);  // O(log n)
  void erase(BfqEntity* e);   // O(log n); e must be on this tree
  BfqEntity* first() const;   // smallest finish, or null
  static BfqEntity* next(const BfqEntity* e);  // in finish order, or null
  // The smallest start on the tree, UINT64_MAX if empty. O(1).
  uint64_t min_start() const;
  // The entity with the smallest finish among those with start <= vtime
  // (bfq_first_active_entity), or null. O(log n).
  BfqEntity* first_eligible(uint64_t vtime) const;
  // For tests that check the cached values node by node.
  const RbNode* root() const { return t_.root(); }

 private:
  BasicRbTree<MinStartAug> t_;
};

// Entities that left with finish > V, until V passes it. No cached value
// in the nodes; the first entity is kept at hand (the kernel's
// first_idle), as every charge of service looks at it.
class IdleTree {
 public:
  bool empty() const { return t_.empty(); }
  void insert(BfqEntity* e);
  void erase(BfqEntity* e);
  BfqEntity* first() const { return first_; }  // smallest finish, or null

 private:
  RbTree t_;
  BfqEntity* first_ = nullptr;
};

}  // namespace blkmq::bfq
