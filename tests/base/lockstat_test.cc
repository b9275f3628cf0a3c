// StatSpinLock's (and StatMutex's) contention counters (seed 003's lock statistics): exact
// counts without contention, every wait counted with two threads, try_lock
// failures apart, the attribute format round trip, and reset.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/lockstat.h"

namespace blkmq::base {
namespace {

TEST(StatSpinLock, CountsUncontendedAcquisitionsExactly) {
  StatSpinLock l;
  for (int i = 0; i < 10; i++) {
    l.lock();
    l.unlock();
  }
  ASSERT_TRUE(l.try_lock());
  l.unlock();
  const LockStat s = l.stat();
  EXPECT_EQ(s.acquired, 11u);
  EXPECT_EQ(s.waited, 0u);
  EXPECT_EQ(s.wait_ns, 0u);
  EXPECT_EQ(s.try_busy, 0u);
  EXPECT_EQ(s.contended_pct(), 0.0);
}

// The calling thread holds `l` for 20 ms while a second thread takes it;
// with `probe`, the holder also tries it once (try_busy). The counters
// after both let go.
template <class L>
LockStat wait_behind_a_holder(L& l, bool probe) {
  l.lock();
  std::atomic<bool> started{false};
  std::thread t([&] {
    started = true;
    l.lock();  // held by the main thread: must wait
    l.unlock();
  });
  while (!started) std::this_thread::yield();
  if (probe) {
    EXPECT_FALSE(l.try_lock());
  }
  // The hold is what the waiter's wait_ns measures: real time by design.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  l.unlock();
  t.join();
  const LockStat s = l.stat();
  EXPECT_EQ(s.acquired, 2u);
  EXPECT_EQ(s.waited, 1u);
  EXPECT_GE(s.wait_ns, 5'000'000u);  // slept 20 ms while it waited; leave room for a slow start
  return s;
}

TEST(StatSpinLock, AWaiterIsCountedWithItsWaitTime) {
  StatSpinLock l;
  const LockStat s = wait_behind_a_holder(l, /*probe=*/true);
  EXPECT_EQ(s.try_busy, 1u);
  EXPECT_DOUBLE_EQ(s.contended_pct(), 50.0);
}

// The tags' wait queues use the mutex form; a holder that sleeps makes the
// second taker wait, and it is counted the same way. (No try_lock from the
// holding thread: that is undefined for a std::mutex.)
TEST(StatMutex, AWaiterIsCountedWithItsWaitTime) {
  StatMutex l;
  EXPECT_EQ(wait_behind_a_holder(l, /*probe=*/false).try_busy, 0u);
}

TEST(StatSpinLock, TwoThreadsHammeringLoseNoCount) {
  StatSpinLock l;
  uint64_t counter = 0;
  constexpr int kIters = 200000;
  auto body = [&] {
    for (int i = 0; i < kIters; i++) {
      l.lock();
      counter++;
      l.unlock();
    }
  };
  std::thread a(body), b(body);
  a.join();
  b.join();
  EXPECT_EQ(counter, 2u * kIters);
  const LockStat s = l.stat();
  EXPECT_EQ(s.acquired, 2u * kIters);
  EXPECT_LE(s.waited, s.acquired);
}

TEST(StatSpinLock, FormatParsesBackAndResetZeroes) {
  StatSpinLock l;
  l.lock();
  l.unlock();
  EXPECT_FALSE(l.is_locked());
  LockStat back;
  ASSERT_TRUE(LockStat::parse(l.stat().format(), &back));
  EXPECT_EQ(back.acquired, 1u);
  EXPECT_EQ(l.stat().format(), "acquired=1 waited=0 wait_ns=0 try_busy=0 hold_samples=0 hold_ns=0");
  EXPECT_FALSE(LockStat::parse("acquired=1 waited=0", &back));
  EXPECT_FALSE(LockStat::parse("acquired=1 waited=0 wait_ns=0 try_busy=0 hold_samples=0 hold_ns=0 junk", &back));
  EXPECT_FALSE(LockStat::parse("acquired=1 waited=0 wait_ns=0 try_busy=0", &back));  // the old format
  l.reset();
  EXPECT_EQ(l.stat().acquired, 0u);
}

// One acquisition in kHoldSampleEvery is timed from lock to unlock: a
// sampled hold that sleeps shows in hold_ns, and only sampled ones count.
TEST(StatSpinLock, SampledHoldTimeCoversTheTimeHeld) {
  StatSpinLock l;
  for (uint64_t i = 1; i < kHoldSampleEvery; i++) {
    l.lock();
    l.unlock();
  }
  EXPECT_EQ(l.stat().hold_samples, 0u);
  l.lock();  // acquisition kHoldSampleEvery: sampled
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the hold measured: real time by design
  l.unlock();
  LockStat s = l.stat();
  EXPECT_EQ(s.hold_samples, 1u);
  EXPECT_GE(s.hold_ns, 4'000'000u);
  EXPECT_GE(s.mean_hold_ns(), 4e6);
  for (uint64_t i = 0; i < kHoldSampleEvery; i++) {
    ASSERT_TRUE(l.try_lock());  // try_lock acquisitions are sampled too
    l.unlock();
  }
  EXPECT_EQ(l.stat().hold_samples, 2u);
  LockStat sum = s;
  sum.add(l.stat());
  EXPECT_EQ(sum.acquired, s.acquired + l.stat().acquired);
  EXPECT_EQ(sum.hold_samples, 3u);
}

}  // namespace
}  // namespace blkmq::base
