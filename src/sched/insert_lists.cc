// Seed 003's split insertion lists: see insert_lists.h.
#include "sched/insert_lists.h"

namespace blkmq {

bool SplitInsert::lock_or_park(base::StatSpinLock& main, ListNode* list, bool at_head, uint64_t now) {
  if (mode_.load(std::memory_order_relaxed) == InsertLists::locked) {
    main.lock();
    return true;
  }
  if (!always_defer_.load(std::memory_order_relaxed) && main.try_lock()) return true;
  int64_t n = 0;
  for (ListNode* it = list->next; it != list; it = it->next, n++)
    list_entry<Request, &Request::queuelist>(it)->fifo_time = now;
  lock_.lock();
  if (at_head) at_head_.splice_head(list);
  else at_tail_.splice_tail(list);
  deferred_inserts_ += static_cast<uint64_t>(n);
  nr_pending_.fetch_add(n, std::memory_order_release);
  lock_.unlock();
  return false;
}

uint64_t SplitInsert::deferred_inserts() {
  lock_.lock();
  const uint64_t n = deferred_inserts_;
  lock_.unlock();
  return n;
}

std::string SplitInsert::show() const {
  return mode_.load(std::memory_order_relaxed) == InsertLists::split ? "split" : "locked";
}

Status SplitInsert::store(std::string_view v) {
  if (v == "split") mode_.store(InsertLists::split);
  else if (v == "locked") mode_.store(InsertLists::locked);
  else return Status::invalid("queue/iosched/insert_lists: '" + std::string(v) + "' is not split or locked");
  return Status::OK();
}

}  // namespace blkmq
