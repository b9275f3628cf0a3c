// bfq with real I/O: several threads with different classes and weights on
// a null device, every bio ending exactly once; requeues; switching away
// from bfq under I/O; and queues freed once their context goes quiet.
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/bfq_test_util.h"
#include "support/verified_io.h"

namespace blkmq::test {
namespace {


struct Totals {
  std::atomic<uint64_t> submitted{0}, ended{0}, doubles{0}, errors{0};
};

// One submitting thread: its own I/O context settings, `depth` bios in
// flight over its own blocks, `count` bios in all (or until stop).
void worker(Queue& q, unsigned id, uint16_t ioprio, uint16_t weight, int count, unsigned depth, Totals& t,
            const std::atomic<bool>* stop) {
  IoContext* ioc = current_io_context();
  ioc->ioprio = ioprio;
  ioc->weight = weight;
  std::vector<VerifiedIo> ios(depth);
  std::mt19937 rng(id + 7);
  int issued = 0;
  auto reap = [&](VerifiedIo& io) {
    const int e = io.ends.exchange(0, std::memory_order_relaxed);
    if (e == 0) return;
    if (e > 1) t.doubles++;
    if (io.bio.status != BlkStatus::ok) t.errors++;
    t.ended++;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (issued < count && !(stop && stop->load()) && std::chrono::steady_clock::now() < deadline) {
    bool any = false;
    for (VerifiedIo& io : ios) {
      if (!io.done.load(std::memory_order_acquire) || issued >= count) continue;
      reap(io);
      const ReqOp op = rng() % 3 == 0 ? ReqOp::write : ReqOp::read;
      // Half sequential (mergeable runs), half random.
      const uint64_t blk = (issued % 2) ? (issued / 2) % 1024 : rng() % 1024;
      start_verified_io(io, uint64_t{id} * 1024 + blk, op);
      t.submitted++;
      issued++;
      any = true;
      q.submit_bio(&io.bio);
    }
    if (!any) {
      // Every slot is in flight: sleep until the first of them ends.
      for (VerifiedIo& io : ios)
        if (!io.done.load(std::memory_order_acquire)) {
          wait_verified_io(io);
          break;
        }
    }
  }
  for (VerifiedIo& io : ios) {
    wait_verified_io(io);
    reap(io);
  }
}

std::unique_ptr<Device> null_dev(const char* irqmode) {
  auto made = create_device("null", {{"irqmode", irqmode}, {"hw_queue_depth", "32"}, {"size", "64"}});
  EXPECT_TRUE(made) << made.status().message();
  return made ? std::move(made.value()) : nullptr;
}

class BfqLiveTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BfqLiveTest, ThreadsOfEveryClassAndWeightEndOnce) {
  auto dev = null_dev("2");
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_TRUE(q.set_attr("queue/scheduler", "bfq"));
  ASSERT_TRUE(q.set_attr("queue/iosched/insert_lists", GetParam()));
  Totals t;
  const int kCount = 800;
  std::vector<std::thread> threads;
  threads.emplace_back(worker, std::ref(q), 0, ioprio_value(IoprioClass::rt, 2), 100, kCount, 8, std::ref(t), nullptr);
  threads.emplace_back(worker, std::ref(q), 1, kIoprioDefault, 500, kCount, 8, std::ref(t), nullptr);
  threads.emplace_back(worker, std::ref(q), 2, kIoprioDefault, 100, kCount, 8, std::ref(t), nullptr);
  threads.emplace_back(worker, std::ref(q), 3, ioprio_value(IoprioClass::be, 7), 50, kCount, 4, std::ref(t), nullptr);
  threads.emplace_back(worker, std::ref(q), 4, ioprio_value(IoprioClass::idle, 0), 100, 300, 4, std::ref(t), nullptr);
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.submitted.load(), 4u * kCount + 300);
  EXPECT_EQ(t.ended.load(), t.submitted.load());
  EXPECT_EQ(t.doubles.load(), 0u);
  EXPECT_EQ(t.errors.load(), 0u);
  // A bio ends before its request is finished and accounted (as in the
  // kernel), and nothing signals the last one: look until it is.
  eventually([&] { return bfq_stats(&q).rq_in_driver == 0 && q.disk_stat().in_flight == 0; }, 1000);
  BfqStats st = bfq_stats(&q);
  EXPECT_GT(st.dispatched, 0u);
  EXPECT_EQ(st.rq_in_driver, 0u);
  EXPECT_GE(st.queues_created, 5u);
  EXPECT_EQ(q.disk_stat().in_flight, 0u);
}

INSTANTIATE_TEST_SUITE_P(InsertLists, BfqLiveTest, ::testing::Values("split", "locked"));

// Switching away from bfq (and back) under I/O loses nothing: the core
// freezes and quiesces, so bfq must hand out everything it holds.
TEST(BfqLive, SwitchAwayUnderIo) {
  auto dev = null_dev("1");
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  Totals t;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < 3; i++)
    threads.emplace_back(worker, std::ref(q), i, kIoprioDefault, 100 * (i + 1), 1 << 30, 8, std::ref(t), &stop);
  const char* names[] = {"bfq", "mq-deadline", "bfq", "none", "bfq", "kyber"};
  for (int round = 0; round < 12; round++) {
    Status st = q.set_attr("queue/scheduler", names[round % 6]);
    ASSERT_TRUE(st) << st.message();
    // Each scheduler gets I/O to hold before the next switch takes it away.
    const uint64_t seen = t.ended.load();
    if (!eventually([&] { return t.ended.load() >= seen + 64; })) {
      ADD_FAILURE() << "no I/O ended under " << names[round % 6];
      break;
    }
  }
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_GT(t.submitted.load(), 100u);
  EXPECT_EQ(t.ended.load(), t.submitted.load());
  EXPECT_EQ(t.doubles.load(), 0u);
  EXPECT_EQ(t.errors.load(), 0u);
}

