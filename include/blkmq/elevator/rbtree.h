// An intrusive red-black tree: the node lives inside the element (as the
// kernel's struct rb_node lives inside struct request), so inserting and
// erasing allocate nothing. The tree does not know the ordering: callers
// pass it to insert_ordered() and lower_bound(). An empty tree is a valid
// tree; a node belongs to at most one tree at a time.
// Not thread-safe: the owner's lock protects a tree and its nodes; any
// context may use it under that lock (nothing here sleeps or allocates).
// Request::rb_node is there for a scheduler's sector-sorted tree
// (elv_rb_add and friends in the kernel).
//
// Augmented trees (the kernel's rb_augment callbacks): each node may cache
// a value computed from itself and its subtree (bfq's minimum start time),
// so a query can skip whole subtrees. BasicRbTree<Aug> keeps those values
// right through every insert, erase and rotation by calling the policy:
//   static bool Aug::update(RbNode* n);  // recompute n's value from n and
//                                        // its children; true if it changed
//   static void Aug::copy(const RbNode* from, RbNode* to);  // to takes
//                                        // from's value (same subtree set)
// update() is called on a node only after its children are up to date.
// RbTree, the plain tree, is BasicRbTree<RbNoAugment>: its callbacks
// compile away, so it costs what it did before augmentation existed. The
// plain tree is compiled once in rbtree.cc; an augmented one is compiled
// where it is used, by including rbtree_augment.h (the members' bodies).
#pragma once

#include <cstddef>

namespace blkmq {

struct RbNode {
  RbNode* parent = nullptr;
  RbNode* left = nullptr;
  RbNode* right = nullptr;
  bool red = false;
};

// No cached value: the plain tree.
struct RbNoAugment {
  static constexpr bool kAugmented = false;
  static bool update(RbNode*) { return false; }
  static void copy(const RbNode*, RbNode*) {}
};

// What every tree has whatever it caches: the root and the walks, which
// no cached value affects (compiled once, in rbtree.cc).
class RbTreeBase {
 public:
  bool empty() const { return root_ == nullptr; }
  RbNode* root() const { return root_; }

  RbNode* first() const;  // smallest, or null
  RbNode* last() const;   // largest, or null
  static RbNode* next(const RbNode* node);  // in-order successor, or null
  static RbNode* prev(const RbNode* node);  // in-order predecessor, or null

  // The first node for which `before(node)` is false, where `before` is
  // true for a prefix of the in-order sequence; null if there is none.
  template <typename Before>
  RbNode* lower_bound(Before before) const {
    RbNode* n = root_;
    RbNode* found = nullptr;
    while (n) {
      if (before(n)) {
        n = n->right;
      } else {
        found = n;
        n = n->left;
      }
    }
    return found;
  }

 protected:
  void replace_child(RbNode* parent, RbNode* old_child, RbNode* new_child) {
    if (!parent)
      root_ = new_child;
    else if (parent->left == old_child)
      parent->left = new_child;
    else
      parent->right = new_child;
    if (new_child) new_child->parent = parent;
  }

  RbNode* root_ = nullptr;
};

template <typename Aug>
class BasicRbTree : public RbTreeBase {
 public:
  // Unlinks a node that is in this tree and rebalances; the node is reset.
  // Augmented: the values on the path to the root are brought up to date.
  void erase(RbNode* node);

  // Inserts keeping order: `less(a, b)` compares two nodes; equal keys go
  // after the ones already there. Augmented: the node's value is computed
  // and its ancestors' brought up to date.
  template <typename Less>
  void insert_ordered(RbNode* node, Less less) {
    RbNode* parent = nullptr;
    RbNode** link = &root_;
    while (*link) {
      parent = *link;
      link = less(node, parent) ? &parent->left : &parent->right;
    }
    insert(node, parent, link);
  }

 private:
  // Links `node` at *link, the null child pointer of `parent` (the root
  // link with parent null) where an ordered descent ended, and rebalances.
  void insert(RbNode* node, RbNode* parent, RbNode** link);
  void rotate_left(RbNode* x);
  void rotate_right(RbNode* x);
  void erase_fixup(RbNode* x, RbNode* x_parent);
  // Recomputes cached values from n up to (not including) stop, ending
  // early where a value did not change (nothing above can change then).
  static void propagate(RbNode* n, const RbNode* stop);
};

using RbTree = BasicRbTree<RbNoAugment>;
extern template class BasicRbTree<RbNoAugment>;  // rbtree.cc

// The element that holds `node` at byte offset `offset` (offsetof(T, member)).
template <typename T>
T* rb_entry(RbNode* node, std::size_t offset) {
  return node ? reinterpret_cast<T*>(reinterpret_cast<char*>(node) - offset) : nullptr;
}

}  // namespace blkmq
