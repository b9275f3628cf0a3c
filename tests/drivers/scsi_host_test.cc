// The scsi driver through the public API and ScsiHost: per-LUN budgets,
// host tags shared between LUNs, memory backing, irq-thread completion,
// seed 001's direct issue from the plug, and teardown with I/O in flight.
#include <gtest/gtest.h>

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/thread.h"
#include "blkmq/blkmq.h"
#include "blkmq/driver/context.h"
#include "drivers/scsi/scsi_device.h"
#include "drivers/scsi/scsi_host.h"
#include "support/device_test_util.h"
#include "support/wait.h"

namespace blkmq::scsi {
namespace {

using namespace std::chrono_literals;
using devtest::IoSlot;
using devtest::pattern;
using devtest::Waiter;

std::unique_ptr<Device> make(const ParamMap& params) { return devtest::make_device("scsi", params); }

ScsiHost& host_of(Device& d) { return static_cast<ScsiDevice&>(d).host(); }

// `threads` submitters each run `rounds` bursts of `depth` 4 KiB reads on
// q and wait for every burst. Offsets never touch, so nothing merges and
// every bio is one command. Returns the number of failed bios.
int run_load(Queue& q, int threads, int rounds, int depth) {
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      std::vector<IoSlot> slots(depth);
      for (int r = 0; r < rounds; r++) {
        Waiter w;
        for (int i = 0; i < depth; i++) {
          uint64_t off = (uint64_t(t) * rounds * depth + uint64_t(r) * depth + i) * 8192;
          slots[i].prep(ReqOp::read, off, 4096, &w);
          q.submit_bio(&slots[i].bio);
        }
        EXPECT_TRUE(w.wait(depth));
        errors += w.errors();
      }
    });
  }
  for (auto& th : ts) th.join();
  return errors.load();
}

// Everything the LUN was given came back: budgets, in-flight counts.
void expect_idle(const ScsiLun& lun) {
  EXPECT_EQ(lun.device_busy(), 0u);
  EXPECT_EQ(lun.inflight(), 0u);
  EXPECT_EQ(lun.dispatched(), lun.completed());
}

// ---- creation ----

TEST(ScsiHost, DefaultDeviceIsOneLun) {
  auto dev = make({});
  ASSERT_TRUE(dev);
  ScsiHost& host = host_of(*dev);
  EXPECT_EQ(dev->driver_name(), "scsi");
  EXPECT_EQ(host.nr_luns(), 1u);
  EXPECT_EQ(host.lun(0).queue_depth(), 32u);
  EXPECT_EQ(host.config().can_queue, 64u);
  EXPECT_EQ(dev->size_bytes(), 250ull << 30);
  EXPECT_EQ(dev->queue().name().rfind("sd", 0), 0u) << dev->queue().name();
  EXPECT_EQ(dev->queue().nr_hw_queues(), 1u);
  EXPECT_EQ(dev->queue().limits().logical_block_size, 512u);
}

TEST(ScsiHost, LunsHaveTheirOwnQueuesOnOneTagSet) {
  auto dev = make({{"luns", "3"}, {"size", "1G"}, {"bs", "4096"}});
  ASSERT_TRUE(dev);
  ScsiHost& host = host_of(*dev);
  ASSERT_EQ(host.nr_luns(), 3u);
  EXPECT_EQ(&host.lun(0).queue(), &dev->queue());
  for (unsigned i = 0; i < 3; i++) {
    EXPECT_EQ(&host.lun(i).queue().tag_set(), &host.tag_set());
    EXPECT_EQ(host.lun(i).queue().limits().logical_block_size, 4096u);
    EXPECT_EQ(host.lun(i).queue().limits().capacity_sectors, (1ull << 30) >> kSectorShift);
    for (unsigned j = 0; j < i; j++) EXPECT_NE(host.lun(i).queue().name(), host.lun(j).queue().name());
  }
}

