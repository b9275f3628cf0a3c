#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/percpu.h"
#include "base/sbitmap.h"
#include "support/stress.h"
#include "support/wait.h"

namespace blkmq::base {
namespace {

using namespace std::chrono_literals;

// The kernel's tag-wait loop: queue the entry, retry, sleep. A wait that
// times out means a wake-up was lost; it is counted (and the loop retries,
// so a bug fails the test instead of hanging it).
int get_or_wait(SbitmapQueue& q, std::atomic<unsigned>* wait_index, std::atomic<int>* timeouts,
                uint64_t timeout_ns = 3 * kNsPerSec) {
  int nr = q.get();
  if (nr >= 0) return nr;
  SbqWaitQueue* ws = q.wait_ptr(wait_index);
  TaskWaiter tw;
  for (;;) {
    tw.reset();
    q.add_wait(ws, tw.entry());
    nr = q.get();
    if (nr >= 0) break;
    if (!tw.wait(timeout_ns)) (*timeouts)++;
    q.remove_wait(ws, tw.entry());
    // Woken: try before queueing again, as blk_mq_get_tag does. Queueing
    // first would let a later batch spend a wake-up on this thread, which
    // is about to succeed, instead of on a sleeper.
    nr = q.get();
    if (nr >= 0) return nr;
  }
  q.remove_wait(ws, tw.entry());
  return nr;
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds limit = 3000ms) {
  return test::eventually(pred, static_cast<int>(limit.count()));
}

TEST(SbitmapQueue, WakeBatchFollowsDepth) {
  const std::pair<unsigned, unsigned> cases[] = {{1, 1},  {7, 1},   {8, 1},   {16, 2},
                                                 {32, 4}, {63, 7},  {64, 8},  {128, 8},
                                                 {1000, 8}};
  for (auto [depth, batch] : cases) EXPECT_EQ(SbitmapQueue(depth, false).wake_batch(), batch) << depth;

  SbitmapQueue q(256, false);
  EXPECT_EQ(q.wake_batch(), 8u);
  q.set_min_shallow_depth(16);  // shallow users must still be woken
  EXPECT_EQ(q.wake_batch(), 2u);
  q.set_min_shallow_depth(UINT32_MAX);
  EXPECT_EQ(q.wake_batch(), 8u);
  q.recalculate_wake_batch(4);  // 64 bits each
  EXPECT_EQ(q.wake_batch(), 8u);
  q.recalculate_wake_batch(16);  // 16 each
  EXPECT_EQ(q.wake_batch(), 2u);
  q.recalculate_wake_batch(100);
  EXPECT_EQ(q.wake_batch(), 1u);
  q.resize(24);
  EXPECT_EQ(q.wake_batch(), 3u);
  EXPECT_EQ(q.depth(), 24u);
}

TEST(SbitmapQueue, WakesOncePerBatchOfFrees) {
  SbitmapQueue q(64, false);  // wake_batch 8
  std::vector<int> held;
  for (int nr; (nr = q.get()) >= 0;) held.push_back(nr);
  ASSERT_EQ(held.size(), 64u);
  q.clear(held.back(), 0);  // before anyone waits: not counted
  held.pop_back();
  std::atomic<unsigned> idx{0};
  SbqWaitQueue* ws = q.wait_ptr(&idx);
  TaskWaiter tw;
  q.add_wait(ws, tw.entry());
  q.add_wait(ws, tw.entry());  // already queued: no-op
  EXPECT_EQ(q.active_waiters(), 1u);
  for (int i = 0; i < 7; i++) {
    q.clear(held.back(), 0);
    held.pop_back();
  }
  EXPECT_FALSE(tw.woken());
  EXPECT_FALSE(tw.wait(kNsPerMs));
  q.clear(held.back(), 0);
  held.pop_back();
  EXPECT_TRUE(tw.woken());
  EXPECT_TRUE(tw.wait(kNsPerMs));
  EXPECT_FALSE(tw.entry()->queued);
  EXPECT_EQ(q.active_waiters(), 0u);
  q.remove_wait(ws, tw.entry());  // not queued any more: no-op
  EXPECT_EQ(q.active_waiters(), 0u);
}

TEST(SbitmapQueue, CallbackEntriesAndRemoveWait) {
  SbitmapQueue q(8, false);  // wake_batch 1
  for (int i = 0; i < 8; i++) ASSERT_GE(q.get(), 0);
  struct Hook {
    SbqWaitEntry e;
    int calls = 0;
  } a, b;
  auto fn = [](SbqWaitEntry* e) {
    EXPECT_FALSE(e->queued);  // unlinked before the call
    static_cast<Hook*>(e->data)->calls++;
  };
  a.e.func = b.e.func = fn;
  a.e.data = &a;
  b.e.data = &b;
  std::atomic<unsigned> idx{0};
  SbqWaitQueue* ws = q.wait_ptr(&idx);
  q.add_wait(ws, &a.e);
  q.add_wait(ws, &b.e);
  EXPECT_EQ(q.active_waiters(), 2u);
  q.clear(3, 0);
  EXPECT_EQ(a.calls, 1);  // FIFO
  EXPECT_EQ(b.calls, 0);
  q.remove_wait(ws, &b.e);
  EXPECT_EQ(q.active_waiters(), 0u);
  q.clear(4, 0);
  EXPECT_EQ(b.calls, 0);
}

// mq/<n>/tags_wait_lock_stat sums the 8 wait queues' locks: queuing a
// waiter, the wake-up that unlinks it and a remove_wait each take one.
TEST(SbitmapQueue, WaitLockStatCountsEveryWaitQueueLock) {
  SbitmapQueue q(8, false);  // wake_batch 1
  for (int i = 0; i < 8; i++) ASSERT_GE(q.get(), 0);
  EXPECT_EQ(q.wait_lock_stat().acquired, 0u);
  SbqWaitEntry e;
  e.func = [](SbqWaitEntry*) {};
  std::atomic<unsigned> idx{0};
  SbqWaitQueue* ws = q.wait_ptr(&idx);
  q.add_wait(ws, &e);
  q.clear(3, 0);  // wakes e under the queue's lock
  EXPECT_FALSE(e.queued);
  q.remove_wait(ws, &e);  // already unlinked: still takes the lock to know
  const LockStat s = q.wait_lock_stat();
  EXPECT_EQ(s.acquired, 3u);
  EXPECT_EQ(s.waited, 0u);
}

TEST(SbitmapQueue, ClearBatchWakesOnceForAll) {
  SbitmapQueue q(64, false);  // wake_batch 8
  std::vector<int> held;
  for (int nr; (nr = q.get()) >= 0;) held.push_back(nr);
  std::atomic<unsigned> idx{0};
  std::vector<std::unique_ptr<TaskWaiter>> tws;
  for (int i = 0; i < 10; i++) {
    tws.push_back(std::make_unique<TaskWaiter>());
    q.add_wait(q.wait_ptr(&idx), tws.back()->entry());
  }
  std::vector<int> tags;
  for (int i = 0; i < 8; i++) tags.push_back(held[i] + 1000);
  q.clear_batch(tags.data(), static_cast<unsigned>(tags.size()), 1000, 0);
  unsigned woken = 0;
  for (auto& t : tws) woken += t->woken();
  EXPECT_EQ(woken, 8u);  // one batch of wake_batch waiters
  for (int i = 0; i < 8; i++) EXPECT_FALSE(q.bitmap().test_bit(held[i]));
  q.wake_all();
  for (auto& t : tws) EXPECT_TRUE(t->woken());
  EXPECT_EQ(q.active_waiters(), 0u);
}

TEST(SbitmapQueue, ResizeWakesAllWaiters) {
  SbitmapQueue q(32, false);
  for (int i = 0; i < 32; i++) ASSERT_GE(q.get(), 0);
  std::atomic<unsigned> idx{0};
  std::atomic<int> timeouts{0}, done{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; i++) {
    ts.emplace_back([&] {
      SbqWaitQueue* ws = q.wait_ptr(&idx);
      TaskWaiter tw;
      q.add_wait(ws, tw.entry());
      if (!tw.wait(3 * kNsPerSec)) timeouts++;
      q.remove_wait(ws, tw.entry());
      done++;
    });
  }
  ASSERT_TRUE(wait_until([&] { return q.active_waiters() == 3; }));
  q.resize(16);
  for (auto& t : ts) t.join();
  EXPECT_EQ(timeouts.load(), 0);
  EXPECT_EQ(done.load(), 3);
}

// Many sleepers on a map that is full; every sleeper must get its bits in
// the end, with no wait ever running into the watchdog timeout.
void no_lost_wakeup(unsigned depth, bool shallow_mix) {
  SbitmapQueue q(depth, false);
  std::vector<int> held;
  for (int nr; (nr = q.get()) >= 0;) held.push_back(nr);
  ASSERT_EQ(held.size(), depth);
  const unsigned kThreads = 12;
  const unsigned rounds = test::scaled(400);
  std::atomic<unsigned> idx{0};
  std::atomic<int> timeouts{0};
  std::atomic<unsigned> finished{0};
  std::unique_ptr<std::atomic<int>[]> owner(new std::atomic<int>[depth]);
  for (unsigned i = 0; i < depth; i++) owner[i] = 0;
  std::atomic<unsigned> doubles{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      std::atomic<unsigned> my_idx{t};
      for (unsigned r = 0; r < rounds; r++) {
        int nr = get_or_wait(q, shallow_mix && (t & 1) ? &my_idx : &idx, &timeouts);
        if (owner[nr].exchange(1)) doubles++;
        if (r % 4 == 0) std::this_thread::yield();
        owner[nr] = 0;
        q.clear(static_cast<unsigned>(nr), this_cpu());
      }
      finished++;
    });
  }
  // Let the waiters pile up on the full map, then release it.
  wait_until([&] { return q.active_waiters() >= kThreads; }, 500ms);
  for (int b : held) q.clear(static_cast<unsigned>(b), this_cpu());
  for (auto& t : ts) t.join();
  EXPECT_EQ(timeouts.load(), 0) << "a sleeper was not woken";
  EXPECT_EQ(doubles.load(), 0u);
  EXPECT_EQ(finished.load(), kThreads);
  EXPECT_EQ(q.active_waiters(), 0u);
  EXPECT_FALSE(q.bitmap().any_bit_set());
}

