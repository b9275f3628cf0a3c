// A minimal queue-wide FIFO scheduler for tests: it never merges and hands
// requests back in insertion order, so a test can switch to and from a
// scheduler (scheduler tags, nr_requests) or hold a thread inside an
// insert whatever else is registered.
#pragma once

#include <atomic>
#include <mutex>

#include "blkmq/blkmq.h"
#include "blkmq/elevator/elevator.h"

namespace blkmq::test {

struct FifoSched {
  std::mutex lock;
  ListNode queued;
  std::atomic<unsigned> count{0};
};

inline FifoSched* fifo_of(HwCtx* hctx) {
  return static_cast<FifoSched*>(queue_elevator(hctx->queue)->elevator_data);
}

inline void fifo_no_hook() {}

// The scheduler's type, named `name`. AfterInsert runs in every insert
// once the requests are queued and the scheduler's lock is dropped; it must
// not touch the scheduler (a switch may free it meanwhile). Register the
// result once with register_elevator.
template <void (*AfterInsert)() = fifo_no_hook>
ElevatorType fifo_elevator(const char* name) {
  ElevatorType t;
  t.name = name;
  t.queue_wide = true;
  t.ops.init_sched = [](Queue*, ElevatorQueue* eq) {
    eq->elevator_data = new FifoSched;
    return Status::OK();
  };
  t.ops.exit_sched = [](ElevatorQueue* eq) { delete static_cast<FifoSched*>(eq->elevator_data); };
  t.ops.insert_requests = [](HwCtx* hctx, ListNode* list, uint32_t flags) {
    FifoSched* f = fifo_of(hctx);
    unsigned n = 0;
    for (ListNode* p = list->next; p != list; p = p->next) n++;
    {
      std::lock_guard g(f->lock);
      if (flags & kInsertAtHead) f->queued.splice_head(list);
      else f->queued.splice_tail(list);
      f->count.fetch_add(n, std::memory_order_release);
    }
    AfterInsert();
  };
  t.ops.dispatch_request = [](HwCtx* hctx) -> Request* {
    FifoSched* f = fifo_of(hctx);
    std::lock_guard g(f->lock);
    if (f->queued.empty()) return nullptr;
    ListNode* n = f->queued.next;
    ListNode::unlink(n);
    f->count.fetch_sub(1, std::memory_order_relaxed);
    return list_entry<Request, &Request::queuelist>(n);
  };
  t.ops.has_work = [](HwCtx* hctx) { return fifo_of(hctx)->count.load(std::memory_order_acquire) != 0; };
  return t;
}

}  // namespace blkmq::test
