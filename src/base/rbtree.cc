// The walks every tree shares, and the plain tree's one instantiation (its
// balancing is in rbtree_augment.h, with an augmented tree's).
#include "blkmq/elevator/rbtree.h"

#include "blkmq/elevator/rbtree_augment.h"

namespace blkmq {
namespace {

RbNode* leftmost(RbNode* n) {
  while (n->left) n = n->left;
  return n;
}

RbNode* rightmost(RbNode* n) {
  while (n->right) n = n->right;
  return n;
}

}  // namespace

template class BasicRbTree<RbNoAugment>;

RbNode* RbTreeBase::first() const { return root_ ? leftmost(root_) : nullptr; }
RbNode* RbTreeBase::last() const { return root_ ? rightmost(root_) : nullptr; }

RbNode* RbTreeBase::next(const RbNode* n) {
  if (n->right) return leftmost(n->right);
  const RbNode* c = n;
  RbNode* p = n->parent;
  while (p && c == p->right) {
    c = p;
    p = p->parent;
  }
  return p;
}

RbNode* RbTreeBase::prev(const RbNode* n) {
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
