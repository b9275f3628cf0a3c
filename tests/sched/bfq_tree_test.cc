// bfq's service trees (sched/bfq/bfq_tree.h): the active tree's cached
// minimum start and its eligible-first descent against a linear scan of
// the finish order, under random inserts and erases; and the dispatch
// order of many queues, flat and in groups, recorded so that a change to
// how the trees are kept (issue 29) shows whether B-WF2Q+ still picks the
// same entity every time.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "blkmq/iogroup.h"
#include "sched/bfq/bfq_impl.h"
#include "support/bfq_test_util.h"

namespace blkmq::test {
namespace {

using bfq::ActiveTree;
using bfq::BfqEntity;

// The cached minimum of every node equals its subtree's, recomputed.
uint64_t check_min(const RbNode* n, bool* ok) {
  if (!n) return UINT64_MAX;
  const BfqEntity* e = rb_entry<BfqEntity>(const_cast<RbNode*>(n), offsetof(BfqEntity, rb_node));
  const uint64_t m = std::min({e->start, check_min(n->left, ok), check_min(n->right, ok)});
  if (m != e->min_start) *ok = false;
  return m;
}

BfqEntity* scan_first_eligible(const ActiveTree& t, uint64_t vtime) {
  for (BfqEntity* e = t.first(); e; e = ActiveTree::next(e))
    if (e->start <= vtime) return e;
  return nullptr;
}

TEST(BfqTree, CachedMinStartAndEligibleFirstMatchAScan) {
  std::mt19937_64 rng(29);
  std::vector<BfqEntity> ents(300);
  for (size_t i = 0; i < ents.size(); i++) ents[i].uid = i + 1;
  std::vector<BfqEntity*> in, out;
  for (BfqEntity& e : ents) out.push_back(&e);
  ActiveTree t;
  for (int step = 0; step < 20000; step++) {
    const bool grow = in.empty() || (!out.empty() && rng() % 100 < 52);
    if (grow) {
      const size_t k = rng() % out.size();
      BfqEntity* e = out[k];
      out[k] = out.back();
      out.pop_back();
      e->start = rng() % 1000;
      e->finish = e->start + rng() % 500;  // equal finishes: uid decides
      t.insert(e);
      in.push_back(e);
    } else {
      const size_t k = rng() % in.size();
      BfqEntity* e = in[k];
      in[k] = in.back();
      in.pop_back();
      t.erase(e);
      out.push_back(e);
    }
    bool ok = true;
    check_min(t.root(), &ok);
    ASSERT_TRUE(ok) << "step " << step;
    uint64_t scan_min = UINT64_MAX;
    for (BfqEntity* e : in) scan_min = std::min(scan_min, e->start);
    ASSERT_EQ(t.min_start(), scan_min) << "step " << step;
    for (int q = 0; q < 4; q++) {
      const uint64_t vtime = rng() % 1100;
      ASSERT_EQ(t.first_eligible(vtime), scan_first_eligible(t, vtime)) << "step " << step << " vtime " << vtime;
    }
    uint64_t prev_finish = 0, prev_uid = 0;
    size_t n = 0;
    for (BfqEntity* e = t.first(); e; e = ActiveTree::next(e), n++) {
      ASSERT_TRUE(e->finish > prev_finish || (e->finish == prev_finish && e->uid > prev_uid));
      prev_finish = e->finish;
      prev_uid = e->uid;
    }
    ASSERT_EQ(n, in.size());
  }
}

// The idle tree's first entity, kept at hand, against the smallest
// (finish, uid) of what is on it.
TEST(BfqTree, IdleTreeFirstIsTheSmallestFinish) {
  std::mt19937_64 rng(2029);
  std::vector<BfqEntity> ents(100);
  std::vector<BfqEntity*> in, out;
  for (size_t i = 0; i < ents.size(); i++) {
    ents[i].uid = i + 1;
    out.push_back(&ents[i]);
  }
  bfq::IdleTree t;
  for (int step = 0; step < 5000; step++) {
    const bool grow = in.empty() || (!out.empty() && rng() % 100 < 50);
    std::vector<BfqEntity*>& from = grow ? out : in;
    const size_t k = rng() % from.size();
    BfqEntity* e = from[k];
    from[k] = from.back();
    from.pop_back();
    if (grow) {
      e->finish = rng() % 200;
      t.insert(e);
      in.push_back(e);
    } else {
      t.erase(e);
      out.push_back(e);
    }
    BfqEntity* want = nullptr;
    for (BfqEntity* x : in)
      if (!want || x->finish < want->finish || (x->finish == want->finish && x->uid < want->uid)) want = x;
    ASSERT_EQ(t.first(), want) << "step " << step;
  }
}

// Many queues of mixed weights, classes, sizes and sync-ness, some with
// pauses (idling, expiry, weight raising and their eligibility), served
// on the manual clock; returns the sequence of (context, sector) hashed
// and, in *served, how many requests were dispatched.
uint64_t dispatch_hash(BfqSim& sim, const std::vector<IoContext*>& ctxs, int steps, int* served) {
  const size_t n = ctxs.size();
  const uint64_t region = 120000 / n;  // within the stub's 64 MiB
  std::vector<uint64_t> next(n, 0);
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  auto submit = [&](size_t i, int k) {
    sim.submit(ctxs[i], i * region + next[i] % (region - 128), 8 + 8 * (k % 4),
               (k % 5 == 2) ? ReqOp::write : ReqOp::read);
    next[i] += (i % 3 == 0) ? 64 : 64 + 4096 * (k % 7);  // some sequential, some seeky
  };
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 4; k++) submit(i, k);
  std::mt19937 rng(2929);  // its sequence is fixed by the standard
  *served = 0;
  for (int step = 0; step < steps; step++) {
    Request* rq = sim.dispatch();
    if (!rq) {
      mix(0);
      sim.advance_ms(2);
      continue;
    }
    size_t who = 0;
    while (who < n && ctxs[who] != rq->ioc) who++;
    mix(uint64_t(who) << 48 | rq->sector);
    (*served)++;
    sim.advance_us(40 + 25 * (step % 6));
    sim.complete(rq);
    // Every fourth context pauses a third of the time: it goes idle and
    // comes back later, through the idle tree.
    if (who < n && !(who % 4 == 1 && rng() % 3 == 0)) submit(who, step);
    if (step % 37 == 0)
      for (size_t i = 1; i < n; i += 4) submit(i, step);
  }
  return h;
}

// The expected values were recorded at 4f2dc12, with the trees as
// finish-ordered std::sets scanned for the first eligible entity.
constexpr uint64_t kManyQueuesGolden = 16260562917261875899ull;
constexpr uint64_t kGroupsGolden = 5044495099175485251ull;

TEST(BfqTree, ManyQueuesDispatchOrderUnchanged) {
  BfqSim sim;
  sim.set("max_budget", "512");
  std::vector<std::shared_ptr<IoContext>> keep;
  std::vector<IoContext*> ctxs;
  for (int i = 0; i < 14; i++) {
    uint16_t prio = kIoprioDefault;
    if (i == 3 || i == 10) prio = rt_prio(i % 8);
    else if (i == 7) prio = idle_prio();
    else if (i % 2) prio = ioprio_value(IoprioClass::be, i % 8);
    keep.push_back(make_ioc(static_cast<uint16_t>(100 + 50 * (i % 5)), prio));
    ctxs.push_back(keep.back().get());
  }
  int served = 0;
  const uint64_t h = dispatch_hash(sim, ctxs, 1500, &served);
  std::printf("[          ] many queues dispatch hash %llu, %d served\n", static_cast<unsigned long long>(h), served);
  EXPECT_GT(served, 1000);
  EXPECT_EQ(h, kManyQueuesGolden);
}

TEST(BfqTree, GroupsDispatchOrderUnchanged) {
  const std::vector<std::string> paths{"/bfqt_a/x", "/bfqt_a", "/bfqt_b", "/bfqt_c"};
  const unsigned weights[] = {300, 100, 200, 50};
  std::vector<IoGroup*> groups;
  for (size_t i = paths.size(); i-- > 0;) {  // parents first
    auto r = io_group_create(paths[i]);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(io_group_set_bfq_weight(*r, weights[i]));
    groups.insert(groups.begin(), *r);
  }
  std::vector<std::shared_ptr<IoContext>> keep;
  std::vector<IoContext*> ctxs;
  {
    BfqSim sim;
    sim.set("max_budget", "512");
    for (int i = 0; i < 12; i++) {
      keep.push_back(make_ioc(static_cast<uint16_t>(100 + 100 * (i % 3)),
                              i == 5 ? rt_prio(2) : ioprio_value(IoprioClass::be, i % 8)));
      ctxs.push_back(keep.back().get());
      if (i % 5 != 4) {  // the rest in the root
        ASSERT_TRUE(io_context_set_group(ctxs.back(), groups[i % 4]));
      }
    }
    int served = 0;
    const uint64_t h = dispatch_hash(sim, ctxs, 1500, &served);
    std::printf("[          ] groups dispatch hash %llu, %d served\n", static_cast<unsigned long long>(h), served);
    EXPECT_GT(served, 1000);
    EXPECT_EQ(h, kGroupsGolden);
  }
  for (IoContext* c : ctxs) EXPECT_TRUE(io_context_set_group(c, nullptr));
  for (const std::string& p : paths) EXPECT_TRUE(io_group_remove(p)) << p;
}

}  // namespace
}  // namespace blkmq::test
