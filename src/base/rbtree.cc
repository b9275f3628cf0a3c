// Red-black tree balancing: the textbook insertion and deletion fix-ups
// (recolouring and at most two or three rotations), with null children as
// black leaves.
#include "blkmq/elevator/rbtree.h"

namespace blkmq {
namespace {

bool is_red(const RbNode* n) { return n && n->red; }

RbNode* leftmost(RbNode* n) {
  while (n->left) n = n->left;
  return n;
}

RbNode* rightmost(RbNode* n) {
  while (n->right) n = n->right;
  return n;
}

}  // namespace

void RbTree::replace_child(RbNode* parent, RbNode* old_child, RbNode* new_child) {
  if (!parent)
    root_ = new_child;
  else if (parent->left == old_child)
    parent->left = new_child;
  else
    parent->right = new_child;
  if (new_child) new_child->parent = parent;
}

void RbTree::rotate_left(RbNode* x) {
  RbNode* y = x->right;
  x->right = y->left;
  if (y->left) y->left->parent = x;
  replace_child(x->parent, x, y);
  y->left = x;
  x->parent = y;
}

void RbTree::rotate_right(RbNode* x) {
  RbNode* y = x->left;
  x->left = y->right;
  if (y->right) y->right->parent = x;
  replace_child(x->parent, x, y);
  y->right = x;
  x->parent = y;
}

void RbTree::insert(RbNode* node, RbNode* parent, RbNode** link) {
  node->parent = parent;
  node->left = node->right = nullptr;
  node->red = true;
  *link = node;
  RbNode* z = node;
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

void RbTree::erase(RbNode* z) {
  RbNode* x;         // the node that moves into the removed position
  RbNode* x_parent;  // its parent (x may be null)
  bool removed_red;
  if (!z->left || !z->right) {
    x = z->left ? z->left : z->right;
    x_parent = z->parent;
    removed_red = z->red;
    replace_child(z->parent, z, x);
  } else {
    // Two children: the successor y takes z's place and colour; y's own
    // position (it has no left child) is the one that loses a node.
    RbNode* y = leftmost(z->right);
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
  }
  *z = RbNode{};
  if (!removed_red) erase_fixup(x, x_parent);
}

void RbTree::erase_fixup(RbNode* x, RbNode* x_parent) {
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

RbNode* RbTree::first() const { return root_ ? leftmost(root_) : nullptr; }
RbNode* RbTree::last() const { return root_ ? rightmost(root_) : nullptr; }

RbNode* RbTree::next(const RbNode* n) {
  if (n->right) return leftmost(n->right);
  const RbNode* c = n;
  RbNode* p = n->parent;
  while (p && c == p->right) {
    c = p;
    p = p->parent;
  }
  return p;
}

RbNode* RbTree::prev(const RbNode* n) {
  if (n->left) return rightmost(n->left);
  const RbNode* c = n;
  RbNode* p = n->parent;
  while (p && c == p->left) {
    c = p;
    p = p->parent;
  }
  return p;
}

}  // namespace blkmq
