// A scheduler's requests in sector order (the elevator's sort_list, as
// mq-deadline and bfq keep them), shared by both so there is one of it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "blkmq/elevator/rbtree.h"
#include "blkmq/driver/request.h"

namespace blkmq {

// Intrusive through Request::rb_node (no allocation per request), keyed by
// the start sector at insertion, kept in rq->elv_priv[1]: a front merge
// moves rq->sector before the scheduler re-sorts the request, and the tree
// must still find it where it was put. Equal sectors keep arrival order.
// Not thread-safe: under the scheduler's lock. Every call is O(log n) but
// next/prev (amortised O(1)).
class SortTree {
 public:
  bool empty() const { return t_.empty(); }
  void insert(Request* rq) {
    rq->elv_priv[1] = reinterpret_cast<void*>(static_cast<uintptr_t>(rq->sector));
    t_.insert_ordered(&rq->rb_node, [](RbNode* a, RbNode* b) { return key(of(a)) < key(of(b)); });
  }
  void erase(Request* rq) { t_.erase(&rq->rb_node); }
  Request* first() const { return of(t_.first()); }
  // The first request keyed at or after `sector`, or null.
  Request* lower_bound(uint64_t sector) const {
    return of(t_.lower_bound([sector](RbNode* n) { return key(of(n)) < sector; }));
  }
  // The last request keyed before `sector`, or null.
  Request* before(uint64_t sector) const {
    Request* at = lower_bound(sector);
    return at ? of(RbTree::prev(&at->rb_node)) : of(t_.last());
  }
  static Request* next(Request* rq) { return of(RbTree::next(&rq->rb_node)); }
  static Request* prev(Request* rq) { return of(RbTree::prev(&rq->rb_node)); }

 private:
  static Request* of(RbNode* n) { return rb_entry<Request>(n, offsetof(Request, rb_node)); }
  static uint64_t key(const Request* rq) { return reinterpret_cast<uintptr_t>(rq->elv_priv[1]); }
  RbTree t_;
};

// Where a request is inside a scheduler, kept in rq->elv_priv[2]; each
// scheduler names its own places (an enum over uintptr_t, 0 = nowhere).
template <typename Where>
Where rq_where(const Request* rq) {
  return static_cast<Where>(reinterpret_cast<uintptr_t>(rq->elv_priv[2]));
}
template <typename Where>
void set_rq_where(Request* rq, Where w) {
  rq->elv_priv[2] = reinterpret_cast<void*>(static_cast<uintptr_t>(w));
}

}  // namespace blkmq
