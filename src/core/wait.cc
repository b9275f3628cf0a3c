// Queue::wait and wake_waiters: which thread sleeps in a device for which
// wait word.
//
// A driver that lets a waiter sleep in the device (uring: in the ring)
// needs a futex it can leave armed there after the call returns; the
// caller's word may be gone by then, and a later futex user at the same
// address would have its wakes taken by the stale arm. So each thread has
// a wake channel of its own, pooled and never freed, and a small table
// maps the word a thread sleeps for to its channel while it sleeps there.
// wake_waiters(word) wakes the futex sleepers on the word itself and bumps
// and wakes the channel of every thread the table lists for it.
#include <climits>
#include <mutex>
#include <vector>

#include "base/event.h"
#include "base/spinlock.h"
#include "core/core.h"

namespace blkmq {
namespace {

struct Channel {
  std::atomic<uint32_t> seq{0};
};

std::mutex g_pool_mu;
// Never destroyed, like the channels it holds (threads may exit after
// static destructors ran).
std::vector<Channel*>& g_pool = *new std::vector<Channel*>;

// The calling thread's channel; back to the pool at thread exit. A reused
// channel may still have arms from its last owner in some ring: a wake
// that reaches them only wakes that ring's waiters spuriously.
struct ThreadChannel {
  Channel* ch;
  ThreadChannel() {
    std::lock_guard lk(g_pool_mu);
    if (g_pool.empty()) {
      ch = new Channel;  // pooled, never freed (see above)
    } else {
      ch = g_pool.back();
      g_pool.pop_back();
    }
  }
  ~ThreadChannel() {
    std::lock_guard lk(g_pool_mu);
    g_pool.push_back(ch);
  }
};
thread_local ThreadChannel tl_channel;

// Threads asleep in a device, by the word they wait for. Few at a time
// (one per waiting thread), so a short list per bucket.
struct Sleeper {
  const void* word;
  Channel* ch;
};
struct Bucket {
  base::SpinLock lock;
  std::vector<Sleeper> sleepers;
};
constexpr unsigned kBuckets = 64;
Bucket g_buckets[kBuckets];

Bucket& bucket_of(const void* word) {
  const auto v = reinterpret_cast<uintptr_t>(word);
  return g_buckets[(v >> 2 ^ v >> 9) % kBuckets];
}

void add_sleeper(const void* word, Channel* ch) {
  Bucket& b = bucket_of(word);
  std::lock_guard lk(b.lock);
  b.sleepers.push_back({word, ch});
}

void remove_sleeper(const void* word, Channel* ch) {
  Bucket& b = bucket_of(word);
  std::lock_guard lk(b.lock);
  for (size_t i = 0; i < b.sleepers.size(); i++) {
    if (b.sleepers[i].word == word && b.sleepers[i].ch == ch) {
      b.sleepers[i] = b.sleepers.back();
      b.sleepers.pop_back();
      return;
    }
  }
}

}  // namespace

void Queue::wait(const Bio* bio, std::atomic<uint32_t>* word, uint32_t val) {
  QueueImpl* q = to_impl(this);
  const unsigned idx = static_cast<unsigned>(bio_cookie(bio));
  if (q->ops_->wait && idx < q->nr_hw_queues_) {
    Channel* ch = tl_channel.ch;
    // Listed before the driver reads the word: a waker that changes the
    // word after our check finds us here (the bucket lock orders the two).
    add_sleeper(word, ch);
    // Pairs with wait.cc:wake_waiters' increment of the channel: a wake
    // after this read changes seq, so the driver's wait on (channel, seq)
    // returns at once instead of sleeping through it.
    const uint32_t seq = ch->seq.load(std::memory_order_seq_cst);
    const int r = q->ops_->wait(q->hctx(idx), word, val, &ch->seq, seq);
    remove_sleeper(word, ch);
    if (r == 0) return;
  }
  base::futex_wait(word, val);
}

void wake_waiters(std::atomic<uint32_t>* word, int nr) {
  base::futex_wake(word, nr);
  Bucket& b = bucket_of(word);
  Channel* found[8];
  unsigned n = 0;
  bool more = false;
  {
    std::lock_guard lk(b.lock);
    for (const Sleeper& s : b.sleepers) {
      if (s.word != word) continue;
      if (n == 8) {
        more = true;
        break;
      }
      found[n++] = s.ch;
    }
  }
  // Channels are never freed, so waking one after the lock is dropped is
  // safe; at worst its thread has moved on and wakes once for nothing.
  for (unsigned i = 0; i < n; i++) {
    // Pairs with wait.cc:Queue::wait's read of the channel, and with a
    // driver's check of it before it sleeps (uring_wait.cc:UringQueue::wait).
    found[i]->seq.fetch_add(1, std::memory_order_seq_cst);
    base::futex_wake(&found[i]->seq, INT_MAX);
  }
  if (!more) return;
  // Rare (more than eight sleepers on one word): wake the rest under the lock.
  std::lock_guard lk(b.lock);
  for (const Sleeper& s : b.sleepers) {
    if (s.word != word) continue;
    s.ch->seq.fetch_add(1, std::memory_order_seq_cst);  // as above
    base::futex_wake(&s.ch->seq, INT_MAX);
  }
}

}  // namespace blkmq
