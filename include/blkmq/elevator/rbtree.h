// An intrusive red-black tree: the node lives inside the element (as the
// kernel's struct rb_node lives inside struct request), so inserting and
// erasing allocate nothing. The tree does not know the ordering: callers
// pass it to insert_ordered() and lower_bound(). An empty tree is a valid
// tree; a node belongs to at most one tree at a time.
// Not thread-safe: the owner's lock protects a tree and its nodes; any
// context may use it under that lock (nothing here sleeps or allocates).
// Request::rb_node is there for a scheduler's sector-sorted tree
// (elv_rb_add and friends in the kernel).
#pragma once

#include <cstddef>

namespace blkmq {

struct RbNode {
  RbNode* parent = nullptr;
  RbNode* left = nullptr;
  RbNode* right = nullptr;
  bool red = false;
};

class RbTree {
 public:
  bool empty() const { return root_ == nullptr; }
  RbNode* root() const { return root_; }

  // Unlinks a node that is in this tree and rebalances; the node is reset.
  void erase(RbNode* node);

  RbNode* first() const;  // smallest, or null
  RbNode* last() const;   // largest, or null
  static RbNode* next(const RbNode* node);  // in-order successor, or null
  static RbNode* prev(const RbNode* node);  // in-order predecessor, or null

  // Inserts keeping order: `less(a, b)` compares two nodes; equal keys go
  // after the ones already there.
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

 private:
  // Links `node` at *link, the null child pointer of `parent` (the root
  // link with parent null) where an ordered descent ended, and rebalances.
  void insert(RbNode* node, RbNode* parent, RbNode** link);
  void rotate_left(RbNode* x);
  void rotate_right(RbNode* x);
  void replace_child(RbNode* parent, RbNode* old_child, RbNode* new_child);
  void erase_fixup(RbNode* x, RbNode* x_parent);

  RbNode* root_ = nullptr;
};

// The element that holds `node` at byte offset `offset` (offsetof(T, member)).
template <typename T>
T* rb_entry(RbNode* node, std::size_t offset) {
  return node ? reinterpret_cast<T*>(reinterpret_cast<char*>(node) - offset) : nullptr;
}

}  // namespace blkmq
