// Seed 003's split insertion lists (queue/iosched/insert_lists), shared by
// mq-deadline and bfq.
//   locked: insert_requests takes the scheduler's main lock (the kernel).
//   split:  insert_requests try_locks the main lock; only when it is busy
//           are the requests parked on at-head/at-tail lists under a light
//           insert lock. Whoever takes the main lock next (dispatch, a bio
//           merge, an insert) moves them in first, so merges always see every
//           inserted request. The seed as posted parked every insert, which
//           moved merging from insert time to dispatch time and cost 73 % on
//           many sequential writers; this keeps every insert-time merge.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/lockstat.h"
#include "blkmq/elevator/elevator.h"
#include "blkmq/driver/list.h"

namespace blkmq {

enum class InsertLists : uint8_t { split = 0, locked = 1 };

class SplitInsert {
 public:
  SplitInsert() = default;
  SplitInsert(const SplitInsert&) = delete;
  SplitInsert& operator=(const SplitInsert&) = delete;

  // The first step of insert_requests. Returns true with `main` held: the
  // caller drains, inserts `list` and unlocks. Returns false when split mode
  // parked `list` (each request's fifo_time set to `now`, the time it
  // arrived) because `main` was busy.
  bool lock_or_park(base::StatSpinLock& main, ListNode* list, bool at_head, uint64_t now);

  // With the main lock held: takes every parked request off the lists and
  // calls fn(rq, at_head, arrival_ns) for each, at-head ones first, each
  // list in order.
  template <typename Fn>
  void drain(Fn&& fn) {
    if (nr_pending_.load(std::memory_order_acquire) == 0) return;
    ListNode head, tail;
    lock_.lock();
    head.splice_tail(&at_head_);
    tail.splice_tail(&at_tail_);
    nr_pending_.store(0, std::memory_order_relaxed);
    lock_.unlock();
    for (ListNode* l : {&head, &tail}) {
      while (!l->empty()) {
        Request* rq = list_entry<Request, &Request::queuelist>(l->next);
        ListNode::unlink(&rq->queuelist);
        fn(rq, l == &head, rq->fifo_time);
      }
    }
  }

  // Lockless hint for has_work: are requests parked?
  bool pending() const { return nr_pending_.load(std::memory_order_relaxed) > 0; }
  // Requests parked so far (statistics).
  uint64_t deferred_inserts();
  // Tests: park every insert in split mode, as the seed as posted did.
  void set_always_defer(bool always) { always_defer_.store(always, std::memory_order_relaxed); }

  std::string show() const;
  Status store(std::string_view v);
  // The light insert lock's contention (queue/iosched/insert_lock_stat).
  base::StatSpinLock& lock() { return lock_; }

 private:
  std::atomic<InsertLists> mode_{InsertLists::split};
  std::atomic<bool> always_defer_{false};
  // On their own cache line, so submitters splicing onto the lists do not
  // bounce the main lock's line.
  alignas(64) base::StatSpinLock lock_;
  ListNode at_head_;
  ListNode at_tail_;
  std::atomic<int64_t> nr_pending_{0};
  uint64_t deferred_inserts_ = 0;  // under lock_
};

// The queue/iosched/insert_lists attribute of a scheduler whose instance
// holds its SplitInsert where Of finds it.
template <SplitInsert* (*Of)(ElevatorQueue*)>
ElvAttr insert_lists_attr() {
  ElvAttr a;
  a.name = "insert_lists";
  a.show = [](ElevatorQueue* eq) { return Of(eq)->show(); };
  // Safe at run time: whatever is parked is moved in by the next holder of
  // the main lock in either mode.
  a.store = [](ElevatorQueue* eq, std::string_view v) { return Of(eq)->store(v); };
  return a;
}

// A read-only view of a scheduler lock's contention counters
// (base::LockStat::format()); storing "0" zeroes them, as writing 0 to the
// kernel's /proc/lock_stat does, and anything else is refused. `Of` finds
// the lock in the scheduler instance. The seed-003 tables read these.
template <base::StatSpinLock* (*Of)(ElevatorQueue*)>
ElvAttr lock_stat_attr(const char* name) {
  ElvAttr a;
  a.name = name;
  a.show = [](ElevatorQueue* eq) { return Of(eq)->stat().format(); };
  a.store = [](ElevatorQueue* eq, std::string_view v) {
    if (v != "0") return Status::invalid(std::string("lock statistics: only 0 (reset) can be written, not '") +
                                         std::string(v) + "'");
    Of(eq)->reset();
    return Status::OK();
  };
  return a;
}

}  // namespace blkmq
