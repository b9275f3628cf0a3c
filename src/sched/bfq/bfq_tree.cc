// bfq's active and idle trees (bfq_tree.h) on the intrusive rbtree.
#include "sched/bfq/bfq_tree.h"

#include <cstddef>

#include "blkmq/elevator/rbtree_augment.h"
#include "sched/bfq/bfq_impl.h"

namespace blkmq {
template class BasicRbTree<bfq::MinStartAug>;
}  // namespace blkmq

namespace blkmq::bfq {
namespace {

BfqEntity* ent(const RbNode* n) {
  return rb_entry<BfqEntity>(const_cast<RbNode*>(n), offsetof(BfqEntity, rb_node));
}

// Service-tree order: finish time, then uid (unique), so no two keys tie.
// A lambda rather than a function, so insert_ordered inlines it.
constexpr auto by_finish = [](const RbNode* a, const RbNode* b) {
  const BfqEntity* x = ent(a);
  const BfqEntity* y = ent(b);
  return x->finish != y->finish ? x->finish < y->finish : x->uid < y->uid;
};

}  // namespace

bool MinStartAug::update(RbNode* n) {
  BfqEntity* e = ent(n);
  uint64_t m = e->start;
  if (n->left && ent(n->left)->min_start < m) m = ent(n->left)->min_start;
  if (n->right && ent(n->right)->min_start < m) m = ent(n->right)->min_start;
  if (m == e->min_start) return false;
  e->min_start = m;
  return true;
}

void MinStartAug::copy(const RbNode* from, RbNode* to) { ent(to)->min_start = ent(from)->min_start; }

void ActiveTree::insert(BfqEntity* e) { t_.insert_ordered(&e->rb_node, by_finish); }
void ActiveTree::erase(BfqEntity* e) { t_.erase(&e->rb_node); }
BfqEntity* ActiveTree::first() const { return t_.empty() ? nullptr : ent(t_.first()); }
BfqEntity* ActiveTree::next(const BfqEntity* e) {
  const RbNode* n = RbTreeBase::next(&e->rb_node);
  return n ? ent(n) : nullptr;
}
uint64_t ActiveTree::min_start() const { return t_.empty() ? UINT64_MAX : ent(t_.root())->min_start; }

// Everything left of a node finishes earlier, so the answer is in the left
// subtree if any entity there is eligible, else the node itself, else the
// right subtree; each subtree's min_start says whether it holds one.
BfqEntity* ActiveTree::first_eligible(uint64_t vtime) const {
  const RbNode* n = t_.root();
  while (n) {
    if (n->left && ent(n->left)->min_start <= vtime) {
      n = n->left;
      continue;
    }
    if (ent(n)->start <= vtime) return ent(n);
    n = n->right && ent(n->right)->min_start <= vtime ? n->right : nullptr;
  }
  return nullptr;
}

void IdleTree::insert(BfqEntity* e) {
  t_.insert_ordered(&e->rb_node, by_finish);
  if (!first_ || by_finish(&e->rb_node, &first_->rb_node)) first_ = e;
}

void IdleTree::erase(BfqEntity* e) {
  if (e == first_) {
    const RbNode* n = RbTreeBase::next(&e->rb_node);
    first_ = n ? ent(n) : nullptr;
  }
  t_.erase(&e->rb_node);
}

}  // namespace blkmq::bfq
