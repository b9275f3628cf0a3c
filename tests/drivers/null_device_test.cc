// The null device through the public API: create_device("null"), bios,
// polling, plugging, fault injection, throttling, shared tag sets and
// teardown. Needs the core; expectations follow the documented contracts
// of include/blkmq/.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "base/thread.h"
#include "blkmq/blkmq.h"
#include "blkmq/driver/context.h"
#include "drivers/null/null_params.h"
#include "support/device_test_util.h"
#include "support/wait.h"

namespace blkmq {
namespace {

using Clock = std::chrono::steady_clock;
using devtest::IoSlot;
using devtest::pattern;
using devtest::Waiter;
using devtest::waiter_end_io;

std::unique_ptr<Device> make(const ParamMap& params) { return devtest::make_device("null", params); }
std::string make_error(const ParamMap& params) { return devtest::make_device_error("null", params); }

// Submits n bios of `len` bytes at successive offsets and waits for all.
// Returns the number that failed.
int run_batch(Queue& q, ReqOp op, int n, uint32_t len, uint32_t flags = 0, uint64_t base = 0) {
  Waiter w;
  std::vector<IoSlot> slots(n);
  for (int i = 0; i < n; i++) {
    slots[i].prep(op, base + uint64_t(i) * len, len, &w, flags);
    q.submit_bio(&slots[i].bio);
  }
  EXPECT_TRUE(w.wait(n));
  return w.errors();
}

// ---- registration and parameters ----

TEST(NullDevice, IsRegisteredWithEveryParameter) {
  devtest::expect_registered("null", nullb::null_param_infos());
}

TEST(NullDevice, Defaults) {
  auto dev = make({});
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->driver_name(), "null");
  EXPECT_EQ(dev->size_bytes(), 250ull << 30);
  Queue& q = dev->queue();
  // submit_queues=1 + poll_queues=1, as null_blk's defaults.
  EXPECT_EQ(q.nr_hw_queues(), 2u);
  const QueueLimits& lim = q.limits();
  EXPECT_EQ(lim.logical_block_size, 512u);
  EXPECT_EQ(lim.max_sectors, 2560u);
  EXPECT_EQ(lim.capacity_sectors, (250ull << 30) >> kSectorShift);
  EXPECT_TRUE(lim.poll);
  EXPECT_FALSE(lim.write_cache);
  EXPECT_EQ(lim.max_discard_sectors, 0u);
  EXPECT_EQ(q.name().rfind("nullb", 0), 0u) << q.name();
  std::vector<unsigned char> buf(4096);
  EXPECT_EQ(q.read_sync(buf.data(), 0, 4096), BlkStatus::ok);
  EXPECT_EQ(q.write_sync(buf.data(), 1 << 20, 4096), BlkStatus::ok);
  EXPECT_EQ(q.flush_sync(), BlkStatus::ok);
}

TEST(NullDevice, LimitsFollowParameters) {
  auto dev = make({{"bs", "4096"}, {"size", "64"}, {"max_sectors", "256"}, {"rotational", "1"},
                   {"poll_queues", "0"}, {"memory_backed", "1"}, {"cache_size", "4"},
                   {"fua", "0"}, {"discard", "1"}});
  ASSERT_TRUE(dev);
  const QueueLimits& lim = dev->queue().limits();
  EXPECT_EQ(lim.logical_block_size, 4096u);
  EXPECT_EQ(lim.physical_block_size, 4096u);
  EXPECT_EQ(lim.max_hw_sectors, 256u);
  EXPECT_EQ(lim.capacity_sectors, (64ull << 20) >> kSectorShift);
  EXPECT_TRUE(lim.rotational);
  EXPECT_FALSE(lim.poll);
  EXPECT_TRUE(lim.write_cache);
  EXPECT_FALSE(lim.fua);
  EXPECT_GT(lim.max_discard_sectors, 0u);
  EXPECT_EQ(dev->size_bytes(), 64ull << 20);
}

TEST(NullDevice, SubmitQueuesClampedToCpus) {
  auto dev = make({{"submit_queues", "4096"}, {"poll_queues", "0"}});
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->queue().nr_hw_queues(), nr_cpu_ids());
}

