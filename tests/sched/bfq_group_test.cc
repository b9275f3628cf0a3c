// bfq's group scheduling (issue 28): shares between groups by
// io.bfq.weight, a two-level tree, context weights inside a group, the
// flat case's dispatch order, the io.bfq.weight file, and, with real
// threads, groups removed under I/O and contexts moving between groups.
// The share tests run on the manual clock (bfq_test_util.h): every
// decision is made in the test thread, so the numbers are exact.
#include <atomic>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/iogroup.h"
#include "support/bfq_test_util.h"
#include "support/wait.h"

namespace blkmq::test {
namespace {

// A context of the test's own that belongs to group `path` (made if
// missing) with io.bfq.weight `weight` (0: leave it). Back to the root on
// destruction, so the group can be removed.
struct GroupCtx {
  std::shared_ptr<IoContext> ioc;
  IoGroup* g = nullptr;
  GroupCtx(const std::string& path, unsigned weight, uint16_t ctx_weight = 100) : ioc(make_ioc(ctx_weight)) {
    auto r = io_group_create(path);
    EXPECT_TRUE(r.ok());
    g = *r;
    if (weight) {
      EXPECT_TRUE(io_group_set_bfq_weight(g, weight));
    }
    EXPECT_TRUE(io_context_set_group(ioc.get(), g));
  }
  ~GroupCtx() { (void)io_context_set_group(ioc.get(), nullptr); }
};

// Removes the groups, children first, when the test ends.
struct RemoveGroups {
  std::vector<std::string> paths;
  ~RemoveGroups() {
    for (const std::string& p : paths) EXPECT_TRUE(io_group_remove(p)) << p;
  }
};

// Up to three streams (Stream, support/bfq_test_util.h) fit the stub
// device's 64 MiB at bases 0, 40000 and 80000, each within 36000 sectors.
constexpr uint64_t kSpan = 36000;

// Serves `steps` requests of saturating readers (one stream per context,
// refilled as served) and returns the sectors each context got.
std::map<const IoContext*, uint64_t> serve(BfqSim& sim, std::vector<Stream>& streams, int steps) {
  for (Stream& s : streams) s.fill(sim, 8);
  std::map<const IoContext*, uint64_t> served;
  for (int i = 0; i < steps; i++) {
    auto [ctx, sectors] = sim.serve_one(100);
    EXPECT_NE(ctx, nullptr) << "step " << i;
    if (!ctx) break;
    served[ctx] += sectors;
    for (Stream& s : streams)
      if (s.ctx == ctx) s.one(sim);
  }
  return served;
}

double share(const std::map<const IoContext*, uint64_t>& served, const IoContext* c) {
  uint64_t total = 0;
  for (auto& [k, v] : served) total += v;
  auto it = served.find(c);
  return total && it != served.end() ? static_cast<double>(it->second) / static_cast<double>(total) : 0.0;
}

void quick(BfqSim& sim) {
  sim.set("low_latency", "0");    // no raising: the shares are the weights'
  sim.set("max_budget", "2048");  // short slots: the shares converge in a short run
}

class BfqGroupShares : public ::testing::TestWithParam<BfqInsert> {};

// Two groups at io.bfq.weight 100 and 300, one saturating reader each:
// 25 % and 75 % of the sectors, whatever the insertion lists (seed 003).
TEST_P(BfqGroupShares, TwoGroupsByWeight) {
  RemoveGroups rm{{"/bfqg_w100", "/bfqg_w300"}};
  BfqSim sim(GetParam());
  quick(sim);
  GroupCtx a("/bfqg_w100", 100), b("/bfqg_w300", 300);
  std::vector<Stream> st{{a.ioc.get(), 0, kSpan}, {b.ioc.get(), 40000, kSpan}};
  auto served = serve(sim, st, 3000);
  const double sa = share(served, a.ioc.get()), sb = share(served, b.ioc.get());
  std::printf("[          ] groups 100:300 -> %.3f:%.3f\n", sa, sb);
  EXPECT_NEAR(sa, 0.25, 0.05);
  EXPECT_NEAR(sb, 0.75, 0.05);
  // Both queues weigh the same (BE4, 40): the groups made the difference.
  EXPECT_EQ(bfq_queue_info(&sim.q(), a.ioc.get()).orig_weight, 40u);
  EXPECT_EQ(bfq_group_info(&sim.q(), b.g).weight, 300u);
  EXPECT_TRUE(bfq_group_info(&sim.q(), b.g).found);
}
INSTANTIATE_TEST_SUITE_P(Modes, BfqGroupShares,
                         ::testing::Values(BfqInsert::locked, BfqInsert::split, BfqInsert::split_parked),
                         bfq_mode_name);

// Seeky readers too: random 4 KiB reads, charged by time when their slots
// are short (bfq_bfqq_charge_time), still share by their groups' weights.
TEST(BfqGroup, SeekyReadersShareByGroupWeight) {
  RemoveGroups rm{{"/bfqg_s1", "/bfqg_s3"}};
  BfqSim sim;
  quick(sim);
  GroupCtx a("/bfqg_s1", 100), b("/bfqg_s3", 300);
  std::mt19937 rng(5);
  auto one = [&](IoContext* c, uint64_t base) { sim.submit(c, base + (rng() % 4000) * 8, 8); };
  for (int i = 0; i < 8; i++) {
    one(a.ioc.get(), 0);
    one(b.ioc.get(), 40000);
  }
  std::map<const IoContext*, uint64_t> served;
  for (int i = 0; i < 4000; i++) {
    auto [ctx, sectors] = sim.serve_one(100);
    ASSERT_NE(ctx, nullptr) << i;
    served[ctx] += sectors;
    one(const_cast<IoContext*>(ctx), ctx == a.ioc.get() ? 0 : 40000);
  }
  const double sa = share(served, a.ioc.get());
  std::printf("[          ] seeky groups 100:300 -> %.3f:%.3f\n", sa, 1 - sa);
  EXPECT_NEAR(sa, 0.25, 0.05);
}

// /a (300) with two children of equal weight, /b (100): /a's 75 % splits
// evenly, 37.5 % each.
TEST(BfqGroup, TwoLevelTree) {
  RemoveGroups rm{{"/bfqg_a/x", "/bfqg_a/y", "/bfqg_a", "/bfqg_b"}};
  BfqSim sim;
  quick(sim);
  ASSERT_TRUE(io_group_create("/bfqg_a").ok());
  ASSERT_TRUE(sim.q().set_attr("cgroup/bfqg_a/io.bfq.weight", "300"));
  GroupCtx x("/bfqg_a/x", 100), y("/bfqg_a/y", 100), b("/bfqg_b", 100);
  std::vector<Stream> st{{x.ioc.get(), 0, kSpan}, {y.ioc.get(), 40000, kSpan}, {b.ioc.get(), 80000, kSpan}};
  auto served = serve(sim, st, 4000);
  const double sx = share(served, x.ioc.get()), sy = share(served, y.ioc.get()), sb = share(served, b.ioc.get());
  std::printf("[          ] /a(300){x,y} /b(100) -> %.3f %.3f %.3f\n", sx, sy, sb);
  EXPECT_NEAR(sx, 0.375, 0.05);
  EXPECT_NEAR(sy, 0.375, 0.05);
  EXPECT_NEAR(sb, 0.25, 0.05);
}

// Inside a group, context weights split the group's share: /g (100) with
// contexts of weights 200 and 100 against /h (100) with one: 1/3, 1/6, 1/2.
TEST(BfqGroup, ContextWeightsSplitTheGroupShare) {
  RemoveGroups rm{{"/bfqg_g", "/bfqg_h"}};
  BfqSim sim;
  quick(sim);
  GroupCtx g1("/bfqg_g", 100, 200), g2("/bfqg_g", 100, 100), h("/bfqg_h", 100);
  std::vector<Stream> st{{g1.ioc.get(), 0, kSpan}, {g2.ioc.get(), 40000, kSpan}, {h.ioc.get(), 80000, kSpan}};
  auto served = serve(sim, st, 4000);
  const double s1 = share(served, g1.ioc.get()), s2 = share(served, g2.ioc.get()), sh = share(served, h.ioc.get());
  std::printf("[          ] /g{200,100} /h -> %.3f %.3f %.3f\n", s1, s2, sh);
  EXPECT_NEAR(s1, 1.0 / 3, 0.05);
  EXPECT_NEAR(s2, 1.0 / 6, 0.05);
  EXPECT_NEAR(sh, 0.5, 0.05);
}

// The root group's own queues compete with a group's entity at their own
// weights, as in the kernel: a root reader (queue weight 40) against a
// group of weight 120 gets 40/160.
TEST(BfqGroup, RootQueuesCompeteWithGroups) {
  RemoveGroups rm{{"/bfqg_r"}};
  BfqSim sim;
  quick(sim);
  auto root_ctx = make_ioc();
  GroupCtx g("/bfqg_r", 120);
  std::vector<Stream> st{{root_ctx.get(), 0, kSpan}, {g.ioc.get(), 40000, kSpan}};
  auto served = serve(sim, st, 3000);
  EXPECT_NEAR(share(served, root_ctx.get()), 0.25, 0.05);
}

// With no group, the dispatch order is what the flat scheduler chose: a
// fixed mix of weights, classes, sizes and sync-ness, its sequence of
// (context, sector) hashed. The expected value was recorded with the same
// code on main before groups existed (586eaf6), linked against that
// tree's libraries.
constexpr uint64_t kFlatGolden = 18135010792304910243ull;

TEST(BfqGroup, FlatDispatchOrderUnchanged) {
  BfqSim sim;
  sim.set("max_budget", "1024");
  auto a = make_ioc(100), b = make_ioc(300), c = make_ioc(100, ioprio_value(IoprioClass::be, 1));
  auto d = make_ioc(100, ioprio_value(IoprioClass::rt, 4));
  IoContext* ctxs[] = {a.get(), b.get(), c.get(), d.get()};
  uint64_t next[4] = {0, 0, 0, 0};
  uint64_t h = 1469598103934665603ull;
  int served = 0;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 6; k++) {
      sim.submit(ctxs[i], uint64_t(i) * 100000 + next[i], 8 + 8 * (k % 3), (k % 4 == 3) ? ReqOp::write : ReqOp::read);
      next[i] += 64;
    }
  for (int step = 0; step < 400; step++) {
    Request* rq = sim.dispatch();
    if (!rq) {
      mix(0);
      sim.advance_ms(3);
      continue;
    }
    int who = 0;
    while (who < 4 && ctxs[who] != rq->ioc) who++;
    mix(uint64_t(who) << 48 | rq->sector);
    served++;
    sim.advance_us(50 + 30 * (step % 5));
    sim.complete(rq);
    // Context a pauses now and then (idling, expiry, raising decisions).
    if (who < 4 && !(who == 0 && step % 5 == 0)) {
      sim.submit(ctxs[who], uint64_t(who) * 100000 + next[who], 8 + 8 * (step % 3),
                 (step % 7 == 3) ? ReqOp::write : ReqOp::read);
      next[who] += 64;
    }
  }
  std::printf("[          ] flat dispatch hash %llu, %d served\n", static_cast<unsigned long long>(h), served);
  EXPECT_GT(served, 250);
  EXPECT_EQ(h, kFlatGolden);
}

// io.bfq.weight in cgroup v2's format: "default N" and, once a weight was
// set for this device, "MAJ:MIN N"; writes "N", "default N", "MAJ:MIN N",
// "MAJ:MIN default"; bad values are EINVAL and change nothing.
TEST(BfqGroup, WeightFileFormat) {
  RemoveGroups rm{{"/bfqg_f"}};
  BfqSim sim;
  ASSERT_TRUE(io_group_create("/bfqg_f").ok());
  Queue& q = sim.q();
  const std::string f = "cgroup/bfqg_f/io.bfq.weight";
  const std::string dev = std::to_string(Queue::kDevMajor) + ":" + std::to_string(q.dev_minor());
  EXPECT_EQ(*q.attr(f), "default 100");
  ASSERT_TRUE(q.set_attr(f, "250\n"));
  EXPECT_EQ(*q.attr(f), "default 250");
  ASSERT_TRUE(q.set_attr(f, "default 300"));
  EXPECT_EQ(*q.attr(f), "default 300");
  ASSERT_TRUE(q.set_attr(f, dev + " 700"));
  EXPECT_EQ(*q.attr(f), "default 300\n" + dev + " 700");
  ASSERT_TRUE(q.set_attr(f, "8:16 650"));  // this device's file: any MAJ:MIN is this device
  EXPECT_EQ(*q.attr(f), "default 300\n" + dev + " 650");
  EXPECT_EQ(bfq_group_info(&q, io_group_find("/bfqg_f")).dev_weight, 650u);
  for (const char* bad : {"0", "1001", "-5", "abc", "default", "default 0", "8:16 0", "8:16 2000", "8: 5",
                          "x:y 5", "default 5 6", ""}) {
    Status st = q.set_attr(f, bad);
    EXPECT_FALSE(st) << "'" << bad << "'";
    EXPECT_EQ(st.code(), EINVAL) << "'" << bad << "'";
  }
  EXPECT_EQ(*q.attr(f), "default 300\n" + dev + " 650") << "a refused value changed nothing";
  ASSERT_TRUE(q.set_attr(f, dev + " default"));
  EXPECT_EQ(*q.attr(f), "default 300");
  // Listed for every group but the root, and not there without bfq.
  auto names = q.attr_names();
  EXPECT_NE(std::find(names.begin(), names.end(), f), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "cgroup/io.bfq.weight"), names.end());
  EXPECT_FALSE(q.attr("cgroup/io.bfq.weight").ok());
  EXPECT_EQ(q.attr("cgroup/bfqg_nosuch/io.bfq.weight").status().code(), ENOENT);
  EXPECT_TRUE(io_group_set_bfq_weight(io_group_find("/bfqg_f"), 100));
}

