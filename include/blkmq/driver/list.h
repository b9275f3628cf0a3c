// Intrusive lists used in public structures (Request::queuelist, RqList).
#pragma once

#include <cstddef>

namespace blkmq {

// Circular doubly linked intrusive list node (list_head analogue). An empty
// list's head points at itself. Not thread-safe: the owner's lock protects it.
struct ListNode {
  ListNode* next = this;
  ListNode* prev = this;

  bool empty() const { return next == this; }
  void init() { next = prev = this; }
  // Inserts n after this node (at the head of a list).
  void push_front(ListNode* n) { link(n, this, next); }
  // Inserts n before this node (at the tail of a list).
  void push_back(ListNode* n) { link(n, prev, this); }
  static void unlink(ListNode* n) {
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->init();
  }
  // Moves every node of `from` to the tail of this list; `from` ends empty.
  void splice_tail(ListNode* from) {
    if (from->empty()) return;
    ListNode* first = from->next;
    ListNode* last = from->prev;
    first->prev = prev;
    prev->next = first;
    last->next = this;
    prev = last;
    from->init();
  }
  // Moves every node of `from` to the head of this list; `from` ends empty.
  void splice_head(ListNode* from) {
    if (from->empty()) return;
    ListNode* first = from->next;
    ListNode* last = from->prev;
    last->next = next;
    next->prev = last;
    next = first;
    first->prev = this;
    from->init();
  }

 private:
  static void link(ListNode* n, ListNode* p, ListNode* nx) {
    n->prev = p;
    n->next = nx;
    p->next = n;
    nx->prev = n;
  }
};

template <typename T, ListNode T::*Member>
T* list_entry(ListNode* n) {
  const auto off = reinterpret_cast<size_t>(&(static_cast<T*>(nullptr)->*Member));
  return reinterpret_cast<T*>(reinterpret_cast<char*>(n) - off);
}

}  // namespace blkmq
