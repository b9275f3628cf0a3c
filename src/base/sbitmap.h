// Scalable bitmap allocator (lib/sbitmap.c analogue) and the queue of
// waiters on top of it. Used for driver tags, scheduler tags and kyber's
// token pools. No block-layer knowledge.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <memory>
#include <mutex>

#include "base/lockstat.h"
#include "blkmq/driver/list.h"

namespace blkmq::base {

// A bitmap split into words of (1 << shift) bits, each word on its own cache
// line with a separate `cleared` mask: freeing sets a bit in `cleared`
// (no read-modify-write on the allocation word); the allocator folds cleared
// bits back lazily when a word looks full ("deferred clearing").
class Sbitmap {
 public:
  // depth: number of bits (0 allowed). shift < 0: automatic (64 bits per word,
  // shifted down so that there are about 4 words or more, as the kernel
  // does). round_robin: always search from the hint onwards.
  Sbitmap(unsigned depth, int shift = -1, bool round_robin = false);
  ~Sbitmap();
  Sbitmap(const Sbitmap&) = delete;
  Sbitmap& operator=(const Sbitmap&) = delete;

  // Allocates a free bit, starting the search at *hint; returns -1 if full.
  int get(unsigned hint);
  // Like get() but uses at most shallow_depth bits of the whole map, spread
  // proportionally over words (6.17+ semantics).
  int get_shallow(unsigned hint, unsigned shallow_depth);
  // Allocates up to nr bits from one word. Returns the mask of bits taken,
  // relative to *offset (set to the word's first bit). 0 if none.
  uint64_t get_batch(unsigned nr, unsigned* offset);
  // Same, starting the search at the word that holds bit `hint`.
  uint64_t get_batch(unsigned nr, unsigned* offset, unsigned hint);
  // Frees a bit (deferred: goes to the word's cleared mask). Sequentially
  // consistent, so a waker may check for waiters right after it: with
  // SbitmapQueue::clear's ws_active_ read it pairs with sbitmap_queue.cc:
  // SbitmapQueue::add_wait (and core dispatch.cc:mark_tag_wait). Its
  // release half also hands the freer's writes to sbitmap.cc:
  // deferred_clear. Inline: once per request freed.
  void clear_bit(unsigned bit) {
    assert(bit < (map_nr_ << shift_));
    const uint64_t mask = 1ull << (bit & ((1u << shift_) - 1));
    [[maybe_unused]] const uint64_t old = map_[bit >> shift_].cleared.fetch_or(mask, std::memory_order_seq_cst);
    assert(!(old & mask) && "double free of an sbitmap bit");
  }
  // Frees the bits of `mask` in the word that starts at bit `word_first`
  // (a multiple of 1 << shift) with one atomic operation.
  void clear_mask(unsigned word_first, uint64_t mask);
  bool test_bit(unsigned bit) const;   // allocated and not yet freed
  bool any_bit_set() const;
  unsigned weight() const;             // allocated bits
  unsigned depth() const { return depth_.load(std::memory_order_relaxed); }
  unsigned shift() const { return shift_; }
  // Changes the usable depth (<= the depth given at construction). Bits
  // beyond the new depth that are allocated stay valid until freed.
  void resize(unsigned depth);
  // Calls fn(bit) for every allocated bit; fn returns false to stop.
  template <typename Fn>
  void for_each_set(Fn&& fn) const;

 private:
  struct alignas(64) Word {
    std::atomic<uint64_t> word{0};
    std::atomic<uint64_t> cleared{0};
    // Serialises folding `cleared` into `word`, so an allocator that finds
    // the word full never misses bits another allocator is folding back.
    std::atomic<bool> swap_lock{false};
  };
  unsigned word_depth(unsigned i, unsigned depth) const;
  unsigned shallow_word_depth(unsigned i, unsigned depth, unsigned shallow) const;
  bool deferred_clear(Word& w, uint64_t range);
  int get_from_word(unsigned index, unsigned depth, unsigned hint_in_word, bool wrap);
  int find_bit(unsigned depth, unsigned shallow, unsigned index, unsigned hint_in_word,
               bool wrap);

  std::atomic<unsigned> depth_;
  unsigned max_depth_;
  unsigned shift_;
  unsigned map_nr_;                    // words allocated (for max_depth_)
  bool round_robin_;
  std::unique_ptr<Word[]> map_;
};

template <typename Fn>
void Sbitmap::for_each_set(Fn&& fn) const {
  for (unsigned i = 0; i < map_nr_; i++) {
    uint64_t bits = map_[i].word.load(std::memory_order_acquire) &
                    ~map_[i].cleared.load(std::memory_order_acquire);
    while (bits) {
      unsigned b = static_cast<unsigned>(__builtin_ctzll(bits));
      bits &= bits - 1;
      if (!fn((i << shift_) + b)) return;
    }
  }
}

// A waiter on a SbitmapQueue. For a sleeping task use TaskWaiter (below);
// the core also hooks callbacks (e.g. "run this hctx when a tag frees").
struct SbqWaitEntry {
  ListNode node;                       // on a wait queue while waiting
  void (*func)(SbqWaitEntry*) = nullptr;  // called with the wait queue lock held, after unlinking
  void* data = nullptr;
  // Written under the wait queue's lock; atomic so that the core may look
  // without it (list_empty_careful on hctx->dispatch_wait).
  std::atomic<bool> queued{false};
};

class SbitmapQueue;

// One of the 8 wait queues.
struct alignas(64) SbqWaitQueue {
  StatMutex lock;  // counted: mq/<n>/tags_wait_lock_stat
  ListNode waiters;
  std::atomic<unsigned> nr_waiting{0};  // lets wakers skip empty queues without the lock
};

constexpr unsigned kSbqWaitQueues = 8;
constexpr unsigned kSbqWakeBatch = 8;

// sbitmap_queue: the bitmap plus per-CPU allocation hints and 8 wait queues
// with batched wake-ups. Thread-safe.
class SbitmapQueue {
 public:
  SbitmapQueue(unsigned depth, bool round_robin, int shift = -1);
  ~SbitmapQueue();

