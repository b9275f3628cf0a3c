// SbitmapQueue: per-CPU allocation hints and batched wake-ups of waiters on
// top of Sbitmap; TaskWaiter: a sleeping task's wait entry.
#include <sched.h>

#include <algorithm>
#include <climits>

#include "base/clock.h"
#include "base/event.h"
#include "base/percpu.h"
#include "base/sbitmap.h"
#include "base/spinlock.h"

namespace blkmq::base {

namespace {

// A cheap, well-mixed per-CPU start so CPUs begin in different words
// (the kernel uses a random value); deterministic so tests reproduce.
unsigned initial_hint(unsigned cpu, unsigned depth) {
  uint64_t x = (cpu + 1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  return static_cast<unsigned>(x % depth);
}

}  // namespace

SbitmapQueue::SbitmapQueue(unsigned depth, bool round_robin, int shift)
    : sb_(depth, shift, round_robin),
      alloc_hint_(new std::atomic<unsigned>[possible_cpus()]),
      nr_hints_(possible_cpus()),
      min_shallow_depth_(UINT_MAX),
      round_robin_(round_robin) {
  for (unsigned i = 0; i < nr_hints_; i++) {
    unsigned h = (depth && !round_robin) ? initial_hint(i, depth) : 0;
    alloc_hint_[i].store(h, std::memory_order_relaxed);
  }
  wake_batch_.store(calc_wake_batch(depth), std::memory_order_relaxed);
}

SbitmapQueue::~SbitmapQueue() = default;

// Each wake-up wakes wake_batch waiters on one queue. The batch must be small
// enough that freeing every bit an allocator can hold (depth, or the
// smallest shallow depth) still produces a wake-up for each of the 8 queues.
unsigned SbitmapQueue::calc_wake_batch(unsigned depth) const {
  unsigned usable = std::min(depth, min_shallow_depth_.load(std::memory_order_relaxed));
  return std::clamp(usable / kSbqWaitQueues, 1u, kSbqWakeBatch);
}

// This CPU's hint, re-randomised if a resize left it out of range.
std::atomic<unsigned>& SbitmapQueue::hint_slot(unsigned depth, unsigned* hint) {
  std::atomic<unsigned>& slot = alloc_hint_[this_cpu()];
  unsigned h = slot.load(std::memory_order_relaxed);
  if (h >= depth) {
    h = depth ? initial_hint(h, depth) : 0;
    slot.store(h, std::memory_order_relaxed);
  }
  *hint = h;
  return slot;
}

// The hint follows this CPU's own allocations: it moves past the bit taken
// only when the hinted bit itself was used (or always, in round-robin mode),
// so CPUs keep to their own region; a failed get resets it.
void SbitmapQueue::update_hint(std::atomic<unsigned>& slot, unsigned depth, unsigned hint,
                               int nr) {
  if (nr < 0) {
    slot.store(0, std::memory_order_relaxed);
  } else if (static_cast<unsigned>(nr) == hint || round_robin_) {
    unsigned next = static_cast<unsigned>(nr) + 1;
    slot.store(next >= depth - 1 ? 0 : next, std::memory_order_relaxed);
  }
}

int SbitmapQueue::get() {
  unsigned depth = sb_.depth();
  unsigned hint;
  std::atomic<unsigned>& slot = hint_slot(depth, &hint);
  int nr = sb_.get(hint);
  update_hint(slot, depth, hint, nr);
  return nr;
}

int SbitmapQueue::get_shallow(unsigned shallow_depth) {
  unsigned depth = sb_.depth();
  unsigned hint;
  std::atomic<unsigned>& slot = hint_slot(depth, &hint);
  int nr = sb_.get_shallow(hint, shallow_depth);
  update_hint(slot, depth, hint, nr);
  return nr;
}

uint64_t SbitmapQueue::get_batch(unsigned nr, unsigned* offset) {
  if (round_robin_) return 0;  // a batch would break the strict order
  unsigned depth = sb_.depth();
  unsigned hint;
  std::atomic<unsigned>& slot = hint_slot(depth, &hint);
  uint64_t mask = sb_.get_batch(nr, offset, hint);
  if (mask) {
    unsigned last = *offset + 63 - static_cast<unsigned>(__builtin_clzll(mask));
    slot.store(last + 1 >= depth - 1 ? 0 : last + 1, std::memory_order_relaxed);
  }
  return mask;
}

// The hot path. Cost with nobody waiting: the seq_cst fetch_or on `cleared`
// plus a load of ws_active_ (on x86 a plain load) and the hint store. The
// seq_cst pair orders "bit freed" before "any waiters?" against add_wait()'s
// "waiter counted" before "retry the allocation": one of the two always
// sees the other, so no waiter sleeps on a bit freed unseen.
void SbitmapQueue::clear_batch(const int* bits, unsigned nr, int offset, unsigned cpu) {
  if (nr == 0) return;
  const unsigned shift = sb_.shift();
  const unsigned word_mask = (1u << shift) - 1;
  unsigned cur_first = 0;
  uint64_t mask = 0;
  for (unsigned i = 0; i < nr; i++) {
    unsigned bit = static_cast<unsigned>(bits[i] - offset);
    unsigned first = bit & ~word_mask;
    if (mask && first != cur_first) {
      sb_.clear_mask(cur_first, mask);
      mask = 0;
    }
    cur_first = first;
    mask |= 1ull << (bit & word_mask);
  }
  sb_.clear_mask(cur_first, mask);
  // As sbitmap.h:SbitmapQueue::clear: pairs with add_wait below.
  if (ws_active_.load(std::memory_order_seq_cst)) wake_up(nr);
  unsigned last = static_cast<unsigned>(bits[nr - 1] - offset);
  if (!round_robin_ && last < sb_.depth())
    alloc_hint_[cpu < nr_hints_ ? cpu : cpu % nr_hints_].store(last, std::memory_order_relaxed);
}

// Counts frees globally and issues one batch wake-up per wake_batch frees.
// Every freer adds first and then tries to claim batches, so the last freer
// of a batch always sees the full count: a batch is never lost to a race,
// and at most wake_batch - 1 frees stay unaccounted (they are carried over).
void SbitmapQueue::wake_up(unsigned nr) {
  unsigned batch = wake_batch_.load(std::memory_order_relaxed);
  completion_cnt_.fetch_add(nr, std::memory_order_relaxed);
  unsigned wakeups = wakeup_cnt_.load(std::memory_order_relaxed);
  do {
    if (completion_cnt_.load(std::memory_order_relaxed) - wakeups < batch) return;
  } while (!wakeup_cnt_.compare_exchange_weak(wakeups, wakeups + batch,
                                              std::memory_order_relaxed));
  wake_nr(batch);
}

// Wakes up to nr waiters, starting at wake_index_ and moving on to the next
// queues while fewer were found; wake_index_ then points past the last queue
// used so successive batches rotate over the queues.
void SbitmapQueue::wake_nr(unsigned nr) {
  // This and the nr_waiting read below pair with add_wait's increment and
  // fence, as the freers' reads do (wake_nr runs after their clear).
  if (!ws_active_.load(std::memory_order_seq_cst)) return;
  unsigned index = wake_index_.load(std::memory_order_relaxed);
  const unsigned start = index;
  for (unsigned i = 0; i < kSbqWaitQueues && nr; i++) {
    SbqWaitQueue& wq = ws_[index];
    index = (index + 1) % kSbqWaitQueues;
    if (!wq.nr_waiting.load(std::memory_order_seq_cst)) continue;  // see above
    std::lock_guard g(wq.lock);
    while (nr && !wq.waiters.empty()) {
      ListNode* n = wq.waiters.next;
      ListNode::unlink(n);
      SbqWaitEntry* e = list_entry<SbqWaitEntry, &SbqWaitEntry::node>(n);
      e->queued = false;
      wq.nr_waiting.fetch_sub(1, std::memory_order_relaxed);
      ws_active_.fetch_sub(1, std::memory_order_relaxed);
      nr--;
      // Last use of e: once func has run the owner may free it.
      e->func(e);
    }
  }
  if (index != start) wake_index_.store(index, std::memory_order_relaxed);
}

SbqWaitQueue* SbitmapQueue::wait_ptr(std::atomic<unsigned>* wait_index) {
  unsigned i = wait_index->fetch_add(1, std::memory_order_relaxed);
  return &ws_[i % kSbqWaitQueues];
}

void SbitmapQueue::add_wait(SbqWaitQueue* wq, SbqWaitEntry* entry) {
  {
    std::lock_guard g(wq->lock);
    if (entry->queued) return;
    wq->waiters.push_back(&entry->node);
    entry->queued = true;
    wq->nr_waiting.fetch_add(1, std::memory_order_relaxed);
    ws_active_.fetch_add(1, std::memory_order_seq_cst);  // ordered by the fence below
  }
  // Pairs with sbitmap.h:SbitmapQueue::clear and this file's clear_batch
  // (a bit freed, then ws_active_ read): the caller's allocation retry
  // after this must see any bit freed by a clear that did not see this
  // waiter. Also with wake_all's fence (a resize's new depth).
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void SbitmapQueue::remove_wait(SbqWaitQueue* wq, SbqWaitEntry* entry) {
  std::lock_guard g(wq->lock);
  if (!entry->queued) return;
  ListNode::unlink(&entry->node);
  entry->queued = false;
  wq->nr_waiting.fetch_sub(1, std::memory_order_relaxed);
  ws_active_.fetch_sub(1, std::memory_order_relaxed);
}

void SbitmapQueue::wake_all() {
  // The new depth (resize) before the waiters are read: pairs with
  // add_wait's fence, so a waiter either is woken here or retries against
  // the new depth (sbitmap_queue_wake_all's barrier).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  unsigned index = wake_index_.load(std::memory_order_relaxed);
  for (unsigned i = 0; i < kSbqWaitQueues; i++) {
    SbqWaitQueue& wq = ws_[(index + i) % kSbqWaitQueues];
    if (!wq.nr_waiting.load(std::memory_order_seq_cst)) continue;  // after the fence above
    std::lock_guard g(wq.lock);
    while (!wq.waiters.empty()) {
      ListNode* n = wq.waiters.next;
      ListNode::unlink(n);
      SbqWaitEntry* e = list_entry<SbqWaitEntry, &SbqWaitEntry::node>(n);
      e->queued = false;
      wq.nr_waiting.fetch_sub(1, std::memory_order_relaxed);
      ws_active_.fetch_sub(1, std::memory_order_relaxed);
      e->func(e);
    }
  }
}

LockStat SbitmapQueue::wait_lock_stat() const {
  LockStat sum;
  for (const SbqWaitQueue& wq : ws_) sum.add(wq.lock.stat());
  return sum;
}

void SbitmapQueue::set_min_shallow_depth(unsigned d) {
  min_shallow_depth_.store(d, std::memory_order_relaxed);
  wake_batch_.store(calc_wake_batch(sb_.depth()), std::memory_order_relaxed);
}

void SbitmapQueue::resize(unsigned depth) {
  wake_batch_.store(calc_wake_batch(depth), std::memory_order_relaxed);
  sb_.resize(depth);
  // Waiters may have been counting on a batch size or bits that no longer
  // exist; let them all retry against the new map.
  wake_all();
}

// Fair tag sharing: each of `users` queues may hold about depth / users
// bits, so the batch must be small enough for that share to wake waiters.
void SbitmapQueue::recalculate_wake_batch(unsigned users) {
  users = std::max(users, 1u);
  unsigned share = (sb_.depth() + users - 1) / users;
  wake_batch_.store(std::clamp(share / kSbqWaitQueues, 1u, kSbqWakeBatch),
                    std::memory_order_relaxed);
}

TaskWaiter::TaskWaiter() {
  entry_.func = &TaskWaiter::wake_fn;
  entry_.data = this;
}

// Three states so the waker's futex wake (which names woken_) happens
// before the waiter may return: the waiter treats kWaking as "not yet" and
// only kWoken, the waker's last store, as permission to return and free.
void TaskWaiter::wake_fn(SbqWaitEntry* e) {
  auto* w = static_cast<TaskWaiter*>(e->data);
  w->woken_.store(kWaking, std::memory_order_relaxed);
  futex_wake(&w->woken_, 1);
  w->woken_.store(kWoken, std::memory_order_release);
}

bool TaskWaiter::wait(uint64_t timeout_ns) {
  const uint64_t deadline = timeout_ns ? now_ns() + timeout_ns : 0;
  unsigned spins = 0;
  for (;;) {
    uint32_t s = woken_.load(std::memory_order_acquire);
    if (s == kWoken) return true;
    if (s == kWaking) {
      // The waker is between its two stores (one futex call); wait it out.
      if (++spins < 100) {
        cpu_relax();
      } else {
        sched_yield();
      }
      continue;
    }
    uint64_t left = 0;
    if (deadline) {
      uint64_t now = now_ns();
      if (now >= deadline) return false;
      left = deadline - now;
    }
    futex_wait(&woken_, kWaiting, left);
  }
}

void TaskWaiter::reset() { woken_.store(kWaiting, std::memory_order_relaxed); }

}  // namespace blkmq::base