// Requests the driver requeues come back through bfq and end once.
TEST(BfqLive, DriverRequeuesEndOnce) {
  StubDriver::Options o;
  o.scheduler = "bfq";
  o.mode = CompleteMode::irq_thread;
  StubDriver d(o);
  BioTracker t;
  std::vector<std::unique_ptr<BioTracker::Slot>> slots;
  auto a = make_ioc(), b = make_ioc(300);
  d.requeue_next = 20;
  d.busy_next = 5;
  for (int i = 0; i < 100; i++) {
    slots.push_back(t.make(i % 3 ? ReqOp::read : ReqOp::write, uint64_t(i) * 8192, 4096));
    slots.back()->bio.ioc = i % 2 ? a.get() : b.get();
    d.q().submit_bio(&slots.back()->bio);
  }
  ASSERT_TRUE(t.wait_for(100, 10000)) << t.ended.load();
  EXPECT_EQ(t.doubles.load(), 0);
  EXPECT_EQ(t.errors.load(), 0);
  EXPECT_EQ(d.requeue_next.load(), 0);
  ASSERT_TRUE(wait_requests_freed(d.q()));  // bios end before their requests are freed
  EXPECT_EQ(bfq_stats(&d.q()).rq_in_driver, 0u);
}

// A queue is freed once its context has had no request for
// bfq_wr_min_idle_time (it would start over as a new queue anyway).
TEST(BfqQueues, FreedWhenTheContextGoesQuiet) {
  BfqSim sim;
  auto a = make_ioc(), b = make_ioc();
  sim.submit(a.get(), 0, 8);
  sim.submit(b.get(), 1000, 8);
  sim.submit(a.get(), 0, 8, ReqOp::write);  // async: a shared queue of its own
  EXPECT_EQ(bfq_stats(&sim.q()).queues_alive, 3u);
  for (int i = 0; i < 10 && sim.ended() < 3; i++) {
    if (!sim.serve_one(100).first) {
      sim.advance_ms(30);
    }
  }
  ASSERT_EQ(sim.ended(), 3);
  sim.advance_ms(1000);
  EXPECT_EQ(sim.dispatch(), nullptr);
  EXPECT_EQ(bfq_stats(&sim.q()).queues_alive, 3u) << "kept while recent";
  sim.advance_ms(1500);
  EXPECT_EQ(sim.dispatch(), nullptr);  // the dispatch path sweeps
  BfqStats st = bfq_stats(&sim.q());
  EXPECT_EQ(st.queues_alive, 0u);
  EXPECT_EQ(st.queues_freed, 3u);
  // The context comes back: a new queue, weight raised as a newcomer.
  sim.submit(a.get(), 64, 8);
  EXPECT_EQ(bfq_queue_info(&sim.q(), a.get()).wr_coeff, 30u);
}

}  // namespace
}  // namespace blkmq::test