TEST(ScsiHost, AddLunWhileAnotherLunIsBusy) {
  ScsiHostConfig hc;
  hc.latency_us = 100;
  auto host = ScsiHost::create(hc);
  ASSERT_TRUE(host.ok());
  auto a = (*host)->add_lun({});
  ASSERT_TRUE(a.ok());
  std::thread load([&] { EXPECT_EQ(run_load((*a)->queue(), 2, 20, 8), 0); });
  ScsiLunConfig lc;
  lc.queue_depth = 4;
  auto b = (*host)->add_lun(lc);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(run_load((*b)->queue(), 1, 10, 8), 0);
  load.join();
  expect_idle(**a);
  expect_idle(**b);
}

// ---- per-LUN queue depth (device budget) ----

struct DepthCase {
  const char* latency_us;
  const char* no_sched;
};

class ScsiDepth : public ::testing::TestWithParam<DepthCase> {};

TEST_P(ScsiDepth, QueueDepthIsNeverExceeded) {
  constexpr unsigned kDepth = 3;
  auto dev = make({{"queue_depth", std::to_string(kDepth)}, {"can_queue", "64"},
                   {"latency_us", GetParam().latency_us}, {"no_sched", GetParam().no_sched},
                   {"attr:queue/nomerges", "2"}});
  ASSERT_TRUE(dev);
  ScsiLun& lun = host_of(*dev).lun(0);
  constexpr int kThreads = 4, kRounds = 30, kBurst = 12;
  EXPECT_EQ(run_load(dev->queue(), kThreads, kRounds, kBurst), 0);
  EXPECT_LE(lun.max_inflight(), kDepth);
  EXPECT_LE(lun.max_device_busy(), kDepth);
  EXPECT_GE(lun.max_inflight(), 1u);
  EXPECT_EQ(lun.completed(), uint64_t(kThreads) * kRounds * kBurst);
  if (std::string(GetParam().latency_us) != "0") {
    // Commands stay in flight long enough for the limit to bind.
    EXPECT_EQ(lun.max_inflight(), kDepth);
    EXPECT_GT(lun.budget_denied(), 0u);
  }
  expect_idle(lun);
}

INSTANTIATE_TEST_SUITE_P(Modes, ScsiDepth,
                         ::testing::Values(DepthCase{"0", "0"}, DepthCase{"0", "1"},
                                           DepthCase{"50", "0"}, DepthCase{"50", "1"}),
                         [](const auto& info) {
                           return std::string("latency") + info.param.latency_us + "_nosched" +
                                  info.param.no_sched;
                         });

TEST(ScsiHost, RaisingTheDepthReleasesWaitingCommands) {
  auto dev = make({{"queue_depth", "1"}, {"latency_us", "200"}, {"attr:queue/nomerges", "2"}});
  ASSERT_TRUE(dev);
  ScsiLun& lun = host_of(*dev).lun(0);
  std::thread load([&] { EXPECT_EQ(run_load(dev->queue(), 2, 10, 16), 0); });
  // Commands wait for the one slot before the depth is raised.
  EXPECT_TRUE(test::eventually([&] { return lun.budget_denied() > 0; }));
  ASSERT_TRUE(lun.set_queue_depth(8).ok());
  EXPECT_FALSE(lun.set_queue_depth(0).ok());
  load.join();
  EXPECT_LE(lun.max_inflight(), 8u);
  EXPECT_EQ(lun.queue_depth(), 8u);
  expect_idle(lun);
}

// ---- host tags shared by LUNs ----

struct ShareCase {
  const char* nr_hw_queues;
  const char* host_tagset;
};

class ScsiShare : public ::testing::TestWithParam<ShareCase> {};

