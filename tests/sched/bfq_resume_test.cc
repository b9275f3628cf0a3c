// bfq's rules for a queue that left the device empty in the middle of its
// slot and comes back (bfq_bfqq_update_budg_for_activation and the
// preemption in bfq_bfqq_handle_idle_busy_switch): back within 3 x
// slice_idle of its last completion it resumes the budget it had left and
// takes the device back from the in-service queue, even one of a higher
// weight; later it starts over with a fresh budget and waits its turn.
// The kernel's trace shows the rule at work between two sequential
// readers of BE levels 0 and 4 (docs/FIDELITY.md).
#include "support/bfq_test_util.h"

namespace blkmq::test {
namespace {

constexpr uint32_t kSectors = 64;
constexpr uint64_t kBOffset = 65536;  // B reads the second half of the 64 MiB device
// Requests a gap apart: sequential for bfq, never merged.
constexpr uint64_t at(uint64_t i) { return i * 2 * kSectors; }

// Four requests of ctx, all handed to the driver; fails the test if bfq
// holds one back.
std::vector<Request*> submit_and_dispatch_four(BfqSim& sim, IoContext* ctx) {
  for (uint32_t i = 0; i < 4; i++) sim.submit(ctx, at(i), kSectors);
  std::vector<Request*> held;
  for (int i = 0; i < 4; i++) {
    Request* rq = sim.dispatch();
    if (!rq) {
      ADD_FAILURE() << "request " << i << " not dispatched";
      break;
    }
    held.push_back(rq);
  }
  return held;
}

// A (BE4) in service alone with four requests in the driver; B (BE0)
// arrives and preempts it (higher weight); one of A's requests completes;
// B's request goes to the driver, so B is in service and idled for.
struct Preempted {
  BfqSim sim;
  std::shared_ptr<IoContext> a = make_ioc(100, ioprio_value(IoprioClass::be, 4));
  std::shared_ptr<IoContext> b = make_ioc(100, ioprio_value(IoprioClass::be, 0));
  std::vector<Request*> a_in_driver;
  uint64_t a_budget = 0;  // A's entity budget when B preempted it