// A context that moves to another group between requests takes its queue
// along (bfq_bic_update_cgroup): the same queue, now in the new group.
TEST(BfqGroup, ContextMoveTakesItsQueue) {
  RemoveGroups rm{{"/bfqg_m1", "/bfqg_m2"}};
  BfqSim sim;
  quick(sim);
  GroupCtx a("/bfqg_m1", 100);
  IoGroup* m2 = *io_group_create("/bfqg_m2");
  sim.submit(a.ioc.get(), 0, 8);
  EXPECT_TRUE(bfq_group_info(&sim.q(), a.g).found);
  ASSERT_TRUE(io_context_set_group(a.ioc.get(), m2));
  sim.submit(a.ioc.get(), 1000, 8);
  BfqStats st = bfq_stats(&sim.q());
  EXPECT_EQ(st.queues_moved, 1u);
  EXPECT_EQ(st.queues_alive, 1u);
  EXPECT_TRUE(bfq_group_info(&sim.q(), m2).active);
  EXPECT_FALSE(bfq_group_info(&sim.q(), a.g).active) << "the emptied group left the root's trees";
  for (int i = 0; i < 2; i++) ASSERT_NE(sim.serve_one(100).first, nullptr);
  EXPECT_EQ(sim.ended(), 2);
}

// A group removed while its requests wait in bfq: they are served and end
// normally; its state goes once its last queue is freed.
TEST(BfqGroup, RemovedGroupStateFreedAfterItsRequests) {
  BfqSim sim;
  quick(sim);
  auto ctx = make_ioc();
  IoGroup* g = *io_group_create("/bfqg_gone");
  ASSERT_TRUE(io_context_set_group(ctx.get(), g));
  for (int i = 0; i < 4; i++) sim.submit(ctx.get(), uint64_t(i) * 64, 8);
  ASSERT_TRUE(io_context_set_group(ctx.get(), nullptr));
  ASSERT_TRUE(io_group_remove("/bfqg_gone"));
  EXPECT_EQ(bfq_stats(&sim.q()).groups_alive, 1u);
  for (int i = 0; i < 4; i++) ASSERT_NE(sim.serve_one(100).first, nullptr) << i;
  EXPECT_EQ(sim.ended(), 4);
  sim.advance_ms(200);
  EXPECT_EQ(sim.dispatch(), nullptr);  // the dispatch path sweeps
  BfqStats st = bfq_stats(&sim.q());
  EXPECT_EQ(st.groups_alive, 0u);
  EXPECT_EQ(st.queues_alive, 0u);
}

