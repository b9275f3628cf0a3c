// Event, Completion, SpinLock, LList, clock and per-CPU ids.
#include <gtest/gtest.h>
#include <sys/syscall.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/event.h"
#include "base/llist.h"
#include "base/percpu.h"
#include "base/spinlock.h"
#include "support/stress.h"
#include "support/wait.h"

namespace blkmq::base {
namespace {

using namespace std::chrono_literals;

TEST(Event, NotifyBeforeWaitIsNotLost) {
  Event e;
  EXPECT_FALSE(e.pending());
  e.notify();
  e.notify();  // coalesces
  EXPECT_TRUE(e.pending());
  EXPECT_TRUE(e.wait(kNsPerSec));
  EXPECT_FALSE(e.pending());
  uint64_t t0 = now_ns();
  EXPECT_FALSE(e.wait(20 * kNsPerMs));
  EXPECT_GE(now_ns() - t0, 20 * kNsPerMs);
}

TEST(Event, WakesASleepingWaiter) {
  Event e;
  std::atomic<bool> woke{false};
  std::atomic<pid_t> tid{0};
  std::thread t([&] {
    tid = test::this_tid();
    woke = e.wait(3 * kNsPerSec);
  });
  // Notified while asleep in the futex, not before it got there.
  EXPECT_TRUE(test::eventually([&] { return tid.load() && test::asleep_in(tid.load(), SYS_futex); }));
  e.notify();
  t.join();
  EXPECT_TRUE(woke.load());
}

// Ping-pong: every notification must be seen; a lost one shows up as a
// timeout.
TEST(Event, PingPongLosesNothing) {
  Event ping, pong;
  const unsigned rounds = test::scaled(20000);
  std::atomic<unsigned> timeouts{0};
  std::thread t([&] {
    for (unsigned i = 0; i < rounds; i++) {
      if (!ping.wait(3 * kNsPerSec)) timeouts++;
      pong.notify();
    }
  });
  test::TimeLimit limit(5s);
  unsigned i = 0;
  for (; i < rounds; i++) {
    ping.notify();
    if (!pong.wait(3 * kNsPerSec)) timeouts++;
    if (limit.passed()) break;
  }
  for (; i < rounds; i++) ping.notify(), pong.wait(10 * kNsPerMs);  // let t finish
  t.join();
  EXPECT_EQ(timeouts.load(), 0u);
}

TEST(Event, ManyNotifiersOneWaiter) {
  Event e;
  std::atomic<unsigned> produced{0};
  const unsigned per = test::scaled(5000);
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; i++) {
    ts.emplace_back([&] {
      for (unsigned j = 0; j < per; j++) {
        produced++;
        e.notify();
      }
    });
  }
  // The waiter sees every increment eventually: after the last notify a
  // wait() returns, and then the count is final.
  unsigned seen = 0;
  test::TimeLimit limit(5s);
  while (seen < 3 * per && !limit.passed()) {
    e.wait(100 * kNsPerMs);
    seen = produced.load();
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(produced.load(), 3 * per);
}

TEST(Completion, ReleasesAllWaiters) {
  Completion c;
  EXPECT_FALSE(c.done());
  EXPECT_FALSE(c.wait_for(10 * kNsPerMs));
  EXPECT_FALSE(c.wait_for(0));
  std::atomic<int> released{0};
  std::vector<std::atomic<pid_t>> tids(4);
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; i++)
    ts.emplace_back([&, i] {
      tids[i] = test::this_tid();
      c.wait(), released++;
    });
  // Every waiter asleep in the futex: none was let through early.
  EXPECT_TRUE(test::eventually([&] {
    return std::all_of(tids.begin(), tids.end(), [](auto& t) { return t.load() && test::asleep_in(t.load(), SYS_futex); });
  }));
  EXPECT_EQ(released.load(), 0);
  c.complete();
  for (auto& t : ts) t.join();
  EXPECT_EQ(released.load(), 4);
  EXPECT_TRUE(c.done());
  EXPECT_TRUE(c.wait_for(0));
  c.reinit();
  EXPECT_FALSE(c.done());
}

TEST(Completion, MayBeFreedRightAfterWait) {
  for (unsigned i = 0; i < test::scaled(500); i++) {
    auto c = std::make_unique<Completion>();
    std::thread t([p = c.get()] { p->complete(); });
    c->wait();
    c.reset();
    t.join();
  }
}

TEST(SpinLock, MutualExclusion) {
  SpinLock l;
  uint64_t counter = 0;  // plain: TSan flags it if the lock does not order
  const unsigned per = test::scaled(100000);
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; i++) {
    ts.emplace_back([&] {
      for (unsigned j = 0; j < per; j++) {
        l.lock();
        counter++;
        l.unlock();
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(counter, 4ull * per);
  EXPECT_TRUE(l.try_lock());
  EXPECT_TRUE(l.is_locked());
  EXPECT_FALSE(l.try_lock());
  l.unlock();
}

struct Node {
  Node* next = nullptr;
  unsigned producer = 0;
  unsigned seq = 0;
};
using NodeList = LList<Node, &Node::next>;

TEST(LList, OrderedTakeKeepsPushOrder) {
  NodeList l;
  Node n[3];
  EXPECT_TRUE(l.empty());
  EXPECT_TRUE(l.push(&n[0]));
  EXPECT_FALSE(l.push(&n[1]));
  EXPECT_FALSE(l.push(&n[2]));
  Node* p = l.take_all_ordered();
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(p, &n[0]);
  EXPECT_EQ(p->next, &n[1]);
  EXPECT_EQ(p->next->next, &n[2]);
  EXPECT_EQ(p->next->next->next, nullptr);
  l.push(&n[0]);
  l.push(&n[1]);
  Node* q = l.take_all();
  EXPECT_EQ(q, &n[1]);
  EXPECT_EQ(q->next, &n[0]);
  EXPECT_EQ(l.take_all(), nullptr);
}

// Producers push numbered nodes while a consumer drains: each producer's
// nodes must arrive exactly once and in its push order.
TEST(LList, ConcurrentPushesKeepPerProducerOrder) {
  constexpr unsigned kProducers = 4;
  const unsigned per = test::scaled(50000);
  std::vector<std::vector<Node>> nodes(kProducers, std::vector<Node>(per));
  NodeList l;
  std::atomic<unsigned> done{0};
  std::vector<std::thread> ts;
  for (unsigned p = 0; p < kProducers; p++) {
    ts.emplace_back([&, p] {
      for (unsigned i = 0; i < per; i++) {
        nodes[p][i].producer = p;
        nodes[p][i].seq = i;
        l.push(&nodes[p][i]);
      }
      done++;
    });
  }
  std::vector<unsigned> next(kProducers, 0);
  unsigned bad = 0, total = 0;
  test::TimeLimit limit(10s);
  for (;;) {
    bool finished = done.load() == kProducers;
    for (Node* n = l.take_all_ordered(); n; n = n->next) {
      if (n->seq != next[n->producer]) bad++;
      next[n->producer] = n->seq + 1;
      total++;
    }
    if (finished || limit.passed()) break;
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(total, kProducers * per);
}

TEST(Clock, MonotonicNanoseconds) {
  uint64_t a = now_ns();
  std::this_thread::sleep_for(5ms);  // real time is what the clock is checked against
  uint64_t b = now_ns();
  EXPECT_GE(b - a, 5 * kNsPerMs);
  EXPECT_LT(b - a, 5 * kNsPerSec);
  auto steady = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count();
  EXPECT_LT(std::llabs(static_cast<long long>(now_ns()) - steady), 1000000000LL);
}

TEST(PerCpu, IdsAreInRange) {
  EXPECT_GE(possible_cpus(), 1u);
  for (int i = 0; i < 100; i++) EXPECT_LT(this_cpu(), possible_cpus());
  PerCpu<uint64_t> pc;
  EXPECT_EQ(pc.size(), possible_cpus());
  pc.local()++;
  uint64_t sum = 0;
  for (unsigned c = 0; c < pc.size(); c++) sum += pc[c];
  EXPECT_EQ(sum, 1u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(&pc[0]) % 64, 0u);
}

}  // namespace
}  // namespace blkmq::base
