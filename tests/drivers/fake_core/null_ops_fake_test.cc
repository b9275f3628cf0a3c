// The null driver's ops driven directly against the fake core: every
// queue_rq path, poll, timeout, faults, throttling, memory transfers and
// setup/teardown. Built by tests/drivers/fake_core/run.sh, not by CMake
// (the real core defines the same symbols).
#include <gtest/gtest.h>

#include <cstring>

#include "drivers/null/null_dev.h"
#include "fake_core.h"

namespace blkmq {
namespace {

using fake::rec;

class NullOps : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }

  std::unique_ptr<Device> make(const ParamMap& p) {
    auto r = nullb::NullDevice::create(p);
    EXPECT_TRUE(r.is_ok()) << (r ? "" : r.status().message());
    return r ? std::move(*r) : nullptr;
  }
  static BlkStatus issue(Device& d, Request* rq, bool last = true) {
    return fake::ops(d.queue()).queue_rq(rq->mq_hctx, QueueData{rq, last});
  }
  static Request* rq_on(Device& d, unsigned hctx, unsigned i, ReqOp op = ReqOp::read,
                        uint64_t sector = 0, uint32_t len = 4096) {
    Request* rq = fake::fake(d.queue()).request(hctx, i);
    rq->op = op;
    rq->sector = sector;
    rq->data_len = len;
    rq->bio = nullptr;
    rq->cmd_flags = 0;
    return rq;
  }
};

TEST_F(NullOps, SetupBuildsHctxsWithDriverData) {
  auto d = make({});
  ASSERT_TRUE(d);
  auto& q = fake::fake(d->queue());
  ASSERT_EQ(q.hctxs.size(), 2u);  // submit 1 + poll 1
  EXPECT_EQ(q.hctxs[1]->type, HctxType::poll);
  for (auto& h : q.hctxs) EXPECT_NE(h->driver_data, nullptr);
  EXPECT_EQ(queue_data(&d->queue()), d.get());
  EXPECT_EQ(q.set->config().timeout_ms, 5000u);
  EXPECT_EQ(q.set->config().nr_queues[0], 1u);
  EXPECT_EQ(q.set->config().nr_queues[2], 1u);
  EXPECT_GE(q.set->config().cmd_size, sizeof(nullb::NullCmd));
  EXPECT_EQ(q.cfg.name, "nullb0");
}

TEST_F(NullOps, IrqModeNoneEndsInline) {
  auto d = make({{"irqmode", "0"}});
  Request* rq = rq_on(*d, 0, 0);
  EXPECT_EQ(issue(*d, rq), BlkStatus::ok);
  EXPECT_EQ(rec().started, 1);
  ASSERT_EQ(rec().ended.size(), 1u);
  EXPECT_EQ(rec().ended[0].st, BlkStatus::ok);
  EXPECT_EQ(rec().ended[0].ctx, ExecContext::task);
  EXPECT_EQ(rec().completes, 0);
}

TEST_F(NullOps, IrqModeSoftirqRoutesThroughComplete) {
  auto d = make({});
  EXPECT_EQ(issue(*d, rq_on(*d, 0, 0)), BlkStatus::ok);
  EXPECT_EQ(rec().completes, 1);
  ASSERT_EQ(rec().ended.size(), 1u);
}

TEST_F(NullOps, IrqModeTimerEndsInHardirqFromTheTimer) {
  auto d = make({{"irqmode", "2"}});
  Request* rq = rq_on(*d, 0, 0);
  EXPECT_EQ(issue(*d, rq), BlkStatus::ok);
  EXPECT_TRUE(rec().ended.empty());
  EXPECT_EQ(fake::fire_timers(), 1);
  ASSERT_EQ(rec().ended.size(), 1u);
  EXPECT_EQ(rec().ended[0].ctx, ExecContext::hardirq);
  EXPECT_EQ(rec().ended[0].st, BlkStatus::ok);
  // Reused: the timer is re-armed, not re-bound.
  EXPECT_EQ(issue(*d, rq), BlkStatus::ok);
  EXPECT_EQ(fake::fire_timers(), 1);
  EXPECT_EQ(rec().ended.size(), 2u);
}

TEST_F(NullOps, QueueRqsIssuesAllAndLeavesFailures) {
  auto d = make({{"irqmode", "0"}, {"requeue", "2,100,0,2"}});
  RqList list;
  for (unsigned i = 0; i < 6; i++) list.push_back(rq_on(*d, 0, i));
  fake::ops(d->queue()).queue_rqs(&list);
  // Calls 2 and 4 hit the fault: the first returns resource (left in the
  // list), the second is requeued by the driver (gone, ok).
  EXPECT_EQ(list.count, 1u);
  EXPECT_EQ(list.head, fake::fake(d->queue()).request(0, 1));
  EXPECT_EQ(rec().requeued, 1);
  EXPECT_EQ(rec().ended.size(), 4u);
}