// ---- real threads ----

StubDriver::Options live_opts() {
  StubDriver::Options o;
  o.scheduler = "bfq";
  o.mode = CompleteMode::irq_thread;
  o.depth = 32;
  return o;
}

// Threads in a group submit and leave; the group is removed while their
// requests are still in bfq and the driver (mode never holds them); then a
// completer lets them through. Every bio ends exactly once, and the bfq
// state of the removed group goes with the scheduler.
TEST(BfqGroupLive, GroupRemovedWithRequestsInFlight) {
  StubDriver::Options o = live_opts();
  o.mode = CompleteMode::never;
  StubDriver d(o);
  BioTracker t;
  constexpr int kThreads = 2, kPer = 12;  // under the tag depth: no submitter waits for a completion
  std::vector<std::unique_ptr<BioTracker::Slot>> slots;
  for (int i = 0; i < kThreads * kPer; i++) slots.push_back(t.make(ReqOp::read, uint64_t(i) * 8192, 4096));
  std::vector<std::thread> th;
  for (int w = 0; w < kThreads; w++)
    th.emplace_back([&, w] {
      IoGroup* g = *io_group_create(w ? "/bfqg_live/b" : "/bfqg_live/a");
      EXPECT_TRUE(io_context_set_group(current_io_context(), g));
      for (int i = 0; i < kPer; i++) d.q().submit_bio(&slots[size_t(w * kPer + i)]->bio);
      EXPECT_TRUE(io_context_set_group(current_io_context(), nullptr));
    });
  for (auto& x : th) x.join();
  // Removed with every request in flight (nothing completes yet): their
  // blkgs and bfq's state hold on.
  EXPECT_EQ(t.ended.load(), 0);
  EXPECT_TRUE(io_group_remove("/bfqg_live/a"));
  EXPECT_TRUE(io_group_remove("/bfqg_live/b"));
  EXPECT_TRUE(io_group_remove("/bfqg_live"));
  std::atomic<bool> stop{false};
  std::thread completer([&] {
    while (!stop.load()) {
      auto held = d.take_held();
      for (Request* rq : held) complete_request(rq, BlkStatus::ok);
      run_hw_queues(&d.q(), false);
      if (held.empty()) std::this_thread::yield();
    }
  });
  EXPECT_TRUE(t.wait_for(kThreads * kPer, 10000)) << t.ended.load();
  stop = true;
  completer.join();
  EXPECT_EQ(t.doubles.load(), 0);
  EXPECT_EQ(t.errors.load(), 0);
  ASSERT_TRUE(wait_requests_freed(d.q()));
  ASSERT_TRUE(d.q().set_attr("queue/scheduler", "none"));  // frees the groups' state (ASan checks)
}