TEST(SbitmapQueue, NoLostWakeupBatchOne) { no_lost_wakeup(4, false); }
TEST(SbitmapQueue, NoLostWakeupBatchTwo) { no_lost_wakeup(16, true); }
TEST(SbitmapQueue, NoLostWakeupBatchEight) { no_lost_wakeup(64, true); }

// As many sleepers as bits, each keeping the bit it gets: the frees of a
// full map must reach every sleeper, with no churn to paper over a wake-up
// lost to batching. Two threads free, so batches race.
void every_free_reaches_a_sleeper(unsigned depth) {
  SbitmapQueue q(depth, false);
  std::vector<int> held;
  for (int nr; (nr = q.get()) >= 0;) held.push_back(nr);
  std::atomic<unsigned> idx{0};
  std::atomic<int> timeouts{0};
  std::atomic<unsigned> got{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < depth; t++) {
    ts.emplace_back([&] {
      if (get_or_wait(q, &idx, &timeouts, 2 * kNsPerSec) >= 0) got++;
    });
  }
  ASSERT_TRUE(wait_until([&] { return q.active_waiters() == depth; }));
  std::thread other([&] {
    for (size_t i = 0; i < held.size(); i += 2) q.clear(static_cast<unsigned>(held[i]), 0);
  });
  for (size_t i = 1; i < held.size(); i += 2) q.clear(static_cast<unsigned>(held[i]), 1);
  other.join();
  for (auto& t : ts) t.join();
  EXPECT_EQ(timeouts.load(), 0) << "a sleeper was not woken";
  EXPECT_EQ(got.load(), depth);
  EXPECT_EQ(q.bitmap().weight(), depth);
}

