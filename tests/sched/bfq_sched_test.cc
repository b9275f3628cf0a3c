// bfq's scheduling decisions, step by step at manual times (bfq_test_util.h):
// weights, classes, idling, weight raising, budgets, FIFO expiry and
// injection. Every test asserts numbers that a broken scheduler misses.
#include <algorithm>
#include <cstdio>
#include <map>

#include "support/bfq_test_util.h"

namespace blkmq::test {
namespace {

class BfqSchedTest : public ::testing::TestWithParam<BfqInsert> {};

// Two backlogged contexts, weights 200 and 100: sectors served 2:1.
TEST_P(BfqSchedTest, WeightsShareServiceTwoToOne) {
  BfqSim sim(GetParam());
  sim.set("low_latency", "0");
  sim.set("max_budget", "2048");  // short slots: the share converges in a short window
  auto a = make_ioc(200), b = make_ioc(100);
  Stream sa{a.get(), 0}, sb{b.get(), 65536};
  sa.fill(sim, 8);
  sb.fill(sim, 8);
  std::map<const IoContext*, uint64_t> served;
  for (int i = 0; i < 3000; i++) {
    auto [ctx, sectors] = sim.serve_one(100);
    ASSERT_NE(ctx, nullptr) << "step " << i;
    served[ctx] += sectors;
    (ctx == a.get() ? sa : sb).one(sim);
  }
  const double ratio = static_cast<double>(served[a.get()]) / static_cast<double>(served[b.get()]);
  std::printf("[          ] weights 200:100 -> sectors %.3f:1\n", ratio);
  EXPECT_NEAR(ratio, 2.0, 0.2) << served[a.get()] << " vs " << served[b.get()];
  EXPECT_EQ(bfq_queue_info(&sim.q(), a.get()).orig_weight, 80u);  // BE4 = 40, x 200/100
  EXPECT_EQ(bfq_queue_info(&sim.q(), b.get()).orig_weight, 40u);
}

// ioprio levels weigh too: BE0 (80) against BE4 (40).
TEST(BfqSched, IoprioLevelsShareServiceByWeight) {
  BfqSim sim;
  sim.set("low_latency", "0");
  sim.set("max_budget", "2048");
  auto a = make_ioc(100, ioprio_value(IoprioClass::be, 0)), b = make_ioc(100, ioprio_value(IoprioClass::be, 4));
  Stream sa{a.get(), 0}, sb{b.get(), 65536};
  sa.fill(sim, 8);
  sb.fill(sim, 8);
  std::map<const IoContext*, uint64_t> served;
  for (int i = 0; i < 3000; i++) {
    auto [ctx, sectors] = sim.serve_one(100);
    ASSERT_NE(ctx, nullptr);
    served[ctx] += sectors;
    (ctx == a.get() ? sa : sb).one(sim);
  }
  const double ratio = static_cast<double>(served[a.get()]) / static_cast<double>(served[b.get()]);
  EXPECT_NEAR(ratio, 2.0, 0.2);
}

// A sequential reader with one request at a time and a think time of
// 1 ms, against a backlogged seeky reader, on a device that queues one
// request at a time. The reader has nothing queued or in flight 90 % of
// the time, so it is not I/O bound (bfq_update_io_intensity: busy under
// 80 % of the window). Idling for it still boosts throughput on a
// rotational device without queueing (a seek saved per request), so with
// slice_idle (8 ms) its queue stays in service while it thinks, for its
// whole budget timeout; on a non-rotational one, or without idling, its
// queue expires after every request and it gets one request per slot of
// the other, or per preemption: a queue that is not worth idling for is
// preempted by any queue that becomes busy. The estimated peak rate (64
// sectors per 100 us here) makes max_budget (17.8k sectors) what the
// device moves in one timeout. With idling the reader's slots last its
// budget timeout (125 ms, about 114 requests, 7.3k sectors) and are
// charged as max_budget for the time they held the device, while the
// seeky reader moves max_budget in 28 ms: the reader's share is about
// 7.3 / (7.3 + 17.8) = 0.29. Without idling it gets one request per ten
// of the other's, 0.09.
struct SequentialShare {
  double share = 0;
  bool io_bound = true;
};
SequentialShare sequential_share(uint64_t slice_idle_ms, bool rotational) {
  BfqSim sim(BfqInsert::locked, 256, rotational);
  sim.set("low_latency", "0");
  sim.set("slice_idle", std::to_string(slice_idle_ms));
  auto a = make_ioc(), b = make_ioc();
  uint64_t a_next = 0, b_seed = 12345;
  auto b_one = [&] {
    b_seed = b_seed * 6364136223846793005ull + 1442695040888963407ull;
    sim.submit(b.get(), 65536 + (b_seed >> 33) % 60000, 64);
  };
  sim.submit(a.get(), a_next, 64);
  for (int i = 0; i < 16; i++) b_one();
  uint64_t sa = 0, sb = 0, a_due = 0;
  bool a_pending = true;
  for (int i = 0; i < 3000; i++) {
    if (!a_pending && sim.now_ns() >= a_due) {
      a_next += 64;
      sim.submit(a.get(), a_next % 60000, 64);
      a_pending = true;
    }
    auto [ctx, sectors] = sim.serve_one(100);
    if (!ctx) {  // idling for a: time passes, a may issue, the timer may fire
      sim.advance_us(500);
      continue;
    }
    if (ctx == a.get()) {
      sa += sectors;
      a_pending = false;
      a_due = sim.now_ns() + 1 * kBfqMs;
    } else {
      sb += sectors;
      b_one();
    }
  }
  EXPECT_EQ(bfq_stats(&sim.q()).hw_tag, 0);  // one request at a time: no queueing seen
  return {static_cast<double>(sa) / static_cast<double>(sa + sb), bfq_queue_info(&sim.q(), a.get()).io_bound};
}

TEST(BfqSched, IdlingKeepsTheSequentialReadersShare) {
  const SequentialShare with_idle = sequential_share(8, true);
  const SequentialShare without = sequential_share(0, true);
  std::printf("[          ] sequential reader's share: %.3f with slice_idle=8, %.3f without\n", with_idle.share,
              without.share);
  EXPECT_FALSE(with_idle.io_bound) << "idle 90 % of the time";
  EXPECT_GT(with_idle.share, 0.13) << "slice_idle=8";
  EXPECT_GT(with_idle.share, 1.6 * without.share) << "idling keeps the reader's slot";
  EXPECT_LT(without.share, 0.12) << "slice_idle=0";
}

// The same reader on a non-rotational device: no seek to save, and a
// queue that is not I/O bound gains nothing from idling, so bfq does not
// idle for it (idling_boosts_thr_without_issues), whatever slice_idle is.
TEST(BfqSched, ThinkingReaderIsNotIdledForOnANonRotationalDevice) {
  const SequentialShare nonrot = sequential_share(8, false);
  const SequentialShare rot = sequential_share(8, true);
  std::printf("[          ] thinking reader's share with slice_idle=8: %.3f non-rotational, %.3f rotational\n",
              nonrot.share, rot.share);
  EXPECT_FALSE(nonrot.io_bound);
  EXPECT_LT(nonrot.share, 0.12);
  EXPECT_GT(rot.share, 1.6 * nonrot.share);
}

// Serves `n` requests of a backlogged context, refilling it.
void serve_backlogged(BfqSim& sim, Stream& s, int n, uint64_t us) {
  for (int i = 0; i < n; i++) {
    auto [ctx, sectors] = sim.serve_one(us);
    ASSERT_EQ(ctx, s.ctx);
    s.one(sim);
  }
}

// A context that starts doing I/O is weight raised (interactive) with
// low_latency=1 and served ahead of a long-running one; with
// low_latency=0 it is not.
void newcomer(bool low_latency) {
  BfqSim sim;
  sim.set("low_latency", low_latency ? "1" : "0");
  auto b = make_ioc(), a = make_ioc();
  Stream sb{b.get(), 65536};
  sb.fill(sim, 16);
  serve_backlogged(sim, sb, 20, 100);
  sim.advance_ms(5000);  // past the interactive raising time of b itself
  serve_backlogged(sim, sb, 20, 100);
  EXPECT_EQ(bfq_queue_info(&sim.q(), b.get()).wr_coeff, 1u);
  EXPECT_TRUE(bfq_queue_info(&sim.q(), b.get()).in_service);
  sim.submit(a.get(), 0, 8);
  BfqQueueInfo ai = bfq_queue_info(&sim.q(), a.get());
  ASSERT_TRUE(ai.found);
  auto [ctx, sectors] = sim.serve_one(100);
  if (low_latency) {
    EXPECT_EQ(ai.wr_coeff, 30u);
    EXPECT_EQ(ai.weight, 40u * 30u);
    EXPECT_EQ(ctx, a.get()) << "the raised newcomer preempts";
    EXPECT_EQ(bfq_stats(&sim.q()).expired[static_cast<unsigned>(BfqExpire::preempted)], 1u);
  } else {
    EXPECT_EQ(ai.wr_coeff, 1u);
    EXPECT_EQ(ai.weight, 40u);
    EXPECT_EQ(ctx, b.get()) << "b keeps its slot";
  }
}

TEST(BfqSched, NewcomerIsWeightRaisedWithLowLatency) { newcomer(true); }
TEST(BfqSched, NewcomerIsNotRaisedWithoutLowLatency) { newcomer(false); }

TEST(BfqSched, LowLatencyOffEndsRaising) {
  BfqSim sim;
  auto a = make_ioc();
  sim.submit(a.get(), 0, 8);
  EXPECT_EQ(bfq_queue_info(&sim.q(), a.get()).wr_coeff, 30u);
  sim.set("low_latency", "0");
  EXPECT_EQ(bfq_queue_info(&sim.q(), a.get()).wr_coeff, 1u);
}

// Large bursts (bfq_handle_burst): eight sync queues created within
// 180 ms make a large burst. The seven raised before it became large lose
// their raising at their next dispatch, and none that follows is raised.
// Queues created one by one, slower than that, are each raised.
TEST(BfqSched, LargeBurstOfNewQueuesIsNotRaised) {
  BfqSim sim;
  std::vector<std::shared_ptr<IoContext>> burst;
  for (int i = 0; i < 10; i++) {
    burst.push_back(make_ioc());
    sim.submit(burst.back().get(), 4096 * i, 8);
    sim.advance_ms(10);
  }
  EXPECT_EQ(bfq_queue_info(&sim.q(), burst[0].get()).wr_coeff, 30u) << "raised until the burst is large";
  EXPECT_EQ(bfq_queue_info(&sim.q(), burst[9].get()).wr_coeff, 1u) << "joined a large burst";
  while (sim.serve_one(0).first) {
  }
  for (size_t i = 0; i < burst.size(); i++)
    EXPECT_EQ(bfq_queue_info(&sim.q(), burst[i].get()).wr_coeff, 1u) << "queue " << i;

  sim.advance_ms(500);  // the burst is over
  std::vector<std::shared_ptr<IoContext>> spaced;
  for (int i = 0; i < 3; i++) {
    spaced.push_back(make_ioc());
    sim.submit(spaced.back().get(), 65536 + 4096 * i, 8);
    const BfqQueueInfo info = bfq_queue_info(&sim.q(), spaced.back().get());
    EXPECT_EQ(info.wr_coeff, 30u) << "spaced queue " << i << " found " << info.found << " busy " << info.busy << " queued " << info.queued;
    ASSERT_NE(sim.serve_one(0).first, nullptr);
    sim.advance_ms(300);
  }
}

// A context doing a little I/O at a steady low rate (8 sectors every
// 50 ms, far under 7000 sectors/s) is raised as soft real-time once its
// interactive raising has run out: coefficient 30 x 100.
TEST(BfqSched, SteadyLowRateReaderIsSoftRealTime) {
  BfqSim sim;
  auto a = make_ioc();
  unsigned max_coeff_after_interactive = 0;
  for (int i = 0; i < 100; i++) {
    sim.submit(a.get(), 64 * i, 8);
    const unsigned coeff = bfq_queue_info(&sim.q(), a.get()).wr_coeff;
    if (i == 0) {
      EXPECT_EQ(coeff, 30u) << "new: interactive";
    }
    if (i * 50 > 4000) max_coeff_after_interactive = std::max(max_coeff_after_interactive, coeff);
    ASSERT_NE(sim.serve_one(100).first, nullptr);
    // The only busy queue is idled for; the idle slice (8 ms) ends it
    // (too_idle), and its next request, 50 ms after, is a new activation.
    sim.advance_ms(9);
    sim.advance_ms(41);
  }
  EXPECT_EQ(max_coeff_after_interactive, 3000u);
  EXPECT_GE(bfq_stats(&sim.q()).wr_started, 2u);
}

// strict_guarantees keeps at most one request in the driver.
TEST(BfqSched, StrictGuaranteesOneRequestInTheDriver) {
  BfqSim sim;
  auto a = make_ioc();
  for (int i = 0; i < 4; i++) sim.submit(a.get(), 64 * i, 8);
  Request* r1 = sim.dispatch();
  ASSERT_NE(r1, nullptr);
  Request* r2 = sim.dispatch();
  EXPECT_NE(r2, nullptr) << "without strict_guarantees the queue keeps going";
  sim.set("strict_guarantees", "1");
  EXPECT_EQ(sim.dispatch(), nullptr);
  sim.complete(r1);
  EXPECT_EQ(sim.dispatch(), nullptr);
  if (r2) sim.complete(r2);
  Request* r3 = sim.dispatch();
  ASSERT_NE(r3, nullptr);
  sim.complete(r3);
}

// A queue that uses up its budget gets four times as much next time
// (capped at max_budget).
TEST(BfqSched, ExhaustedBudgetGrows) {
  BfqSim sim;
  sim.set("low_latency", "0");
  auto a = make_ioc();
  Stream s{a.get(), 0};
  s.fill(sim, 8);
  EXPECT_EQ(bfq_queue_info(&sim.q(), a.get()).max_budget, 2u * 16384 / 3);
  const auto exhausted = [&] { return bfq_stats(&sim.q()).expired[static_cast<unsigned>(BfqExpire::budget_exhausted)]; };
  int n = 0;
  for (; n < 1000 && exhausted() == 0; n++) serve_backlogged(sim, s, 1, 100);
  EXPECT_EQ(exhausted(), 1u);
  // 10922 sectors of budget, 64 per request: the 171st does not fit.
  EXPECT_EQ(n, 171);
  EXPECT_EQ(bfq_queue_info(&sim.q(), a.get()).max_budget, 16384u);
}

// A slow queue is expired at timeout_sync, charged time (so it cannot
// hold the device longer by being slow) and gets a doubled budget; the
// other queue goes next.
TEST(BfqSched, BudgetTimeoutExpiresSlowQueue) {
  BfqSim sim;
  sim.set("low_latency", "0");
  auto a = make_ioc(), b = make_ioc();
  Stream sa{a.get(), 0}, sb{b.get(), 65536};
  sa.fill(sim, 8);
  sb.fill(sim, 8);
  auto [first, s1] = sim.serve_one(50 * 1000);
  ASSERT_NE(first, nullptr);
  Stream& slow = first == a.get() ? sa : sb;
  slow.one(sim);
  const auto timeouts = [&] { return bfq_stats(&sim.q()).expired[static_cast<unsigned>(BfqExpire::budget_timeout)]; };
  int n = 1;
  for (; n < 10 && timeouts() == 0; n++) serve_backlogged(sim, slow, 1, 50 * 1000);
  EXPECT_EQ(timeouts(), 1u);
  EXPECT_EQ(n, 3) << "125 ms at 50 ms a request";
  EXPECT_EQ(bfq_queue_info(&sim.q(), slow.ctx).max_budget, 16384u);
  auto [next, s2] = sim.serve_one(100);
  EXPECT_NE(next, slow.ctx);
}

// RT is served before BE, even when it arrives during a BE slot.
TEST(BfqSched, RealTimeBeforeBestEffort) {
  BfqSim sim;
  sim.set("low_latency", "0");
  auto be = make_ioc(), rt = make_ioc(100, rt_prio());
  Stream sbe{be.get(), 65536}, srt{rt.get(), 0};
  sbe.fill(sim, 8);
  serve_backlogged(sim, sbe, 3, 100);
  srt.fill(sim, 8);
  for (int i = 0; i < 8; i++) {
    auto [ctx, sectors] = sim.serve_one(100);
    EXPECT_EQ(ctx, rt.get()) << i;
  }
  // Two classes busy: bfq idles for the drained RT queue (no injection:
  // its limit was never probed), and best effort goes when the slice ends.
  EXPECT_EQ(sim.serve_one(100).first, nullptr);
  sim.advance_ms(9);
  auto [ctx, sectors] = sim.serve_one(100);
  EXPECT_EQ(ctx, be.get());
}

// The idle class gets the device only when nothing else wants it, except
// for one slot after BFQ_CL_IDLE_TIMEOUT (200 ms) without service.
TEST(BfqSched, IdleClassOnlyWhenOthersAreIdle) {
  BfqSim sim;
  sim.set("low_latency", "0");
  auto be = make_ioc(), idle = make_ioc(100, idle_prio());
  Stream sbe{be.get(), 65536}, sid{idle.get(), 0};
  sbe.fill(sim, 8);
  sid.fill(sim, 8);
  int idle_served = 0;
  uint64_t first_idle_ms = 0;
  for (int ms = 0; ms < 500; ms++) {
    auto [ctx, sectors] = sim.serve_one(1000);
    ASSERT_NE(ctx, nullptr);
    if (ctx == idle.get()) {
      if (!idle_served++) first_idle_ms = ms;
      sid.one(sim);
    } else {
      sbe.one(sim);
    }
  }
  EXPECT_GE(idle_served, 1);
  EXPECT_LE(idle_served, 3);
  EXPECT_GE(first_idle_ms, 200u);
  // Once the best-effort context stops, the idle class runs (after bfq
  // idled for the best-effort queue: two classes busy is asymmetric).
  int got = 0;
  for (int i = 0; i < 40 && got < 4; i++) {
    auto [ctx, sectors] = sim.serve_one(100);
    if (!ctx) {
      sim.advance_ms(9);
    } else if (ctx == idle.get()) {
      got++;
      sid.one(sim);
    }
  }
  EXPECT_EQ(got, 4);
}

// The FIFO head goes first once fifo_expire_sync has passed; before that
// the request nearest the head position does.
uint64_t first_sector(uint64_t wait_ms) {
  BfqSim sim;
  sim.set("low_latency", "0");
  auto a = make_ioc();
  sim.submit(a.get(), 50000, 8);
  sim.advance_ms(10);
  for (int i = 0; i < 4; i++) sim.submit(a.get(), 1000 + 64 * i, 8);
  sim.advance_ms(wait_ms);
  Request* rq = sim.dispatch();
  const uint64_t s = rq ? rq->sector : 0;
  if (rq) sim.complete(rq);
  return s;
}

TEST(BfqSched, FifoExpiryServesTheOldestFirst) {
  EXPECT_EQ(first_sector(0), 1000u);
  EXPECT_EQ(first_sector(200), 50000u);
}

// Back seeks: a request behind the head within back_seek_max costs
// back_seek_penalty times its distance.
TEST(BfqSched, BackSeekPenaltyChoosesTheNextRequest) {
  BfqSim sim;
  sim.set("low_latency", "0");
  auto a = make_ioc();
  sim.submit(a.get(), 10000, 8);
  Request* rq = sim.dispatch();  // head now at 10008
  ASSERT_NE(rq, nullptr);
  sim.submit(a.get(), 10008 - 100, 8);  // 100 behind: costs 200
  sim.submit(a.get(), 10008 + 150, 8);  // 150 ahead
  sim.complete(rq);
  rq = sim.dispatch();
  ASSERT_NE(rq, nullptr);
  EXPECT_EQ(rq->sector, 10008u + 150);
  sim.complete(rq);
  sim.set("back_seek_penalty", "1");
  sim.submit(a.get(), 10166 + 10, 8);  // head at 10166: 10 ahead vs 258 behind
  rq = sim.dispatch();
  ASSERT_NE(rq, nullptr);
  EXPECT_EQ(rq->sector, 10176u);
  sim.complete(rq);
}

// While the in-service queue idles for service guarantees (it has the
// higher weight), another queue's request is injected, within its
// inject_limit of requests in the driver.
TEST(BfqSched, InjectionWhileIdling) {
  BfqSim sim;
  sim.set("low_latency", "0");
  sim.set("slice_idle", "20");  // still idling 11 ms on, when a's request comes
  auto a = make_ioc(200), b = make_ioc(100);
  sim.submit(a.get(), 0, 8);
  for (int i = 0; i < 4; i++) sim.submit(b.get(), 65536 + 64 * i, 8);
  auto [first, s1] = sim.serve_one(100);
  ASSERT_EQ(first, a.get());
  BfqQueueInfo ai = bfq_queue_info(&sim.q(), a.get());
  EXPECT_TRUE(ai.in_service);
  EXPECT_TRUE(ai.wait_request) << "idling for a";
  EXPECT_EQ(ai.inject_limit, 0u) << "not probed: a's request came before a was in service";
  // a's next request finds a in service and the driver empty, 10 ms after
  // its limit last changed: that request is timed and, alone in the
  // driver, gives the baseline and a limit of one.
  sim.advance_ms(11);
  sim.submit(a.get(), 64, 8);
  auto [second, s2] = sim.serve_one(100);
  ASSERT_EQ(second, a.get());
  ai = bfq_queue_info(&sim.q(), a.get());
  EXPECT_TRUE(ai.wait_request) << "idling for a";
  EXPECT_EQ(ai.inject_limit, 1u);
  Request* inj = sim.dispatch();
  ASSERT_NE(inj, nullptr);
  EXPECT_EQ(inj->ioc, b.get());
  EXPECT_EQ(bfq_stats(&sim.q()).injected, 1u);
  EXPECT_TRUE(bfq_queue_info(&sim.q(), a.get()).in_service);
  EXPECT_EQ(sim.dispatch(), nullptr) << "the limit is one request in the driver";
  sim.submit(a.get(), 128, 8);
  Request* rq = sim.dispatch();
  ASSERT_NE(rq, nullptr);
  EXPECT_EQ(rq->ioc, a.get());
  sim.complete(inj);
  sim.complete(rq);
}

// Regression (issue 10, bfq shares of random readers): a queue emptied by
// an injection left the busy set before its request counted as dispatched,
// so it dropped out of the weights and, busy again while that request was
// still in the driver, stayed out. Readers of weights 80 and 40 then looked
// alike to bfq and preempted each other by turns.
TEST(BfqSched, InjectedQueueKeepsItsWeightCounted) {
  BfqSim sim;
  sim.set("low_latency", "0");
  sim.set("slice_idle", "20");  // still idling 11 ms on, when a's request comes
  auto a = make_ioc(200), b = make_ioc(100);
  sim.submit(a.get(), 0, 8);
  sim.submit(b.get(), 65536, 8);
  ASSERT_EQ(sim.serve_one(100).first, a.get());
  sim.advance_ms(11);
  sim.submit(a.get(), 64, 8);
  ASSERT_EQ(sim.serve_one(100).first, a.get());  // probed: a limit of one
  ASSERT_EQ(bfq_queue_info(&sim.q(), a.get()).inject_limit, 1u);
  Request* inj = sim.dispatch();
  ASSERT_NE(inj, nullptr);
  ASSERT_EQ(inj->ioc, b.get());
  BfqQueueInfo bi = bfq_queue_info(&sim.q(), b.get());
  EXPECT_FALSE(bi.busy);
  EXPECT_EQ(bi.dispatched, 1u);
  EXPECT_TRUE(bi.in_weights) << "emptied with its request in the driver";
  sim.submit(b.get(), 65600, 8);  // busy again before that request completes
  EXPECT_TRUE(bfq_queue_info(&sim.q(), b.get()).in_weights);
  sim.complete(inj);
  EXPECT_TRUE(bfq_queue_info(&sim.q(), b.get()).in_weights) << "busy";
}

// Interactive (and soft real-time) raising is for queues of the default
// weight only, as the kernel checks new_weight == 40: a BE0 reader, or one
// whose context weight was raised, already has the share it asked for.
// Raising both readers of a BE0/BE4 pair made them alike for seconds.
TEST(BfqSched, OnlyDefaultWeightQueuesAreRaisedAsInteractive) {
  BfqSim sim;
  auto be0 = make_ioc(100, ioprio_value(IoprioClass::be, 0));
  auto heavy = make_ioc(200);
  auto plain = make_ioc();
  sim.submit(be0.get(), 0, 8);
  sim.submit(heavy.get(), 65536, 8);
  sim.submit(plain.get(), 32768, 8);
  EXPECT_EQ(bfq_queue_info(&sim.q(), be0.get()).wr_coeff, 1u);
  EXPECT_EQ(bfq_queue_info(&sim.q(), heavy.get()).wr_coeff, 1u);
  EXPECT_EQ(bfq_queue_info(&sim.q(), plain.get()).wr_coeff, 30u);
}

// The peak-rate estimator (bfq_update_peak_rate): a sequential reader whose
// 128 KiB requests take 100 us each moves 2.56 sectors/us; after a few
// one-second intervals the estimate is there, and max_budget is what that
// rate moves in one budget timeout (125 ms). A slower seeky phase does not
// pull the peak down: only a mostly sequential or a faster interval counts.
TEST(BfqSched, PeakRateFollowsTheDeviceAndSetsMaxBudget) {
#ifdef __SANITIZE_THREAD__
  // One thread and fake time: nothing for TSan to see, and 15 s of CI under it.
  GTEST_SKIP() << "single-threaded simulation; the release and ASan suites run it";
#endif
  BfqSim sim;
  sim.set("low_latency", "0");
  auto a = make_ioc();
  EXPECT_EQ(bfq_stats(&sim.q()).max_budget, 16384u) << "the default before any estimate";
  const uint64_t want = (256ull << 16) / 100;  // sectors/us << 16
  uint64_t sector = 0;
  for (int i = 0; i < 50000; i++) {  // 5 s of fake time
    sim.submit(a.get(), sector, 256);
    sector = (sector + 256) % 65536;
    ASSERT_EQ(sim.serve_one(100).first, a.get()) << i;
  }
  BfqStats st = bfq_stats(&sim.q());
  EXPECT_NEAR(static_cast<double>(st.peak_rate), static_cast<double>(want), 0.1 * want);
  EXPECT_NEAR(static_cast<double>(st.max_budget), static_cast<double>((st.peak_rate * 1000 * 125) >> 16), 1.0);
  const uint64_t peak = st.peak_rate;
  for (int i = 0; i < 10000; i++) {  // 2 s of seeky 4 KiB reads, 200 us each
    sim.submit(a.get(), (uint64_t(i) * 7919 * 64) % 65536, 8);
    ASSERT_EQ(sim.serve_one(200).first, a.get()) << i;
  }
  // (The sequential interval open at the switch may still raise it.)
  EXPECT_GE(bfq_stats(&sim.q()).peak_rate, peak);
  EXPECT_LE(static_cast<double>(bfq_stats(&sim.q()).peak_rate), 1.1 * want);
}

// bfq_bfqq_is_slow: a seeky queue's slot shorter than 1 ms is charged as
// BFQ_MIN_TT (2 ms) of max_budget on a non-rotational device (one seek,
// 8 ms, on a rotational one), not as its few microseconds, so a light
// seeky reader given a slot whenever a heavier one pauses pays for it.
TEST(BfqSched, ShortSlotOfASeekyQueueIsChargedAtLeastMinTt) {
  BfqSim sim;
  sim.set("low_latency", "0");
  auto a = make_ioc();
  for (uint64_t i = 0; i < 32; i++) sim.submit(a.get(), i * 3000, 8);  // 3000 sectors apart: seeky
  for (int i = 0; i < 32; i++) ASSERT_EQ(sim.serve_one(10).first, a.get()) << i;
  // The only busy queue is idled for; the idle slice expires it, its slot
  // ending where idling began: 320 us of service, 256 sectors.
  EXPECT_GE(sim.advance_ms(9), 1u) << "the idle timer did not fire";
  EXPECT_EQ(bfq_stats(&sim.q()).expired[static_cast<unsigned>(BfqExpire::too_idle)], 1u);
  EXPECT_EQ(bfq_queue_info(&sim.q(), a.get()).last_charge, 16384u * 2 / 125);
}

// Without a reason to idle for service guarantees, and with idling not
// worth it, the empty in-service queue is expired and the other served.
TEST(BfqSched, NoIdlingForEqualWeightsOnQueueingDevice) {
  BfqSim sim;
  sim.set("low_latency", "0");
  auto a = make_ioc(), b = make_ioc();
  sim.submit(a.get(), 0, 8);
  for (int i = 0; i < 4; i++) sim.submit(b.get(), 65536 + 64 * i, 8);
  auto [first, s1] = sim.serve_one(100);
  ASSERT_NE(first, nullptr);
  // hw_tag unknown counts as a queueing device: no throughput reason to idle.
  const IoContext* other = first == a.get() ? b.get() : a.get();
  auto [second, s2] = sim.serve_one(100);
  if (first == a.get()) {
    EXPECT_EQ(second, other);
  }
  EXPECT_EQ(bfq_stats(&sim.q()).injected, 0u);
}

// Every request inserted is dispatched once, in every insert mode, with
// merges: sequential 4 KiB bios merge into larger requests.
TEST_P(BfqSchedTest, EveryRequestDispatchedOnceWithMerges) {
  BfqSim sim(GetParam());
  auto a = make_ioc(), b = make_ioc(300), c = make_ioc(100, rt_prio());
  for (int i = 0; i < 64; i++) {
    sim.submit(a.get(), 8 * i, 8);
    sim.submit(b.get(), 40000 + 8 * i, 8, ReqOp::write);
    sim.submit(c.get(), 80000 + 16 * i, 8);
  }
  uint64_t sectors = 0;
  for (int i = 0; i < 400 && sim.ended() < sim.submitted(); i++) {
    auto [ctx, s] = sim.serve_one(100);
    if (!ctx) {
      sim.advance_ms(30);
      continue;
    }
    sectors += s;
  }
  EXPECT_EQ(sim.ended(), sim.submitted());
  EXPECT_EQ(sectors, 3u * 64 * 8);
  BfqStats st = bfq_stats(&sim.q());
  EXPECT_LT(st.dispatched, 3u * 64) << "adjacent bios merged";
  if (GetParam() == BfqInsert::split_parked) {
    EXPECT_GT(st.deferred_inserts, 0u);
  }
  if (GetParam() == BfqInsert::locked) {
    EXPECT_EQ(st.deferred_inserts, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, BfqSchedTest,
                         ::testing::Values(BfqInsert::locked, BfqInsert::split, BfqInsert::split_parked),
                         bfq_mode_name);

}  // namespace
}  // namespace blkmq::test