TEST_P(ScsiShare, CanQueueIsSharedFairlyBetweenLuns) {
  constexpr unsigned kCanQueue = 16;
  auto dev = make({{"can_queue", std::to_string(kCanQueue)}, {"queue_depth", "64"}, {"luns", "2"},
                   {"latency_us", "200"}, {"nr_hw_queues", GetParam().nr_hw_queues},
                   {"host_tagset", GetParam().host_tagset}, {"attr:queue/nomerges", "2"}});
  ASSERT_TRUE(dev);
  ScsiHost& host = host_of(*dev);
  ScsiLun& a = host.lun(0);
  ScsiLun& b = host.lun(1);
  ASSERT_TRUE(b.queue().set_attr("queue/nomerges", "2").ok());
  // Both LUNs become active users of the tags, then the maxima restart.
  std::vector<unsigned char> buf(4096);
  ASSERT_EQ(a.queue().read_sync(buf.data(), 0, 4096), BlkStatus::ok);
  ASSERT_EQ(b.queue().read_sync(buf.data(), 0, 4096), BlkStatus::ok);
  host.reset_max();
  a.reset_max();
  b.reset_max();
  constexpr int kThreads = 2, kRounds = 15, kBurst = 16;
  std::thread ta([&] { EXPECT_EQ(run_load(a.queue(), kThreads, kRounds, kBurst), 0); });
  std::thread tb([&] { EXPECT_EQ(run_load(b.queue(), kThreads, kRounds, kBurst), 0); });
  ta.join();
  tb.join();
  // With host_tagset, or one hw queue, all commands share can_queue tags.
  EXPECT_LE(host.max_host_busy(), kCanQueue);
  // Fair sharing: each busy LUN may hold about half of the tags (a
  // racing allocator per submitter may pass the check together).
  EXPECT_LE(a.max_inflight(), kCanQueue / 2 + kThreads);
  EXPECT_LE(b.max_inflight(), kCanQueue / 2 + kThreads);
  EXPECT_GE(a.max_inflight(), 2u);
  EXPECT_GE(b.max_inflight(), 2u);
  EXPECT_EQ(a.completed(), 1u + kThreads * kRounds * kBurst);
  EXPECT_EQ(b.completed(), 1u + kThreads * kRounds * kBurst);
  expect_idle(a);
  expect_idle(b);
  EXPECT_EQ(host.host_busy(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Tags, ScsiShare,
                         ::testing::Values(ShareCase{"1", "0"}, ShareCase{"2", "1"}),
                         [](const auto& info) {
                           return std::string("hwq") + info.param.nr_hw_queues + "_hosttagset" +
                                  info.param.host_tagset;
                         });

// ---- memory backing ----

class ScsiMemory : public ::testing::TestWithParam<const char*> {};

TEST_P(ScsiMemory, KeepsDataPerLun) {
  auto dev = make({{"backing", "memory"}, {"size", "16M"}, {"luns", "2"}, {"latency_us", GetParam()}});
  ASSERT_TRUE(dev);
  ScsiHost& host = host_of(*dev);
  Queue& q0 = host.lun(0).queue();
  Queue& q1 = host.lun(1).queue();
  const uint64_t offsets[] = {0, 4096, 20480 + 512, 1 << 20, (16u << 20) - 8192};
  const uint32_t lens[] = {4096, 8192, 1536, 65536, 8192};
  for (size_t i = 0; i < std::size(offsets); i++) {
    auto data = pattern(lens[i], unsigned(i) + 1);
    ASSERT_EQ(q0.write_sync(data.data(), offsets[i], lens[i]), BlkStatus::ok) << i;
  }
  for (size_t i = 0; i < std::size(offsets); i++) {
    std::vector<unsigned char> got(lens[i], 0xee);
    ASSERT_EQ(q0.read_sync(got.data(), offsets[i], lens[i]), BlkStatus::ok) << i;
    EXPECT_EQ(got, pattern(lens[i], unsigned(i) + 1)) << "offset " << offsets[i];
    // The other LUN has its own store: never written, all zeros.
    std::vector<unsigned char> other(lens[i], 0xee);
    ASSERT_EQ(q1.read_sync(other.data(), offsets[i], lens[i]), BlkStatus::ok);
    EXPECT_EQ(other, std::vector<unsigned char>(lens[i], 0)) << "offset " << offsets[i];
  }
  std::vector<unsigned char> hole(4096, 0xee);
  ASSERT_EQ(q0.read_sync(hole.data(), 8u << 20, 4096), BlkStatus::ok);
  EXPECT_EQ(hole, std::vector<unsigned char>(4096, 0));
  // Beyond the end: refused by the core, nothing touched.
  EXPECT_NE(q0.write_sync(hole.data(), 16u << 20, 4096), BlkStatus::ok);
  expect_idle(host.lun(0));
}

INSTANTIATE_TEST_SUITE_P(Latency, ScsiMemory, ::testing::Values("0", "30"),
                         [](const auto& info) { return std::string("latency") + info.param; });

// ---- completion context ----

TEST(ScsiHost, LatencyModeCompletesFromTheIrqThread) {
  constexpr uint64_t kLatencyUs = 2000;
  auto dev = make({{"latency_us", std::to_string(kLatencyUs)}});
  ASSERT_TRUE(dev);
  ScsiLun& lun = host_of(*dev).lun(0);
  std::vector<unsigned char> buf(4096);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(dev->queue().read_sync(buf.data(), 0, 4096), BlkStatus::ok);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::microseconds(kLatencyUs));
  Waiter w;
  std::vector<IoSlot> slots(8);
  for (int i = 0; i < 8; i++) {
    slots[i].prep(ReqOp::read, uint64_t(i) * 8192, 4096, &w);
    dev->queue().submit_bio(&slots[i].bio);
  }
  ASSERT_TRUE(w.wait(8));
  EXPECT_EQ(lun.completed(), 9u);
  // Every ops.complete ran in interrupt context: the irq thread's hardirq
  // scope, or the softirq it raised (possibly on another CPU's thread).
  EXPECT_EQ(lun.irq_completions(), lun.completed());
  const std::string th = w.thread();
  EXPECT_TRUE(th.rfind("scsi-irq/", 0) == 0 || th.rfind("ksoftirqd/", 0) == 0) << th;
  bool irq_thread_seen = false;
  for (const auto& [group, usage] : base::thread_usage()) irq_thread_seen |= group == "scsi-irq";
  EXPECT_TRUE(irq_thread_seen);
  expect_idle(lun);
}

TEST(ScsiHost, InlineModeCompletesInTaskContext) {
  auto dev = make({});
  ASSERT_TRUE(dev);
  ScsiLun& lun = host_of(*dev).lun(0);
  EXPECT_EQ(host_of(*dev).irq(), nullptr);
  std::vector<unsigned char> buf(4096);
  for (int i = 0; i < 4; i++) ASSERT_EQ(dev->queue().read_sync(buf.data(), i * 4096, 4096), BlkStatus::ok);
  EXPECT_EQ(lun.completed(), 4u);
  EXPECT_EQ(lun.irq_completions(), 0u);
  expect_idle(lun);
}

// ---- seed 001: direct issue from the plug on a no-scheduler host ----

// Submits n non-adjacent reads inside a plug; returns how many commands had
// reached queue_rq before the plug finished (only meaningful with no other
// submitter). All n have when this returns.
uint64_t plugged_reads(Queue& q, const ScsiLun& lun, int n) {
  Waiter w;
  std::vector<IoSlot> slots(n);
  const uint64_t before = lun.dispatched();
  uint64_t reached;
  {
    Plug plug(n);
    for (int i = 0; i < n; i++) {
      slots[i].prep(ReqOp::read, uint64_t(i) * 65536, 4096, &w);
      q.submit_bio(&slots[i].bio);
    }
    reached = lun.dispatched() - before;
  }
  EXPECT_TRUE(w.wait(n));
  EXPECT_EQ(w.errors(), 0);
  EXPECT_GE(lun.dispatched() - before, uint64_t(n));
  return reached;
}

TEST(ScsiSeed001, NoSchedHostHasNoScheduler) {
  auto dev = make({{"no_sched", "1"}});
  ASSERT_TRUE(dev);
  auto s = dev->queue().attr("queue/scheduler");
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s->find("[none]"), std::string::npos) << *s;
  EXPECT_FALSE(dev->queue().set_attr("queue/scheduler", "mq-deadline").ok());
}

