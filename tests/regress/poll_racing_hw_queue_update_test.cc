// Regression: Queue::poll read the hctx of a polled bio's cookie and called
// the driver's poll on it with nothing keeping update_nr_hw_queues from
// exiting and replacing that hctx meanwhile. A poller whose request another
// poller had just reaped (so the freeze no longer waited for it) then ran
// null's poll on an exited hctx: a segfault in null_poll in about one run
// of six of BlktestsPoll.PolledIoWhileSchedulersSwitchAndHwQueuesChange.
// The kernel's bio_poll holds a q_usage_counter reference across
// blk_mq_poll; here the poll sits in the dispatch epoch, which the
// update's quiesce waits for, and finds nothing while the queue is
// quiesced.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "blkmq/blkmq.h"
#include "core/core.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

using namespace std::chrono_literals;

// A driver whose poll, once armed, says it is inside and stays there until
// the update waits for it or exits an hctx anyway, then records whether its
// hctx was exited while it was.
struct PollProbe {
  std::atomic<bool> armed{false}, inside{false}, exited_while_inside{false};
  std::atomic<int> exits{0};
  std::atomic<pid_t> updater{0};
};
PollProbe g_probe;

BlkStatus probe_queue_rq(HwCtx*, const QueueData& bd) {
  start_request(bd.rq);
  end_request(bd.rq, BlkStatus::ok);
  return BlkStatus::ok;
}

int probe_poll(HwCtx* hctx, IoCompBatch*) {
  if (!g_probe.armed.exchange(false)) return 0;
  const int exits_before = g_probe.exits.load();
  g_probe.inside = true;
  // The update has quiesced the queue and sleeps waiting for this poll to
  // leave (the fix), or has exited an hctx (the bug). Bounded: a poll that
  // waited on the update itself would deadlock.
  const QueueImpl* q = to_impl(hctx->queue);
  eventually(
      [&] { return g_probe.exits.load() != exits_before || (q->quiesced() && asleep_in_core_wait(g_probe.updater)); },
      5000);
  if (g_probe.exits.load() != exits_before) g_probe.exited_while_inside = true;
  g_probe.inside = false;
  return 0;
}

void probe_exit_hctx(HwCtx*, unsigned) { g_probe.exits++; }

TEST(PollRacingHwQueueUpdate, UpdateWaitsForAPollInsideTheDriver) {
  Watchdog wd("poll racing update_nr_hw_queues", std::chrono::seconds(30));
  DriverOps ops;
  ops.queue_rq = probe_queue_rq;
  ops.poll = probe_poll;
  ops.exit_hctx = probe_exit_hctx;
  TagSetConfig c;
  c.ops = &ops;
  c.nr_queues[0] = 1;
  c.nr_queues[2] = 1;
  c.queue_depth = 8;
  auto set = TagSet::create(c);
  ASSERT_TRUE(set) << set.status().message();
  QueueConfig qc;
  qc.limits.capacity_sectors = 2048;
  qc.scheduler = "none";
  auto q = Queue::create(**set, qc);
  ASSERT_TRUE(q) << q.status().message();
  Bio polled;
  polled.cookie = 1;  // the poll hctx: what a polled bio's submission leaves
  g_probe.armed = true;
  g_probe.updater = this_tid();
  std::thread poller([&] { (*q)->poll(&polled); });
  while (!g_probe.inside.load()) std::this_thread::yield();
  // No request is in flight, so the freeze is immediate: only the poll's
  // epoch can hold the update back.
  Status s = (*set)->update_nr_hw_queues(2, 1);
  EXPECT_TRUE(s) << s.message();
  poller.join();
  EXPECT_GT(g_probe.exits.load(), 0) << "the update replaced the hctxs";
  EXPECT_FALSE(g_probe.exited_while_inside.load()) << "an hctx was exited while its poll ran";
  q->reset();
}

}  // namespace
}  // namespace blkmq::test