TEST(NullDevice, BadParametersAreRefusedByName) {
  EXPECT_NE(make_error({{"irqmode", "5"}}).find("irqmode"), std::string::npos);
  EXPECT_NE(make_error({{"bs", "768"}}).find("bs"), std::string::npos);
  EXPECT_NE(make_error({{"hw_queue_depth", "0"}}).find("hw_queue_depth"), std::string::npos);
  EXPECT_NE(make_error({{"no_such_param", "1"}}).find("no_such_param"), std::string::npos);
  EXPECT_NE(make_error({{"requeue", "1,2"}}).find("requeue"), std::string::npos);
}

TEST(NullDevice, NoSchedSelectsNone) {
  auto dev = make({{"no_sched", "1"}, {"poll_queues", "0"}});
  ASSERT_TRUE(dev);
  auto s = dev->queue().attr("queue/scheduler");
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s->find("[none]"), std::string::npos) << *s;
}

TEST(NullDevice, NoSched2ForbidsSchedulers) {
  auto dev = make({{"no_sched", "2"}, {"poll_queues", "0"}});
  ASSERT_TRUE(dev);
  EXPECT_FALSE(dev->queue().set_attr("queue/scheduler", "mq-deadline").ok());
}

TEST(NullDevice, CoreAttributesPassThrough) {
  auto dev = make({{"attr:queue/nomerges", "2"}});
  ASSERT_TRUE(dev);
  auto v = dev->queue().attr("queue/nomerges");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "2");
}

// ---- completion modes ----

struct ModeCase {
  const char* irqmode;
  const char* submit_queues;
  const char* shared_tag_bitmap;
};

class NullIrqMode : public ::testing::TestWithParam<ModeCase> {};

TEST_P(NullIrqMode, AsyncIoFromSeveralThreadsCompletes) {
  const ModeCase& c = GetParam();
  auto dev = make({{"irqmode", c.irqmode}, {"submit_queues", c.submit_queues},
                   {"shared_tag_bitmap", c.shared_tag_bitmap}, {"completion_nsec", "20000"},
                   {"hw_queue_depth", "16"}});
  ASSERT_TRUE(dev);
  std::vector<std::thread> ts;
  std::atomic<int> errors{0};
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&, t] {
      for (int round = 0; round < 10; round++) {
        ReqOp op = (round + t) % 2 ? ReqOp::write : ReqOp::read;
        errors += run_batch(dev->queue(), op, 32, 4096, 0, uint64_t(t) << 30);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, NullIrqMode,
                         ::testing::Values(ModeCase{"0", "1", "0"}, ModeCase{"1", "1", "0"},
                                           ModeCase{"2", "1", "0"}, ModeCase{"0", "4", "0"},
                                           ModeCase{"1", "4", "1"}, ModeCase{"2", "4", "0"}));

TEST(NullDevice, TimerModeTakesCompletionNsec) {
  auto dev = make({{"irqmode", "2"}, {"completion_nsec", "30000000"}});  // 30 ms
  ASSERT_TRUE(dev);
  std::vector<unsigned char> buf(4096);
  auto t0 = Clock::now();
  EXPECT_EQ(dev->queue().read_sync(buf.data(), 0, 4096), BlkStatus::ok);
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(25));
  auto usage = base::thread_usage();
  EXPECT_TRUE(usage.count("null-timer"));
}

TEST(NullDevice, PluggedBatchGoesThroughQueueRqs) {
  auto dev = make({{"irqmode", "0"}, {"poll_queues", "0"}, {"no_sched", "1"}});
  ASSERT_TRUE(dev);
  Waiter w;
  std::vector<IoSlot> slots(24);
  {
    Plug plug(24);
    for (int i = 0; i < 24; i++) {
      slots[i].prep(ReqOp::read, uint64_t(i) * 8192, 4096, &w);
      dev->queue().submit_bio(&slots[i].bio);
    }
  }
  EXPECT_TRUE(w.wait(24));
  EXPECT_EQ(w.errors(), 0);
}

