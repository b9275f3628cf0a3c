// Lock-free multi-producer singly linked list (llist): push from any thread,
// take everything at once from the consumer. Intrusive through a `Next`
// member pointer.
#pragma once

#include <atomic>

namespace blkmq::base {

template <typename T, T* T::*Next>
class LList {
 public:
  // Returns true if the list was empty before the push.
  bool push(T* node) {
    T* first = head_.load(std::memory_order_relaxed);
    do {
      node->*Next = first;
    } while (!head_.compare_exchange_weak(first, node, std::memory_order_release,
                                          std::memory_order_relaxed));
    return first == nullptr;
  }
  // Takes all nodes, newest first.
  T* take_all() { return head_.exchange(nullptr, std::memory_order_acquire); }
  // Takes all nodes in push order (oldest first).
  T* take_all_ordered() {
    T* n = take_all();
    T* rev = nullptr;
    while (n) {
      T* next = n->*Next;
      n->*Next = rev;
      rev = n;
      n = next;
    }
    return rev;
  }
  bool empty() const { return head_.load(std::memory_order_relaxed) == nullptr; }

 private:
  std::atomic<T*> head_{nullptr};
};

}  // namespace blkmq::base
