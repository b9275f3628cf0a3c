// A driver of a kTagSetBlocking tag set may sleep in queue_rq, so the core
// must only call it from task context: a submitter, or a kblockd worker. The
// stub driver here really sleeps in queue_rq and records where it ran,
// while completions come from a hardirq-context thread, requests are
// requeued and refused busy (each of which reruns the queue from some
// other context), and submitters plug.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/stress.h"
#include "support/stub_driver.h"

namespace blkmq::test {
namespace {

bool allowed_thread(const std::string& name) {
  return name.rfind("submit-", 0) == 0 || name.rfind("kblockd/", 0) == 0;
}

TEST(BlockingDriver, QueueRqSleepsOnlyInTaskContextUnderEveryScheduler) {
  for (const char* sched : {"none", "mq-deadline", "kyber", "bfq"}) {
    StubDriver::Options o;
    o.flags = kTagSetBlocking;
    o.mode = CompleteMode::irq_thread;
    o.queue_rq_sleep_us = 50;
    o.nr_queues = 2;
    o.depth = 8;
    o.scheduler = sched;
    StubDriver d(o);
    d.requeue_next = 20;
    d.busy_next = 10;
    BioTracker t;
    const int per_thread = static_cast<int>(scaled(150));
    std::vector<std::vector<std::unique_ptr<BioTracker::Slot>>> slots(4);
    std::vector<std::thread> th;
    for (int i = 0; i < 4; i++) {
      th.emplace_back([&, i] {
        pthread_setname_np(pthread_self(), ("submit-" + std::to_string(i)).c_str());
        // Batches of 8, every other one plugged (flushed when the plug ends).
        for (int n = 0; n < per_thread; n += 8) {
          std::unique_ptr<Plug> plug;
          if ((n / 8) % 2) plug = std::make_unique<Plug>();
          for (int k = n; k < n + 8 && k < per_thread; k++) {
            const uint64_t off = (uint64_t(i) * per_thread + k) * 4096;
            Bio* b = &slots[i].emplace_back(t.make(k % 2 ? ReqOp::write : ReqOp::read, off, 4096))->bio;
            d.q().submit_bio(b);
          }
        }
      });
    }
    for (auto& x : th) x.join();
    int total = 0;
    for (auto& v : slots) total += static_cast<int>(v.size());
    ASSERT_TRUE(t.wait_for(total, 30000)) << sched << ": " << t.ended.load() << " of " << total;
    EXPECT_EQ(t.errors.load(), 0) << sched;
    EXPECT_EQ(t.doubles.load(), 0) << sched;
    EXPECT_EQ(d.queue_rq_in_interrupt.load(), 0) << sched << ": queue_rq called in interrupt context";
    for (const std::string& name : d.queue_rq_threads())
      EXPECT_TRUE(allowed_thread(name)) << sched << ": queue_rq ran on '" << name << "'";
    EXPECT_TRUE(wait_requests_freed(d.q())) << sched;
  }
}

}  // namespace
}  // namespace blkmq::test