// irqmode=0 ends a plug's requests as one batch (issue 29): every bio ends
// once, before the plug's flush returns, and the disk statistics, the tags
// and the in-flight count are what request-by-request completion gives.
TEST(NullDevice, PluggedBatchEndsEachBioOnceWithExactStatistics) {
  auto dev = make({{"irqmode", "0"}, {"poll_queues", "0"}, {"no_sched", "1"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  Waiter w;
  std::vector<IoSlot> slots(32);
  {
    Plug plug(32);
    for (int i = 0; i < 32; i++) {
      slots[i].prep(i < 24 ? ReqOp::read : ReqOp::write, uint64_t(i) * 8192, 4096, &w);
      q.submit_bio(&slots[i].bio);
    }
  }
  EXPECT_EQ(w.ended(), 32);
  EXPECT_EQ(w.errors(), 0);
  std::istringstream in(*q.attr("stat"));
  std::vector<uint64_t> f;
  for (uint64_t v; in >> v;) f.push_back(v);
  ASSERT_GE(f.size(), 11u);
  EXPECT_EQ(f[0], 24u);   // read I/Os
  EXPECT_EQ(f[2], 192u);  // read sectors
  EXPECT_EQ(f[4], 8u);    // write I/Os
  EXPECT_EQ(f[6], 64u);   // write sectors
  EXPECT_EQ(f[8], 0u);    // in flight
  EXPECT_EQ(*q.attr("mq/0/tags_busy"), "0");
  EXPECT_EQ(*q.attr("inflight"), "       0        0");
}

// The plug's batch of requests is taken by its bios (issue 29): reads map
// to the read hctx type, which falls back to the default hctx without read
// queues, and still match the cached requests; a lookup by type alone took
// a fresh tag for each read and left the batch unused.
TEST(NullDevice, PluggedReadsUseThePlugsCachedRequests) {
  auto dev = make({{"irqmode", "0"}, {"poll_queues", "0"}, {"no_sched", "1"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  Waiter w;
  std::vector<IoSlot> slots(8);
  {
    Plug plug(8);
    for (int i = 0; i < 8; i++) {
      slots[i].prep(ReqOp::read, uint64_t(i) * 8192, 4096, &w);
      q.submit_bio(&slots[i].bio);
    }
    EXPECT_EQ(*q.attr("mq/0/tags_busy"), "8");  // one batch of 8, all used
  }
  EXPECT_EQ(w.ended(), 8);
  EXPECT_EQ(*q.attr("mq/0/tags_busy"), "0");
}

// ---- memory backing ----

TEST(NullDevice, MemoryBackedKeepsData) {
  auto dev = make({{"memory_backed", "1"}, {"size", "64"}, {"irqmode", "1"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  auto a = pattern(64 << 10, 1);
  ASSERT_EQ(q.write_sync(a.data(), 1 << 20, a.size()), BlkStatus::ok);
  std::vector<unsigned char> out(a.size());
  ASSERT_EQ(q.read_sync(out.data(), 1 << 20, out.size()), BlkStatus::ok);
  EXPECT_EQ(out, a);
  // Unwritten space reads as zeros, even into a dirty buffer.
  std::fill(out.begin(), out.end(), 0xEE);
  ASSERT_EQ(q.read_sync(out.data(), 8 << 20, out.size()), BlkStatus::ok);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](unsigned char c) { return c == 0; }));
  // A read straddling written and unwritten blocks.
  std::vector<unsigned char> edge(8192);
  ASSERT_EQ(q.read_sync(edge.data(), (1 << 20) + a.size() - 4096, edge.size()), BlkStatus::ok);
  EXPECT_TRUE(std::equal(edge.begin(), edge.begin() + 4096, a.end() - 4096));
  EXPECT_TRUE(std::all_of(edge.begin() + 4096, edge.end(), [](unsigned char c) { return c == 0; }));
}

TEST(NullDevice, MemoryBackedMultiSegmentBio) {
  auto dev = make({{"memory_backed", "1"}, {"size", "16"}});
  ASSERT_TRUE(dev);
  auto a = pattern(3 * 4096, 2);
  iovec iov[3] = {{a.data(), 4096}, {a.data() + 4096, 4096}, {a.data() + 8192, 4096}};
  Waiter w;
  Bio bio;
  bio.op = ReqOp::write;
  bio.sector = 100;
  bio.size = 3 * 4096;
  bio.vec = iov;
  bio.nr_vecs = 3;
  bio.end_io = waiter_end_io;
  bio.private_data = &w;
  dev->queue().submit_bio(&bio);
  ASSERT_TRUE(w.wait(1));
  ASSERT_EQ(w.errors(), 0);
  std::vector<unsigned char> out(a.size());
  ASSERT_EQ(dev->queue().read_sync(out.data(), 100 * 512, out.size()), BlkStatus::ok);
  EXPECT_EQ(out, a);
}

TEST(NullDevice, WriteCacheFlushAndFua) {
  auto dev = make({{"memory_backed", "1"}, {"size", "16"}, {"cache_size", "1"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  EXPECT_TRUE(q.limits().write_cache);
  EXPECT_TRUE(q.limits().fua);
  // More than the cache holds, so eviction runs too.
  auto a = pattern(2 << 20, 3);
  ASSERT_EQ(q.write_sync(a.data(), 0, 1 << 20), BlkStatus::ok);
  ASSERT_EQ(q.write_sync(a.data() + (1 << 20), 1 << 20, 1 << 20, kBioFua), BlkStatus::ok);
  ASSERT_EQ(q.flush_sync(), BlkStatus::ok);
  std::vector<unsigned char> out(a.size());
  ASSERT_EQ(q.read_sync(out.data(), 0, out.size()), BlkStatus::ok);
  EXPECT_EQ(out, a);
}

TEST(NullDevice, DiscardReadsBackZeros) {
  auto dev = make({{"memory_backed", "1"}, {"size", "16"}, {"discard", "1"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  auto a = pattern(64 << 10, 4);
  ASSERT_EQ(q.write_sync(a.data(), 0, a.size()), BlkStatus::ok);
  Waiter w;
  IoSlot d;
  d.prep(ReqOp::discard, 4096, 32 << 10, &w);
  q.submit_bio(&d.bio);
  ASSERT_TRUE(w.wait(1));
  EXPECT_EQ(w.errors(), 0);
  std::vector<unsigned char> out(a.size());
  ASSERT_EQ(q.read_sync(out.data(), 0, out.size()), BlkStatus::ok);
  for (size_t i = 0; i < out.size(); i++) {
    bool gone = i >= 4096 && i < 4096 + (32 << 10);
    ASSERT_EQ(out[i], gone ? 0 : a[i]) << i;
  }
}

TEST(NullDevice, OutOfRangeIsRefused) {
  auto dev = make({{"memory_backed", "1"}, {"size", "1"}});
  ASSERT_TRUE(dev);
  std::vector<unsigned char> buf(8192);
  EXPECT_EQ(dev->queue().read_sync(buf.data(), (1 << 20) - 4096, 8192), BlkStatus::inval);
  EXPECT_EQ(dev->queue().write_sync(buf.data(), 1 << 20, 512), BlkStatus::inval);
}

// ---- poll queues ----

TEST(NullDevice, PolledIoIsReapedByPoll) {
  auto dev = make({{"poll_queues", "1"}, {"memory_backed", "1"}, {"size", "16"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  auto a = pattern(8192, 5);
  Waiter w;
  IoSlot slot[2];
  slot[0].prep(ReqOp::write, 0, 8192, &w, kBioPolled);
  std::memcpy(slot[0].buf.data(), a.data(), a.size());
  q.submit_bio(&slot[0].bio);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (w.ended() < 1 && Clock::now() < deadline) q.poll(&slot[0].bio);
  ASSERT_EQ(w.ended(), 1);
  slot[1].prep(ReqOp::read, 0, 8192, &w, kBioPolled);
  q.submit_bio(&slot[1].bio);
  int found = 0;
  while (w.ended() < 2 && Clock::now() < deadline) found += q.poll(&slot[1].bio);
  ASSERT_EQ(w.ended(), 2);
  EXPECT_GE(found, 1);
  EXPECT_EQ(w.errors(), 0);
  EXPECT_EQ(slot[1].buf, a);
}

// ---- fault injection ----

TEST(NullDevice, InitHctxFaultFailsCreation) {
  std::string e = make_error({{"init_hctx", "1,100,0,1"}});
  EXPECT_FALSE(e.empty());
  // Failing the second of four hctxs unwinds the first cleanly (ASan).
  make_error({{"init_hctx", "2,100,0,1"}, {"submit_queues", "2"}, {"poll_queues", "2"}});
  // The fault is per device: a device without it works.
  EXPECT_TRUE(make({}));
}

TEST(NullDevice, TimeoutInjectionEndsWithTimeout) {
  auto dev = make({{"timeout_inject", "1,100,0,1"}, {"irqmode", "1"},
                   {"attr:queue/io_timeout", "100"}});
  ASSERT_TRUE(dev);
  std::vector<unsigned char> buf(4096);
  auto t0 = Clock::now();
  EXPECT_EQ(dev->queue().read_sync(buf.data(), 0, 4096), BlkStatus::timeout);
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(90));
  // times=1: the next one goes through.
  EXPECT_EQ(dev->queue().read_sync(buf.data(), 0, 4096), BlkStatus::ok);
}

TEST(NullDevice, TimeoutInjectionOnTimerMode) {
  auto dev = make({{"timeout_inject", "2,100,0,2"}, {"irqmode", "2"},
                   {"attr:queue/io_timeout", "100"}});
  ASSERT_TRUE(dev);
  Waiter w;
  std::vector<IoSlot> slots(8);
  for (int i = 0; i < 8; i++) {
    slots[i].prep(ReqOp::read, uint64_t(i) * 4096, 4096, &w);
    dev->queue().submit_bio(&slots[i].bio);
  }
  ASSERT_TRUE(w.wait(8));
  EXPECT_EQ(w.errors(), 2);
  EXPECT_EQ(w.last_error(), BlkStatus::timeout);
}

TEST(NullDevice, RequeueInjectionLosesNothing) {
  for (const char* mode : {"0", "1", "2"}) {
    auto dev = make({{"requeue", "1,100,0,20"}, {"irqmode", mode}, {"memory_backed", "1"},
                     {"size", "16"}});
    ASSERT_TRUE(dev);
    Queue& q = dev->queue();
    auto a = pattern(256 << 10, 6);
    for (int i = 0; i < 64; i++) {
      ASSERT_EQ(q.write_sync(a.data() + i * 4096, uint64_t(i) * 4096, 4096), BlkStatus::ok);
    }
    std::vector<unsigned char> out(a.size());
    ASSERT_EQ(q.read_sync(out.data(), 0, out.size()), BlkStatus::ok);
    EXPECT_EQ(out, a) << "irqmode " << mode;
  }
}

TEST(NullDevice, RequeueInjectionUnderLoad) {
  auto dev = make({{"requeue", "3,50,0,-1"}, {"irqmode", "1"}, {"submit_queues", "2"}});
  ASSERT_TRUE(dev);
  EXPECT_EQ(run_batch(dev->queue(), ReqOp::read, 256, 4096), 0);
}

// ---- bandwidth cap ----

TEST(NullDevice, MbpsCapsBandwidth) {
  auto dev = make({{"mbps", "20"}, {"irqmode", "0"}, {"poll_queues", "0"}});
  ASSERT_TRUE(dev);
  // 4 MiB at 20 MiB/s is ~200 ms; uncapped it takes ~1 ms. Allow for the
  // first tick and the per-tick overdraft of one request.
  auto t0 = Clock::now();
  EXPECT_EQ(run_batch(dev->queue(), ReqOp::write, 64, 64 << 10), 0);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_GE(ms, 100);
  EXPECT_LE(ms, 5000);
}

TEST(NullDevice, TeardownWhileThrottledDrains) {
  auto dev = make({{"mbps", "1"}, {"irqmode", "1"}, {"poll_queues", "0"}});
  ASSERT_TRUE(dev);
  Waiter w;
  std::vector<IoSlot> slots(32);  // 2 MiB at 1 MiB/s: 2 s if the cap held
  for (int i = 0; i < 32; i++) {
    slots[i].prep(ReqOp::write, uint64_t(i) << 16, 64 << 10, &w);
    dev->queue().submit_bio(&slots[i].bio);
  }
  // The cap holds requests back (refused dev_resource) when the teardown starts.
  EXPECT_TRUE(test::eventually([&] { return dev->queue().hctx_stats(0).busy > 0; }));
  auto t0 = Clock::now();
  dev.reset();
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1500));
  EXPECT_EQ(w.ended(), 32);
  EXPECT_EQ(w.errors(), 0);
}

// ---- teardown ----

TEST(NullDevice, TeardownWaitsForTimerCompletions) {
  auto dev = make({{"irqmode", "2"}, {"completion_nsec", "20000000"}});
  ASSERT_TRUE(dev);
  Waiter w;
  std::vector<IoSlot> slots(32);
  for (int i = 0; i < 32; i++) {
    slots[i].prep(ReqOp::read, uint64_t(i) * 4096, 4096, &w);
    dev->queue().submit_bio(&slots[i].bio);
  }
  dev.reset();
  EXPECT_EQ(w.ended(), 32);
  EXPECT_EQ(w.errors(), 0);
}

TEST(NullDevice, ManyDevicesGetDistinctNames) {
  auto a = make({});
  auto b = make({});
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->queue().name(), b->queue().name());
}

// ---- shared tag sets ----

TEST(NullDevice, SharedTagsAcrossDevices) {
  auto a = make({{"shared_tags", "1"}, {"hw_queue_depth", "8"}, {"irqmode", "1"}});
  auto b = make({{"shared_tags", "1"}, {"hw_queue_depth", "8"}, {"irqmode", "2"}});
  ASSERT_TRUE(a && b);
  EXPECT_EQ(&a->queue().tag_set(), &b->queue().tag_set());
  std::string e = make_error({{"shared_tags", "1"}, {"hw_queue_depth", "16"}});
  EXPECT_NE(e.find("shared_tags"), std::string::npos) << e;
  EXPECT_NE(e.find("hw_queue_depth"), std::string::npos) << e;
  std::thread ta([&] { EXPECT_EQ(run_batch(a->queue(), ReqOp::read, 200, 4096), 0); });
  std::thread tb([&] { EXPECT_EQ(run_batch(b->queue(), ReqOp::write, 200, 4096), 0); });
  ta.join();
  tb.join();
  // The set outlives the first device that goes.
  a.reset();
  EXPECT_EQ(run_batch(b->queue(), ReqOp::read, 64, 4096), 0);
  b.reset();
  // With every user gone the set is freed: new settings are accepted.
  auto c = make({{"shared_tags", "1"}, {"hw_queue_depth", "16"}});
  EXPECT_TRUE(c);
}

TEST(NullDevice, SharedAndPrivateSetsAreDistinct) {
  auto a = make({{"shared_tags", "1"}});
  auto b = make({});
  ASSERT_TRUE(a && b);
  EXPECT_NE(&a->queue().tag_set(), &b->queue().tag_set());
}

}  // namespace
}  // namespace blkmq
