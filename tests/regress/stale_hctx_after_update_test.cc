// Regression: a submitter that inserted its request into the scheduler and
// then ran the hw queue read the hctx after the request could have ended.
// Once the request is freed, nothing kept update_nr_hw_queues from
// replacing the hctxs in between, and the run then called the scheduler's
// has_work on an hctx without scheduler data (UBSan in ASan's CI run of
// NrHwQueues.InitHctxFaultDuringUpdateRollsBack: kyber's has_work on a
// null HctxData). The insert and the run now sit in the dispatch epoch,
// which the update's quiesce waits for.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "blkmq/blkmq.h"
#include "blkmq/elevator/elevator.h"
#include "support/fifo_sched.h"
#include "support/verified_io.h"
#include "core/core.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

using namespace std::chrono_literals;

// The gate: the test FIFO scheduler (support/fifo_sched.h) whose insert,
// once armed, holds the inserting thread after the request is queued,
// until released or 2 s have passed. Its state is global: the update exits
// the scheduler while a thread may be held in its insert.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false, holding = false, released = false;
};
Gate g_gate;

void hold_if_armed() {
  std::unique_lock lk(g_gate.mu);
  if (!g_gate.armed) return;
  g_gate.armed = false;
  g_gate.holding = true;
  g_gate.cv.notify_all();
  g_gate.cv.wait_for(lk, 2s, [] { return g_gate.released; });
  g_gate.holding = false;
}

const ElevatorType kGateType = fifo_elevator<hold_if_armed>("test-gate");

TEST(StaleHctxAfterUpdate, UpdateWaitsForASubmitterBetweenItsInsertAndItsRun) {
  Watchdog wd("stale hctx regression", std::chrono::seconds(60));
  static std::once_flag once;
  std::call_once(once, [] { ASSERT_TRUE(register_elevator(&kGateType)); });
  auto dev = make_null_device({{"irqmode", "0"}, {"submit_queues", "2"}, {"size", "64"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_TRUE(q.set_attr("queue/scheduler", "test-gate"));
  {
    std::lock_guard lk(g_gate.mu);
    g_gate.armed = true;
    g_gate.holding = g_gate.released = false;
  }
  uint8_t buf[4096] = {};
  BlkStatus wst = BlkStatus::ioerr;
  std::thread submitter([&] { wst = q.write_sync(buf, 0, sizeof buf); });
  {
    std::unique_lock lk(g_gate.mu);
    ASSERT_TRUE(g_gate.cv.wait_for(lk, 10s, [] { return g_gate.holding; }));
  }
  // Dispatch and complete the held submitter's request from here: its
  // usage reference is gone, the submitter still has its run to do.
  const uint64_t t0 = q.disk_stat().write_ios;
  eventually([&] {
    run_hw_queues(&q, false);
    return q.disk_stat().write_ios != t0;
  });
  ASSERT_EQ(q.disk_stat().write_ios, t0 + 1);
  std::atomic<bool> updated{false};
  std::atomic<pid_t> tid{0};
  Status ust = Status::OK();
  std::thread updater([&] {
    tid = this_tid();
    ust = q.tag_set().update_nr_hw_queues(1, 0);
    updated = true;
  });
  // The update quiesces the queue and then waits for the held submitter's
  // dispatch section (a wait that sleeps in short naps): seen asleep with
  // the queue quiesced, it is blocked there. A buggy update would not
  // stop there and end instead.
  auto* qi = to_impl(&q);
  auto blocked = [&] {
    const pid_t t = tid.load();
    return t && qi->quiesced() && asleep_in_core_wait(t);
  };
  eventually([&] { return updated.load() || blocked(); });
  EXPECT_FALSE(updated.load()) << "the hctxs were replaced under a submitter between its insert and its run";
  {
    std::lock_guard lk(g_gate.mu);
    g_gate.released = true;
  }
  g_gate.cv.notify_all();
  submitter.join();
  updater.join();
  EXPECT_EQ(wst, BlkStatus::ok);
  EXPECT_TRUE(ust) << ust.message();
  EXPECT_EQ(q.nr_hw_queues(), 1u);
  EXPECT_EQ(q.write_sync(buf, 4096, sizeof buf), BlkStatus::ok);
  expect_queue_idle(q, "after the update");
}

}  // namespace
}  // namespace blkmq::test