TEST_F(NullOps, RequeueFaultAlternates) {
  auto d = make({{"irqmode", "0"}, {"requeue", "1,100,0,4"}});
  Request* rq = rq_on(*d, 0, 0);
  EXPECT_EQ(issue(*d, rq), BlkStatus::resource);
  EXPECT_EQ(issue(*d, rq), BlkStatus::ok);
  EXPECT_EQ(rec().requeued, 1);
  EXPECT_EQ(issue(*d, rq), BlkStatus::resource);
  EXPECT_EQ(issue(*d, rq), BlkStatus::ok);
  EXPECT_EQ(rec().requeued, 2);
  EXPECT_EQ(rec().started, 0);  // never started while faulted
  EXPECT_EQ(issue(*d, rq), BlkStatus::ok);
  EXPECT_EQ(rec().ended.size(), 1u);
}

TEST_F(NullOps, TimeoutFaultNeverCompletesUntilTheTimeoutHook) {
  for (const char* mode : {"0", "1", "2"}) {
    fake::reset();
    auto d = make({{"irqmode", mode}, {"timeout_inject", "1,100,0,1"}});
    Request* rq = rq_on(*d, 0, 0);
    EXPECT_EQ(issue(*d, rq), BlkStatus::ok);
    EXPECT_EQ(rec().started, 1);
    fake::fire_timers();
    EXPECT_TRUE(rec().ended.empty()) << mode;
    EXPECT_EQ(fake::ops(d->queue()).timeout(rq), TimeoutResult::done);
    ASSERT_EQ(rec().ended.size(), 1u);
    EXPECT_EQ(rec().ended[0].st, BlkStatus::timeout);
  }
}

TEST_F(NullOps, RealTimeoutOnTimerModeEndsWithTimeoutWhenTheTimerFires) {
  auto d = make({{"irqmode", "2"}});
  Request* rq = rq_on(*d, 0, 0);
  EXPECT_EQ(issue(*d, rq), BlkStatus::ok);
  EXPECT_EQ(fake::ops(d->queue()).timeout(rq), TimeoutResult::done);
  EXPECT_TRUE(rec().ended.empty());
  fake::fire_timers();
  ASSERT_EQ(rec().ended.size(), 1u);
  EXPECT_EQ(rec().ended[0].st, BlkStatus::timeout);
}

TEST_F(NullOps, PollQueueHoldsUntilPolled) {
  auto d = make({{"irqmode", "0"}});
  HwCtx* ph = fake::fake(d->queue()).hctxs[1].get();
  Request* a = rq_on(*d, 1, 0);
  Request* b = rq_on(*d, 1, 1);
  EXPECT_EQ(issue(*d, a), BlkStatus::ok);
  EXPECT_EQ(issue(*d, b), BlkStatus::ok);
  EXPECT_TRUE(rec().ended.empty());
  IoCompBatch iob;
  EXPECT_EQ(fake::ops(d->queue()).poll(ph, &iob), 2);
  EXPECT_EQ(rec().ended.size(), 2u);
  EXPECT_EQ(fake::ops(d->queue()).poll(ph, &iob), 0);
  // A late timeout on a request the poller took does nothing.
  EXPECT_EQ(fake::ops(d->queue()).timeout(a), TimeoutResult::done);
  EXPECT_EQ(rec().ended.size(), 2u);
}

TEST_F(NullOps, PollRequestTimingOutIsTakenOffTheList) {
  auto d = make({{"irqmode", "0"}});
  HwCtx* ph = fake::fake(d->queue()).hctxs[1].get();
  Request* a = rq_on(*d, 1, 0);
  EXPECT_EQ(issue(*d, a), BlkStatus::ok);
  EXPECT_EQ(fake::ops(d->queue()).timeout(a), TimeoutResult::done);
  ASSERT_EQ(rec().ended.size(), 1u);
  EXPECT_EQ(rec().ended[0].st, BlkStatus::timeout);
  IoCompBatch iob;
  EXPECT_EQ(fake::ops(d->queue()).poll(ph, &iob), 0);
}

TEST_F(NullOps, ThrottleStopsAndTheTickRestarts) {
  auto d = make({{"irqmode", "0"}, {"mbps", "1"}});  // ~20 KiB per tick
  Request* big = rq_on(*d, 0, 0, ReqOp::write, 0, 64 << 10);
  EXPECT_EQ(issue(*d, big), BlkStatus::ok);  // overdraws a positive budget
  Request* next = rq_on(*d, 0, 1, ReqOp::write, 128, 4096);
  EXPECT_EQ(issue(*d, next), BlkStatus::dev_resource);
  EXPECT_TRUE(rec().stopped);
  EXPECT_EQ(rec().started, 1);
  // The debt takes ~3 ticks to pay; then the tick restarts the queues.
  int ticks = 0;
  while (rec().stopped && ticks < 10) {
    fake::fire_timers();
    ticks++;
  }
  EXPECT_FALSE(rec().stopped);
  EXPECT_GE(ticks, 3);
  EXPECT_EQ(issue(*d, next), BlkStatus::ok);
}