  // Allocate using the calling CPU's hint; -1 if none free.
  int get();
  int get_shallow(unsigned shallow_depth);
  uint64_t get_batch(unsigned nr, unsigned* offset);
  // Free a bit allocated on any CPU; `cpu` is the allocating CPU whose hint
  // is updated (kernel: the CPU that frees updates the allocator's hint).
  // Wakes waiters in batches of wake_batch(). Inline: once per request
  // freed; the wake-up is out of line.
  void clear(unsigned bit, unsigned cpu) {
    sb_.clear_bit(bit);
    // The bit freed, then the waiters counted; pairs with sbitmap_queue.cc:
    // add_wait (the waiter counted, then the bits retried): either this
    // sees the waiter and wakes it, or its retry finds the bit.
    if (ws_active_.load(std::memory_order_seq_cst)) wake_up(1);
    // Freeing CPU steers the allocating CPU back to a bit that is hot in
    // cache; a plain store, the hint is only a hint.
    if (!round_robin_ && bit < sb_.depth())
      alloc_hint_[cpu < nr_hints_ ? cpu : cpu % nr_hints_].store(bit, std::memory_order_relaxed);
  }
  // Frees several bits (each bits[i] - offset), then wakes once for all of
  // them; `cpu` is the caller's, as for clear(), read once per batch by
  // the caller rather than once here.
  void clear_batch(const int* bits, unsigned nr, int offset, unsigned cpu);

  // The wait queue a waiter should use; rotates through the 8 queues via
  // *wait_index (per hctx in the core).
  SbqWaitQueue* wait_ptr(std::atomic<unsigned>* wait_index);
  // Adds entry to wq unless already queued (counts it as an active waiter).
  void add_wait(SbqWaitQueue* wq, SbqWaitEntry* entry);
  // Removes entry from wq if still queued.
  void remove_wait(SbqWaitQueue* wq, SbqWaitEntry* entry);
  // Wakes every waiter (resize, teardown, fake wake-up after a migration).
  void wake_all();
  // The 8 wait queues' lock counters, summed (mq/<n>/tags_wait_lock_stat).
  // Any thread; lock-free reads, so the sum may be a few counts stale.
  LockStat wait_lock_stat() const;
  // Number of waiters currently queued on all wait queues.
  unsigned active_waiters() const { return ws_active_.load(std::memory_order_relaxed); }

  // The smallest shallow depth any allocator will use; keeps wake_batch
  // small enough that shallow allocators are woken.
  void set_min_shallow_depth(unsigned d);
  // Resize the usable depth, recompute wake_batch, and wake all waiters.
  void resize(unsigned depth);
  // Recompute wake_batch for `users` sharing the map (fair tag sharing).
  void recalculate_wake_batch(unsigned users);

  unsigned depth() const { return sb_.depth(); }
  unsigned wake_batch() const { return wake_batch_.load(std::memory_order_relaxed); }
  Sbitmap& bitmap() { return sb_; }
  const Sbitmap& bitmap() const { return sb_; }

 private:
  std::atomic<unsigned>& hint_slot(unsigned depth, unsigned* hint);
  void update_hint(std::atomic<unsigned>& slot, unsigned depth, unsigned hint, int nr);
  void wake_up(unsigned nr);
  void wake_nr(unsigned nr);
  unsigned calc_wake_batch(unsigned depth) const;

  Sbitmap sb_;
  std::unique_ptr<std::atomic<unsigned>[]> alloc_hint_;  // per CPU
  unsigned nr_hints_;
  std::atomic<unsigned> wake_batch_{1};
  std::atomic<unsigned> wake_index_{0};
  std::atomic<unsigned> ws_active_{0};
  std::atomic<unsigned> completion_cnt_{0};
  std::atomic<unsigned> wakeup_cnt_{0};
  std::atomic<unsigned> min_shallow_depth_;
  bool round_robin_;
  SbqWaitQueue ws_[kSbqWaitQueues];
};

// A task's wait entry: wait() sleeps until the entry's func runs (a wake-up)
// or the deadline passes. Usage per round: reset(); add_wait(); retry the
// allocation; wait(); and remove_wait() before returning or destroying it
// (after a timeout the entry may still be queued). The waker never touches
// the entry once wait() can return true, so the waiter may destroy it then.
class TaskWaiter {
 public:
  TaskWaiter();
  SbqWaitEntry* entry() { return &entry_; }
  // Sleep until woken (returns true) or timeout_ns elapses (false); 0 = no
  // timeout.
  bool wait(uint64_t timeout_ns);
  // Forget a previous wake-up; only while the entry is not queued.
  void reset();
  bool woken() const { return woken_.load(std::memory_order_acquire) == kWoken; }

 private:
  static constexpr uint32_t kWaiting = 0, kWaking = 1, kWoken = 2;
  static void wake_fn(SbqWaitEntry* e);
  SbqWaitEntry entry_;
  std::atomic<uint32_t> woken_{kWaiting};
};

}  // namespace blkmq::base