TEST(ScsiSeed001, PlugDirectIssueSendsPluggedRequestsAtSubmit) {
  auto dev = make({{"no_sched", "1"}});
  ASSERT_TRUE(dev);
  ASSERT_EQ(*dev->queue().attr("queue/plug_direct_issue"), "1");
  EXPECT_EQ(plugged_reads(dev->queue(), host_of(*dev).lun(0), 8), 8u);
  expect_idle(host_of(*dev).lun(0));
}

TEST(ScsiSeed001, WithoutPlugDirectIssueThePlugHoldsThemUntilFlush) {
  auto dev = make({{"no_sched", "1"}, {"attr:queue/plug_direct_issue", "0"}});
  ASSERT_TRUE(dev);
  const uint64_t runs = dev->queue().hctx_stats(0).run;
  EXPECT_EQ(plugged_reads(dev->queue(), host_of(*dev).lun(0), 8), 0u);
  // They went through the software queue and a queue run.
  EXPECT_GT(dev->queue().hctx_stats(0).run, runs);
  expect_idle(host_of(*dev).lun(0));
}

TEST(ScsiSeed001, DirectIssueIsOnlyForASingleHwQueue) {
  if (nr_cpu_ids() < 2) GTEST_SKIP() << "needs two CPUs for two hw queues";
  auto dev = make({{"no_sched", "1"}, {"nr_hw_queues", "2"}});
  ASSERT_TRUE(dev);
  ASSERT_EQ(dev->queue().nr_hw_queues(), 2u);
  EXPECT_EQ(plugged_reads(dev->queue(), host_of(*dev).lun(0), 8), 0u);
}