  Preempted() {
    sim.set("low_latency", "0");
    a_in_driver = submit_and_dispatch_four(sim, a.get());
    EXPECT_EQ(sim.dispatch(), nullptr) << "A is alone: bfq idles for it";
    a_budget = bfq_queue_info(&sim.q(), a.get()).budget;
    sim.submit(b.get(), kBOffset, kSectors);
    const BfqQueueInfo ai = bfq_queue_info(&sim.q(), a.get());
    EXPECT_FALSE(ai.in_service) << "B's higher weight preempts A";
    EXPECT_FALSE(ai.busy) << "A left empty";
    sim.advance_us(200);
    if (a_in_driver.empty()) return;
    sim.complete(a_in_driver.back());
    a_in_driver.pop_back();
    Request* rq = sim.dispatch();
    EXPECT_TRUE(rq && rq->ioc == b.get());
    EXPECT_TRUE(bfq_queue_info(&sim.q(), b.get()).in_service);
  }
};

TEST(BfqResume, QueueBackInTimeResumesItsBudgetAndPreempts) {
  Preempted p;
  p.sim.advance_ms(5);  // within 3 x slice_idle (24 ms) of A's last completion
  p.sim.submit(p.a.get(), at(4), kSectors);
  const BfqQueueInfo a = bfq_queue_info(&p.sim.q(), p.a.get());
  EXPECT_FALSE(bfq_queue_info(&p.sim.q(), p.b.get()).in_service) << "A takes the device back from the heavier B";
  EXPECT_EQ(a.budget, p.a_budget - 4 * kSectors) << "what was left of A's budget";
  Request* rq = p.sim.dispatch();
  ASSERT_NE(rq, nullptr);
  EXPECT_EQ(rq->ioc, p.a.get());
  EXPECT_TRUE(a.io_bound) << "A always had requests in flight";
}

TEST(BfqResume, QueueBackLateStartsAFreshBudgetAndWaits) {
  Preempted p;
  p.sim.advance_ms(30);  // past 3 x slice_idle
  p.sim.submit(p.a.get(), at(4), kSectors);
  const BfqQueueInfo a = bfq_queue_info(&p.sim.q(), p.a.get());
  EXPECT_TRUE(bfq_queue_info(&p.sim.q(), p.b.get()).in_service) << "B keeps the device";
  EXPECT_EQ(a.budget, std::max<uint64_t>(a.max_budget, kSectors)) << "a fresh budget";
  EXPECT_TRUE(a.busy);
  EXPECT_EQ(p.sim.dispatch(), nullptr) << "B is idled for: A waits";
}

// Idled for and expired when the idle timer fires (too idle), a queue
// keeps the budget of the slot it left: what it resumes is that budget
// less its service, within the smaller max_budget the feedback gave it.
TEST(BfqResume, QueueTooIdleResumesWhatItsSlotHadLeft) {
  BfqSim sim;
  sim.set("low_latency", "0");
  auto a = make_ioc(100, ioprio_value(IoprioClass::be, 4));
  const std::vector<Request*> held = submit_and_dispatch_four(sim, a.get());
  ASSERT_EQ(held.size(), 4u);
  const uint64_t slot_budget = bfq_queue_info(&sim.q(), a.get()).budget;
  sim.advance_ms(1);
  for (Request* rq : held) sim.complete(rq);
  sim.advance_ms(9);  // the idle timer (8 ms) expires it: too idle
  const BfqQueueInfo gone = bfq_queue_info(&sim.q(), a.get());
  ASSERT_FALSE(gone.busy);
  ASSERT_LT(gone.max_budget, slot_budget - 4 * kSectors) << "too idle with nothing in flight: a smaller budget";
  sim.advance_ms(1);  // within 3 x slice_idle of its last completion
  sim.submit(a.get(), at(4), kSectors);
  EXPECT_EQ(bfq_queue_info(&sim.q(), a.get()).budget, gone.max_budget)
      << "min(slot budget - service, max_budget), not the new max_budget less the service";
}

// Expired for its budget (here its budget timeout, while empty and idled
// for), a queue has no slot to resume: back in time, it starts over with
// the fresh budget the feedback rules gave it and does not preempt the
// heavier queue that took the device meanwhile.
TEST(BfqResume, QueueExpiredForItsBudgetTimeoutStartsFresh) {
  BfqSim sim;
  sim.set("low_latency", "0");
  auto a = make_ioc(100, ioprio_value(IoprioClass::be, 4));
  const std::vector<Request*> held = submit_and_dispatch_four(sim, a.get());
  ASSERT_EQ(held.size(), 4u);
  EXPECT_EQ(sim.dispatch(), nullptr) << "alone: idled for";
  const uint64_t leftover = bfq_queue_info(&sim.q(), a.get()).budget - 4 * kSectors;
  sim.advance_ms(130);  // past the budget timeout (125 ms)
  for (Request* rq : held) sim.complete(rq);
  sim.advance_ms(9);  // the idle timer (8 ms) expires it, timed out
  ASSERT_FALSE(bfq_queue_info(&sim.q(), a.get()).busy);
  auto b = make_ioc(100, ioprio_value(IoprioClass::be, 0));
  sim.submit(b.get(), kBOffset, kSectors);
  Request* rq = sim.dispatch();
  ASSERT_TRUE(rq && rq->ioc == b.get());
  sim.advance_ms(1);  // A is back within 3 x slice_idle of its last completion
  sim.submit(a.get(), at(4), kSectors);
  const BfqQueueInfo ai = bfq_queue_info(&sim.q(), a.get());
  EXPECT_EQ(ai.budget, std::max<uint64_t>(ai.max_budget, kSectors)) << "a fresh budget";
  EXPECT_NE(ai.budget, leftover);
  EXPECT_TRUE(bfq_queue_info(&sim.q(), b.get()).in_service) << "no slot to resume: no preemption";
}

}  // namespace
}  // namespace blkmq::test
