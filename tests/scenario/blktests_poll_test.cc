// blktests block/007 ("test classic and hybrid IO polling"): polled I/O
// (kBioPolled on null's poll queue, reaped only by Queue::poll) while
// another thread rotates the scheduler and the hw queue count changes.
// blktests runs fio's pvsync2 --hipri with io_poll_delay -1, 0 and 4;
// blkmq has classic polling only (no hybrid polling, no io_poll_delay),
// so the case is classic polling made harder: the freezes for the
// switches and updates wait for requests only a poller can end.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/stress.h"
#include "support/verified_io.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

constexpr const char* kScheds[] = {"none", "mq-deadline", "kyber", "bfq"};
constexpr unsigned kDepth = 4;

struct PollTotals : IoTotals {
  std::atomic<uint64_t> reaped{0};   // completions Queue::poll reported
  std::atomic<uint64_t> retried{0};  // nowait submissions that ended with again
};

// Polls every io of `ios` that has not ended yet, once.
void poll_pending(Queue& q, std::vector<VerifiedIo>& ios, PollTotals& t) {
  for (VerifiedIo& io : ios)
    if (!io.done.load(std::memory_order_acquire)) t.reaped += q.poll(&io.bio);
}

// Submits every io of `ios` to its own block (`write`: the pattern of
// `round`), then polls each until it has ended. Submission is nowait, as
// io_uring's polled I/O is: a freeze (a switch, an update) waits for the
// polled requests in flight, which only a poller ends, so a poller that
// slept in submit_bio for the freeze would stall it until they timed out
// (what this test first did). A bio refused with again is retried after
// polling the others. Nothing else ends a request on a poll queue, so a
// bio that never ends is a lost one (the watchdog trips).
void submit_and_poll(Queue& q, unsigned id, std::vector<VerifiedIo>& ios, bool write, uint32_t round,
                     PollTotals& t) {
  for (unsigned i = 0; i < ios.size(); i++) {
    const uint64_t blk = id * kDepth + i;
    if (write) verified_fill(ios[i].buf, blk, round);
    for (;;) {
      start_verified_io(ios[i], blk, write ? ReqOp::write : ReqOp::read, kBioPolled | kBioNowait);
      q.submit_bio(&ios[i].bio);
      if (!ios[i].done.load(std::memory_order_acquire) || ios[i].bio.status != BlkStatus::again) break;
      ios[i].ends.store(0);
      t.retried++;
      poll_pending(q, ios, t);
      std::this_thread::yield();
    }
    t.submitted++;
  }
  for (VerifiedIo& io : ios) {
    while (!io.done.load(std::memory_order_acquire)) t.reaped += q.poll(&io.bio);
    t.ended++;
    if (io.ends.load() != 1) t.doubles++;
    if (io.bio.status != BlkStatus::ok) t.errors++;
    io.ends.store(0);
  }
}

// Rounds of kDepth polled writes to this poller's own blocks, then polled
// reads of them, compared with what was written.
void poller(Queue& q, unsigned id, std::atomic<bool>& stop, PollTotals& t) {
  std::vector<VerifiedIo> ios(kDepth);
  for (uint32_t round = 1; !stop.load(std::memory_order_relaxed); round++) {
    submit_and_poll(q, id, ios, true, round, t);
    submit_and_poll(q, id, ios, false, round, t);
    uint8_t want[kVerifyBlock];
    for (unsigned i = 0; i < kDepth; i++) {
      verified_fill(want, id * kDepth + i, round);
      if (std::memcmp(want, ios[i].buf, kVerifyBlock) != 0) t.mismatches++;
    }
  }
}

// Two pollers share the one poll queue; the main thread switches the
// scheduler and sets 1, 2 or 4 default queues (the poll queue kept) in
// turn, every 5 ms.
TEST(BlktestsPoll, PolledIoWhileSchedulersSwitchAndHwQueuesChange) {
  Watchdog wd("polled I/O under switches and updates", std::chrono::seconds(120));
  auto dev = make_null_device({{"memory_backed", "1"}, {"size", "16"}, {"submit_queues", "2"},
                               {"poll_queues", "1"}, {"hw_queue_depth", "16"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_EQ(*q.attr("queue/io_poll"), "1");
  std::atomic<bool> stop{false};
  PollTotals t;
  std::vector<std::thread> th;
  for (unsigned i = 0; i < 2; i++) th.emplace_back([&, i] { poller(q, i, stop, t); });
  constexpr unsigned kCounts[] = {1, 2, 4, 2};
  unsigned step = 0;
  const TimeLimit limit(std::chrono::milliseconds(static_cast<int>(1200 * stress_scale())));
  while (!limit.passed()) {
    EXPECT_TRUE(q.set_attr("queue/scheduler", kScheds[step % 4])) << kScheds[step % 4];
    Status s = q.tag_set().update_nr_hw_queues(kCounts[step % 4], 1);
    EXPECT_TRUE(s) << s.message();
    step++;
    // The pollers get the queue between changes: a pace over a run of fixed length.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  for (auto& x : th) x.join();
  std::printf("[          ] %u switches and updates, %llu polled bios, %llu nowait retries\n", step,
              (unsigned long long)t.submitted.load(), (unsigned long long)t.retried.load());
  EXPECT_GT(step, 8u);
  EXPECT_GT(t.submitted.load(), 100u);
  // Each request is reaped by exactly one poll; a bio merged into another's
  // request ends with it.
  const DiskStat d = q.disk_stat();
  EXPECT_EQ(t.reaped.load(), t.ended.load() - d.read_merges - d.write_merges);
  t.expect_clean();
  EXPECT_EQ(*q.attr("queue/io_poll"), "1");
  expect_queue_idle(q, "after polling");
}

}  // namespace
}  // namespace blkmq::test