TEST(ScsiSeed001, BothModesSurviveAnExhaustedBudget) {
  for (const char* direct : {"1", "0"}) {
    auto dev = make({{"no_sched", "1"}, {"queue_depth", "2"}, {"latency_us", "20"},
                     {"attr:queue/plug_direct_issue", direct}});
    ASSERT_TRUE(dev);
    ScsiLun& lun = host_of(*dev).lun(0);
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; t++) {
      ts.emplace_back([&] {
        for (int r = 0; r < 20; r++) plugged_reads(dev->queue(), lun, 8);
      });
    }
    for (auto& th : ts) th.join();
    EXPECT_LE(lun.max_inflight(), 2u) << "plug_direct_issue=" << direct;
    expect_idle(lun);
  }
}

// ---- teardown ----

TEST(ScsiHost, TeardownWithIoInFlightDrains) {
  Waiter w;
  constexpr int kPerLun = 40;
  std::vector<IoSlot> slots(2 * kPerLun);
  {
    auto dev = make({{"luns", "2"}, {"latency_us", "3000"}, {"queue_depth", "8"}, {"can_queue", "12"}});
    ASSERT_TRUE(dev);
    ScsiHost& host = host_of(*dev);
    std::thread other([&] {
      for (int i = 0; i < kPerLun; i++) {
        slots[kPerLun + i].prep(ReqOp::read, uint64_t(i) * 8192, 4096, &w);
        host.lun(1).queue().submit_bio(&slots[kPerLun + i].bio);
      }
    });
    for (int i = 0; i < kPerLun; i++) {
      slots[i].prep(ReqOp::write, uint64_t(i) * 8192, 4096, &w);
      host.lun(0).queue().submit_bio(&slots[i].bio);
    }
    other.join();
    EXPECT_LT(w.ended(), 2 * kPerLun) << "latency should keep commands in flight";
  }
  EXPECT_EQ(w.ended(), 2 * kPerLun);
  EXPECT_EQ(w.errors(), 0);
}

}  // namespace
}  // namespace blkmq::scsi
