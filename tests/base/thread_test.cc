#include "base/thread.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <string>

#include "base/clock.h"
#include "base/event.h"
#include "base/thread.h"

namespace blkmq::base {
namespace {

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * kNsPerSec + static_cast<uint64_t>(ts.tv_nsec);
}

TEST(Thread, NamedAndPinned) {
  std::string name;
  int cpu = -2;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::thread t = start_thread({"nametest/7", 0, true}, [&] {
    char buf[16] = {};
    pthread_getname_np(pthread_self(), buf, sizeof(buf));
    name = buf;
    sched_getaffinity(0, sizeof(mask), &mask);
    cpu = sched_getcpu();
  });
  t.join();
  EXPECT_EQ(name, "nametest/7");
  // Pinning can be refused in a restricted cpuset; when it took, the thread
  // ran only on CPU 0.
  if (CPU_COUNT(&mask) == 1) {
    EXPECT_TRUE(CPU_ISSET(0, &mask));
    EXPECT_EQ(cpu, 0);
  }
}

TEST(Thread, LongNamesAreTruncated) {
  std::string name;
  start_thread({"a-very-long-thread-name/1"}, [&] {
    char buf[16] = {};
    pthread_getname_np(pthread_self(), buf, sizeof(buf));
    name = buf;
  }).join();
  EXPECT_EQ(name, "a-very-long-thr");
}

// A busy thread's CPU time shows in its group while it lives and after it
// exits; idle threads add little.
TEST(Thread, UsageReportsBusyThreadCpuTime) {
  constexpr uint64_t kBusy = 50 * kNsPerMs;
  Event spun;
  Completion release;
  std::thread busy = start_thread({"usagetest/0"}, [&] {
    uint64_t wall_end = now_ns() + 3 * kNsPerSec;  // bounded even when starved
    volatile uint64_t x = 0;
    while (thread_cpu_ns() < kBusy && now_ns() < wall_end) x = x + 1;
    spun.notify();
    release.wait_for(5 * kNsPerSec);
  });
  std::thread idle = start_thread({"usagetest/1"}, [&] { release.wait_for(5 * kNsPerSec); });
  ASSERT_TRUE(spun.wait(5 * kNsPerSec));

  auto live = base::thread_usage();
  ASSERT_TRUE(live.count("usagetest"));
  EXPECT_EQ(live["usagetest"].nr_threads, 2u);
  EXPECT_GE(live["usagetest"].cpu_ns, kBusy);
  EXPECT_LT(live["usagetest"].cpu_ns, 10 * kNsPerSec);
  EXPECT_GE(live["usagetest"].nvcsw + live["usagetest"].nivcsw, 1u);
  EXPECT_FALSE(live.count("usagetest/0"));

  release.complete();
  busy.join();
  idle.join();
  auto after = base::thread_usage();
  EXPECT_EQ(after["usagetest"].nr_threads, 2u);
  EXPECT_GE(after["usagetest"].cpu_ns, live["usagetest"].cpu_ns);
  EXPECT_EQ(after["usagetest"].nvcsw, 0u);  // only living threads are read
}

}  // namespace
}  // namespace blkmq::base
