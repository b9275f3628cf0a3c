#include "base/timer.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/event.h"
#include "support/stress.h"
#include "support/wait.h"

namespace blkmq::base {
namespace {

using namespace std::chrono_literals;

// Returns once tt's thread has fired everything due by `when`: a sentinel
// armed for `when` fires after all of them (expiry order, FIFO on ties).
// A test that checks that a cancelled or moved expiry never fired waits
// for the thread to pass it, instead of sleeping past it.
bool passed(TimerThread& tt, uint64_t when) {
  Completion fired;
  Timer sentinel;
  sentinel.init(&tt, [&] { fired.complete(); });
  sentinel.arm_at(when);
  return fired.wait_for(3 * kNsPerSec);
}

// Runs `release` on another thread once the calling thread is asleep in a
// futex (waiting in cancel_sync or a timer's destructor), and joins it
// when it goes out of scope.
class ReleaseOnceWaiting {
 public:
  explicit ReleaseOnceWaiting(Event& release)
      : t_([&release, tid = test::this_tid()] {
          test::eventually([tid] { return test::asleep_in(tid, SYS_futex); });
          release.notify();
        }) {}
  ~ReleaseOnceWaiting() { t_.join(); }

 private:
  std::thread t_;
};

TEST(Timer, FiresInExpiryOrderFifoOnTies) {
  TimerThread tt("tmr-order");
  std::mutex mu;
  std::vector<int> order;
  Completion all;
  Timer t[5];
  const uint64_t now = now_ns();
  const uint64_t when[5] = {now + 40 * kNsPerMs, now + 10 * kNsPerMs, now + 20 * kNsPerMs,
                            now + 20 * kNsPerMs, now + 5 * kNsPerMs};
  for (int i = 0; i < 5; i++) {
    t[i].init(&tt, [&, i] {
      std::lock_guard<std::mutex> g(mu);
      order.push_back(i);
      if (order.size() == 5) all.complete();
    });
  }
  for (int i = 0; i < 5; i++) t[i].arm_at(when[i]);
  ASSERT_TRUE(all.wait_for(3 * kNsPerSec));
  EXPECT_EQ(order, (std::vector<int>{4, 1, 2, 3, 0}));
  for (auto& x : t) EXPECT_FALSE(x.armed());
}

TEST(Timer, DoesNotFireEarly) {
  TimerThread tt("tmr-early");
  std::atomic<uint64_t> fired_at{0};
  Completion c;
  Timer t;
  t.init(&tt, [&] {
    fired_at = now_ns();
    c.complete();
  });
  uint64_t due = now_ns() + 20 * kNsPerMs;
  t.arm_at(due);
  EXPECT_EQ(t.expires(), due);
  ASSERT_TRUE(c.wait_for(3 * kNsPerSec));
  EXPECT_GE(fired_at.load(), due);
}

TEST(Timer, RearmMovesTheExpiry) {
  TimerThread tt("tmr-rearm");
  std::atomic<int> fired{0};
  Timer t;
  t.init(&tt, [&] { fired++; });
  t.arm_after(10 * kNsPerSec);
  t.arm_after(5 * kNsPerMs);  // earlier
  ASSERT_TRUE(t.armed());
  ASSERT_TRUE(passed(tt, t.expires()));
  EXPECT_EQ(fired.load(), 1);
  t.arm_after(5 * kNsPerMs);
  const uint64_t gone = t.expires();
  t.arm_after(10 * kNsPerSec);  // later: the 5 ms expiry is gone
  ASSERT_TRUE(passed(tt, gone));
  EXPECT_EQ(fired.load(), 1);
  EXPECT_TRUE(t.armed());
  EXPECT_TRUE(t.cancel());
}

TEST(Timer, CancelPreventsFiring) {
  TimerThread tt("tmr-cancel");
  std::atomic<int> fired{0};
  Timer t;
  t.init(&tt, [&] { fired++; });
  EXPECT_FALSE(t.cancel());
  t.arm_after(20 * kNsPerMs);
  const uint64_t due = t.expires();
  EXPECT_TRUE(t.cancel());
  EXPECT_FALSE(t.armed());
  EXPECT_FALSE(t.cancel());
  ASSERT_TRUE(passed(tt, due));
  EXPECT_EQ(fired.load(), 0);
}

TEST(Timer, ArmIfEarlier) {
  TimerThread tt("tmr-earlier");
  Timer t;
  t.init(&tt, [] {});
  uint64_t now = now_ns();
  EXPECT_TRUE(t.arm_if_earlier(now + 10 * kNsPerSec));  // not armed yet
  EXPECT_FALSE(t.arm_if_earlier(now + 20 * kNsPerSec));
  EXPECT_EQ(t.expires(), now + 10 * kNsPerSec);
  EXPECT_TRUE(t.arm_if_earlier(now + 5 * kNsPerSec));
  EXPECT_EQ(t.expires(), now + 5 * kNsPerSec);
  EXPECT_FALSE(t.arm_if_earlier(now + 5 * kNsPerSec));
  t.cancel_sync();
  EXPECT_FALSE(t.armed());
}

TEST(Timer, CancelSyncWaitsForRunningCallback) {
  TimerThread tt("tmr-sync");
  Event started, release;
  std::atomic<bool> finished{false};
  Timer t;
  t.init(&tt, [&] {
    started.notify();
    release.wait(3 * kNsPerSec);
    // Runs on well after its release: a cancel_sync that stopped waiting
    // after a bounded time would return first. Real time by design.
    std::this_thread::sleep_for(20ms);
    finished = true;
  });
  t.arm_after(0);
  ASSERT_TRUE(started.wait(3 * kNsPerSec));
  EXPECT_FALSE(t.armed());
  {
    ReleaseOnceWaiting releaser(release);  // released once cancel_sync sleeps
    t.cancel_sync();
    EXPECT_TRUE(finished.load());
  }
}

TEST(Timer, CallbackMayCancelSyncAndRearmItself) {
  TimerThread tt("tmr-self", /*hardirq_context=*/true);
  EXPECT_TRUE(tt.hardirq_context());
  std::atomic<int> runs{0};
  std::atomic<bool> on_thread{false};
  Completion done;
  Timer t;
  t.init(&tt, [&] {
    on_thread = tt.on_this_thread();
    t.cancel_sync();  // from its own callback: must not wait for itself
    if (++runs < 5) t.arm_after(kNsPerMs);
    else done.complete();
  });
  t.arm_after(kNsPerMs);
  ASSERT_TRUE(done.wait_for(3 * kNsPerSec));
  EXPECT_EQ(runs.load(), 5);
  EXPECT_TRUE(on_thread.load());
  EXPECT_FALSE(tt.on_this_thread());
}

TEST(Timer, CancelSyncStopsASelfRearmingTimer) {
  TimerThread tt("tmr-periodic");
  std::atomic<int> runs{0};
  Timer t;
  t.init(&tt, [&] {
    runs++;
    t.arm_after(100 * kNsPerUs);
  });
  t.arm_after(0);
  ASSERT_TRUE(test::eventually([&] { return runs >= 3; }, 3000));
  t.cancel_sync();
  int after = runs;
  EXPECT_FALSE(t.armed());
  // A rearm that survived would be due within 100 us: past the sentinel's time.
  ASSERT_TRUE(passed(tt, now_ns() + kNsPerMs));
  EXPECT_EQ(runs.load(), after);
}

TEST(Timer, DestroyWhileArmedOrRunning) {
  TimerThread tt("tmr-destroy");
  std::atomic<int> fired{0};
  for (int i = 0; i < 50; i++) {
    auto t = std::make_unique<Timer>();
    t->init(&tt, [&] { fired++; });
    t->arm_after(i % 2 ? 0 : 50 * kNsPerMs);
    // Sometimes the timer thread gets to it first: real time varies the
    // interleaving, which is the point.
    if (i % 3 == 0) std::this_thread::sleep_for(100us);
    t.reset();  // cancels and waits; ASan catches a callback on freed memory
  }
  const uint64_t last_due = now_ns() + 50 * kNsPerMs;  // no destroyed timer was due later
  Event started, release;
  auto t = std::make_unique<Timer>();
  std::atomic<bool> finished{false};
  t->init(&tt, [&] {
    started.notify();
    release.wait(3 * kNsPerSec);
    finished = true;
  });
  t->arm_after(0);
  ASSERT_TRUE(started.wait(3 * kNsPerSec));
  {
    ReleaseOnceWaiting releaser(release);  // released once the destructor waits
    t.reset();
    EXPECT_TRUE(finished.load());
  }
  int before = fired;
  ASSERT_TRUE(passed(tt, last_due));
  EXPECT_EQ(fired.load(), before);
}

TEST(Timer, ManyTimersFireInNonDecreasingExpiryOrder) {
  TimerThread tt("tmr-many");
  const unsigned n = test::scaled(300);
  std::vector<std::unique_ptr<Timer>> timers;
  std::mutex mu;
  std::vector<uint64_t> seen;
  Completion all;
  std::mt19937 rng(42);
  uint64_t base = now_ns() + 10 * kNsPerMs;
  for (unsigned i = 0; i < n; i++) timers.push_back(std::make_unique<Timer>());
  for (unsigned i = 0; i < n; i++) {
    Timer* t = timers[i].get();
    t->init(&tt, [&, t] {
      std::lock_guard<std::mutex> g(mu);
      seen.push_back(t->expires());
      if (seen.size() == n) all.complete();
    });
    t->arm_at(base + rng() % (50 * kNsPerMs));
  }
  // Cancel and re-arm a few to exercise removal from the middle of the heap.
  for (unsigned i = 0; i < n; i += 7) {
    timers[i]->cancel();
    timers[i]->arm_at(base + rng() % (50 * kNsPerMs));
  }
  ASSERT_TRUE(all.wait_for(5 * kNsPerSec));
  for (size_t i = 1; i < seen.size(); i++) EXPECT_LE(seen[i - 1], seen[i]);
}

TEST(Timer, GlobalThreadIsNamed) {
  TimerThread& g = TimerThread::global();
  EXPECT_EQ(&g, &TimerThread::global());
  EXPECT_EQ(g.name(), "blkmq-timer");
  Completion c;
  std::string name;
  Timer t;
  t.init(nullptr, [&] {
    char buf[16] = {};
    pthread_getname_np(pthread_self(), buf, sizeof(buf));
    name = buf;
    c.complete();
  });
  t.arm_after(0);
  ASSERT_TRUE(c.wait_for(3 * kNsPerSec));
  EXPECT_EQ(name, "blkmq-timer");
}

}  // namespace
}  // namespace blkmq::base