TEST(SbitmapQueue, EveryFreeReachesASleeperDepth8) { every_free_reaches_a_sleeper(8); }
TEST(SbitmapQueue, EveryFreeReachesASleeperDepth16) { every_free_reaches_a_sleeper(16); }
TEST(SbitmapQueue, EveryFreeReachesASleeperDepth64) { every_free_reaches_a_sleeper(64); }

// The waiter frees its TaskWaiter as soon as wait() returns; the waker must
// not touch it afterwards (ASan reports it if it does).
TEST(SbitmapQueue, WaiterMayFreeItselfRightAfterWake) {
  SbitmapQueue q(8, false);  // wake_batch 1
  const unsigned iters = test::scaled(2000);
  test::TimeLimit limit(3s);
  std::atomic<unsigned> idx{0};
  int timeouts = 0;
  for (unsigned i = 0; i < iters && !limit.passed(); i++) {
    std::vector<int> held;
    for (int nr; (nr = q.get()) >= 0;) held.push_back(nr);
    auto tw = std::make_unique<TaskWaiter>();
    SbqWaitQueue* ws = q.wait_ptr(&idx);
    q.add_wait(ws, tw->entry());
    std::thread waker([&] { q.clear(static_cast<unsigned>(held[0]), 0); });
    if (!tw->wait(3 * kNsPerSec)) timeouts++;
    q.remove_wait(ws, tw->entry());
    tw.reset();  // freed while the waker may still be returning
    waker.join();
    for (size_t j = 1; j < held.size(); j++) q.clear(static_cast<unsigned>(held[j]), 0);
  }
  EXPECT_EQ(timeouts, 0);
}

}  // namespace
}  // namespace blkmq::base