TEST_F(NullOps, TeardownLiftsThrottle) {
  auto d = make({{"irqmode", "0"}, {"mbps", "1"}});
  issue(*d, rq_on(*d, 0, 0, ReqOp::write, 0, 64 << 10));
  EXPECT_EQ(issue(*d, rq_on(*d, 0, 1, ReqOp::write, 128, 4096)), BlkStatus::dev_resource);
  d.reset();
  EXPECT_FALSE(rec().stopped);
}

TEST_F(NullOps, MemoryBackedTransfers) {
  auto d = make({{"irqmode", "0"}, {"memory_backed", "1"}, {"size", "4"}, {"discard", "1"},
                 {"cache_size", "1"}});
  std::vector<unsigned char> wbuf(8192), rbuf(8192, 0xEE);
  for (size_t i = 0; i < wbuf.size(); i++) wbuf[i] = static_cast<unsigned char>(i * 13 + 1);
  iovec wv[2] = {{wbuf.data(), 4096}, {wbuf.data() + 4096, 4096}};
  Bio wb;
  wb.op = ReqOp::write;
  wb.vec = wv;
  wb.nr_vecs = 2;
  wb.size = 8192;
  Request* w = rq_on(*d, 0, 0, ReqOp::write, 8, 8192);
  w->bio = w->biotail = &wb;
  EXPECT_EQ(issue(*d, w), BlkStatus::ok);
  iovec rv = {rbuf.data(), 8192};
  Bio rb;
  rb.vec = &rv;
  rb.nr_vecs = 1;
  rb.size = 8192;
  Request* r = rq_on(*d, 0, 1, ReqOp::read, 8, 8192);
  r->bio = r->biotail = &rb;
  EXPECT_EQ(issue(*d, r), BlkStatus::ok);
  EXPECT_EQ(rbuf, wbuf);
  EXPECT_EQ(issue(*d, rq_on(*d, 0, 2, ReqOp::flush, 0, 0)), BlkStatus::ok);
  EXPECT_EQ(issue(*d, rq_on(*d, 0, 3, ReqOp::discard, 8, 8192)), BlkStatus::ok);
  EXPECT_EQ(issue(*d, r), BlkStatus::ok);
  EXPECT_TRUE(std::all_of(rbuf.begin(), rbuf.end(), [](unsigned char c) { return c == 0; }));
  // Past the end: the guard answers even though the core checks first.
  EXPECT_EQ(issue(*d, rq_on(*d, 0, 4, ReqOp::read, (4 << 20) / 512, 4096)), BlkStatus::ok);
  for (auto& e : rec().ended) {
    if (e.rq == fake::fake(d->queue()).request(0, 4)) EXPECT_EQ(e.st, BlkStatus::inval);
    else EXPECT_EQ(e.st, BlkStatus::ok);
  }
}

TEST_F(NullOps, InitHctxFaultFailsAndUnwinds) {
  auto r = nullb::NullDevice::create({{"init_hctx", "1,100,0,1"}});
  EXPECT_FALSE(r.is_ok());
  // Second of four fails; the first is exited (LeakSanitizer checks).
  auto r2 = nullb::NullDevice::create(
      {{"init_hctx", "2,100,0,1"}, {"submit_queues", "2"}, {"poll_queues", "2"}});
  EXPECT_FALSE(r2.is_ok());
  EXPECT_TRUE(make({}));
}

TEST_F(NullOps, SharedTagsShareOneSetAndCheckParameters) {
  auto a = make({{"shared_tags", "1"}});
  auto b = make({{"shared_tags", "1"}, {"irqmode", "2"}});
  ASSERT_TRUE(a && b);
  EXPECT_EQ(fake::fake(a->queue()).set, fake::fake(b->queue()).set);
  auto bad = nullb::NullDevice::create({{"shared_tags", "1"}, {"submit_queues", "2"}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("submit_queues"), std::string::npos);
  // b's irqmode=2 works on the set a created (timer thread made on demand).
  Request* rq = rq_on(*b, 0, 0);
  EXPECT_EQ(issue(*b, rq), BlkStatus::ok);
  EXPECT_EQ(fake::fire_timers(), 1);
  a.reset();
  EXPECT_EQ(issue(*b, rq), BlkStatus::ok);
  EXPECT_EQ(fake::fire_timers(), 1);
  EXPECT_EQ(rec().ended.size(), 2u);
}

TEST_F(NullOps, NamesReuseTheLowestFreeIndex) {
  auto a = make({});
  auto b = make({});
  EXPECT_EQ(fake::fake(b->queue()).cfg.name, "nullb1");
  a.reset();
  auto c = make({});
  EXPECT_EQ(fake::fake(c->queue()).cfg.name, "nullb0");
}

}  // namespace
}  // namespace blkmq