// Threads keep moving their contexts between two groups and the root
// between batches while others' requests complete on the driver's thread:
// every bio ends once and the queues moved.
TEST(BfqGroupLive, ContextsMoveBetweenGroups) {
  StubDriver d(live_opts());
  ASSERT_TRUE(d.q().set_attr("queue/iosched/slice_idle", "0"));
  IoGroup* g1 = *io_group_create("/bfqg_mv1");
  IoGroup* g2 = *io_group_create("/bfqg_mv2");
  ASSERT_TRUE(io_group_set_bfq_weight(g2, 400));
  BioTracker t;
  constexpr int kThreads = 3, kRounds = 40, kBatch = 6;
  std::atomic<uint64_t> moved_ok{0};
  // Kept to the end: end_io still writes a slot after counting it.
  std::vector<std::unique_ptr<BioTracker::Slot>> slots_of[kThreads];
  std::vector<std::thread> th;
  for (int w = 0; w < kThreads; w++)
    th.emplace_back([&, w] {
      IoGroup* where[] = {g1, g2, nullptr};
      auto& slots = slots_of[w];
      for (int r = 0; r < kRounds; r++) {
        if (io_context_set_group(current_io_context(), where[(r + w) % 3])) moved_ok++;
        const size_t first = slots.size();
        for (int i = 0; i < kBatch; i++) {
          slots.push_back(t.make(i % 3 ? ReqOp::read : ReqOp::write, uint64_t(w * 4096 + i * 64 + r) * 4096, 4096));
          d.q().submit_bio(&slots.back()->bio);
        }
        for (size_t i = first; i < slots.size(); i++)
          EXPECT_TRUE(eventually([&] { return slots[i]->ends.load() > 0; })) << "thread " << w << " round " << r;
      }
      (void)io_context_set_group(current_io_context(), nullptr);
    });
  for (auto& x : th) x.join();
  EXPECT_TRUE(t.wait_for(kThreads * kRounds * kBatch, 10000));
  EXPECT_EQ(t.doubles.load(), 0);
  EXPECT_EQ(t.errors.load(), 0);
  EXPECT_EQ(moved_ok.load(), uint64_t(kThreads * kRounds));
  EXPECT_GT(bfq_stats(&d.q()).queues_moved, 0u);
  ASSERT_TRUE(wait_requests_freed(d.q()));
  EXPECT_TRUE(io_group_remove("/bfqg_mv1"));
  EXPECT_TRUE(io_group_remove("/bfqg_mv2"));
  ASSERT_TRUE(d.q().set_attr("queue/scheduler", "none"));
}

}  // namespace
}  // namespace blkmq::test
