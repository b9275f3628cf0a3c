// The balancing of BasicRbTree (rbtree.h): the textbook insertion and
// deletion fix-ups (recolouring and at most two or three rotations), with
// null children as black leaves, and the calls that keep an augmented
// tree's cached values right. Include this only where a tree with its own
// Aug policy is instantiated; the plain RbTree is instantiated in
// rbtree.cc, and its users need rbtree.h alone.
#pragma once

#include "blkmq/elevator/rbtree.h"

namespace blkmq {

template <typename Aug>
void BasicRbTree<Aug>::propagate(RbNode* n, const RbNode* stop) {
  if constexpr (Aug::kAugmented) {
    for (; n != stop; n = n->parent)
      if (!Aug::update(n)) break;
  }
}

// A rotation keeps the set of nodes under the rotated pair: the node that
// rises takes the value the old subtree root had, and the one that sinks
// is recomputed from its new children.
template <typename Aug>
void BasicRbTree<Aug>::rotate_left(RbNode* x) {
  RbNode* y = x->right;
  x->right = y->left;
  if (y->left) y->left->parent = x;
  replace_child(x->parent, x, y);
  y->left = x;
  x->parent = y;
  if constexpr (Aug::kAugmented) {
    Aug::copy(x, y);
    Aug::update(x);
  }
}

template <typename Aug>
void BasicRbTree<Aug>::rotate_right(RbNode* x) {
  RbNode* y = x->left;
  x->left = y->right;
  if (y->right) y->right->parent = x;
  replace_child(x->parent, x, y);
  y->right = x;
  x->parent = y;
  if constexpr (Aug::kAugmented) {
    Aug::copy(x, y);
    Aug::update(x);
  }
}

template <typename Aug>
void BasicRbTree<Aug>::insert(RbNode* node, RbNode* parent, RbNode** link) {
  node->parent = parent;
  node->left = node->right = nullptr;
  node->red = true;
  *link = node;
  if constexpr (Aug::kAugmented) {
    // Values first, so the rotations below start from right ones; the
    // leaf's own is set whatever stale value it held.
    Aug::update(node);
    propagate(parent, nullptr);
  }
  RbNode* z = node;
  auto is_red = [](const RbNode* n) { return n && n->red; };
  while (is_red(z->parent)) {
    RbNode* p = z->parent;
    RbNode* g = p->parent;  // a red node is never the root
    const bool p_is_left = p == g->left;
    RbNode* uncle = p_is_left ? g->right : g->left;
    if (is_red(uncle)) {
      p->red = false;
      uncle->red = false;
      g->red = true;
      z = g;
      continue;
    }
    if (p_is_left) {
      if (z == p->right) {
        rotate_left(p);
        z = p;
        p = z->parent;
      }
      p->red = false;
      g->red = true;
      rotate_right(g);
    } else {
      if (z == p->left) {
        rotate_right(p);
        z = p;
        p = z->parent;
      }
      p->red = false;
      g->red = true;
      rotate_left(g);
    }
  }
  root_->red = false;
}

template <typename Aug>
void BasicRbTree<Aug>::erase(RbNode* z) {
  RbNode* x;         // the node that moves into the removed position
  RbNode* x_parent;  // its parent (x may be null)
  bool removed_red;
  if (!z->left || !z->right) {
    x = z->left ? z->left : z->right;
    x_parent = z->parent;
    removed_red = z->red;
    replace_child(z->parent, z, x);
    propagate(x_parent, nullptr);  // z's ancestors lost it
  } else {
    // Two children: the successor y takes z's place and colour; y's own
    // position (it has no left child) is the one that loses a node.
    RbNode* y = z->right;
    while (y->left) y = y->left;
    removed_red = y->red;
    x = y->right;
    if (y->parent == z) {
      x_parent = y;
    } else {
      x_parent = y->parent;
      replace_child(y->parent, y, x);
      y->right = z->right;
      y->right->parent = y;
    }
    replace_child(z->parent, z, y);
    y->left = z->left;
    y->left->parent = y;
    y->red = z->red;
    if constexpr (Aug::kAugmented) {
      // y stands for z's old subtree, less z and y's old place: the path
      // from where y left up to y, then y and up from there, each compared
      // against what it held with z still in.
      Aug::copy(z, y);
      if (x_parent != y) propagate(x_parent, y);
      propagate(y, nullptr);
    }
  }
  *z = RbNode{};
  if (!removed_red) erase_fixup(x, x_parent);
}

template <typename Aug>
void BasicRbTree<Aug>::erase_fixup(RbNode* x, RbNode* x_parent) {
  auto is_red = [](const RbNode* n) { return n && n->red; };
  // x carries an extra black; push it up or resolve it with rotations.
  while (x != root_ && !is_red(x)) {
    if (x == x_parent->left) {
      RbNode* w = x_parent->right;  // the sibling exists: x's side is short by one black
      if (w->red) {
        w->red = false;
        x_parent->red = true;
        rotate_left(x_parent);
        w = x_parent->right;
      }
      if (!is_red(w->left) && !is_red(w->right)) {
        w->red = true;
        x = x_parent;
        x_parent = x->parent;
        continue;
      }
      if (!is_red(w->right)) {
        w->left->red = false;
        w->red = true;
        rotate_right(w);
        w = x_parent->right;
      }
      w->red = x_parent->red;
      x_parent->red = false;
      if (w->right) w->right->red = false;
      rotate_left(x_parent);
      x = root_;
      break;
    }
    RbNode* w = x_parent->left;
    if (w->red) {
      w->red = false;
      x_parent->red = true;
      rotate_right(x_parent);
      w = x_parent->left;
    }
    if (!is_red(w->left) && !is_red(w->right)) {
      w->red = true;
      x = x_parent;
      x_parent = x->parent;
      continue;
    }
    if (!is_red(w->left)) {
      w->right->red = false;
      w->red = true;
      rotate_left(w);
      w = x_parent->left;
    }
    w->red = x_parent->red;
    x_parent->red = false;
    if (w->left) w->left->red = false;
    rotate_right(x_parent);
    x = root_;
    break;
  }
  if (x) x->red = false;
}

}  // namespace blkmq
