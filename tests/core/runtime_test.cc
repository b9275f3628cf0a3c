// The runtime seam (blkmq/runtime.h): ManualRuntime's contract, and the
// core's logic stepped on it: delayed runs, the resource and budget
// retries, restart on a freed tag, requeue delays and completion routing.
// Nothing here sleeps: on a manual runtime nothing runs unless the test
// runs it, so "nothing happened" is a fact and "it ran" needs no wait.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include "base/timer.h"
#include "blkmq/driver/context.h"
#include "support/stub_driver.h"

namespace blkmq::test {
namespace {

using Slots = std::vector<std::unique_ptr<BioTracker::Slot>>;
constexpr uint64_t kMs = 1000 * 1000;

StubDriver::Options on(ManualRuntime& rt, CompleteMode mode = CompleteMode::inline_end) {
  StubDriver::Options o;
  o.runtime = &rt;
  o.mode = mode;
  return o;
}

void submit_n(Queue& q, BioTracker& t, Slots& s, int n, ReqOp op = ReqOp::write) {
  for (int i = 0; i < n; i++) {
    s.push_back(t.make(op, uint64_t(s.size()) * 8192, 4096));
    q.submit_bio(&s.back()->bio);
  }
}

// ---- ManualRuntime itself ----

TEST(ManualRuntime, TheClockMovesOnlyWhenAdvanced) {
  ManualRuntime rt(5000);
  EXPECT_TRUE(rt.is_manual());
  EXPECT_FALSE(Runtime::process_default().is_manual());
  EXPECT_EQ(rt.now_ns(), 5000u);
  EXPECT_EQ(rt.advance(250), 0u);
  EXPECT_EQ(rt.now_ns(), 5250u);
  EXPECT_EQ(rt.pending(), 0u);
  EXPECT_EQ(rt.run_pending(), 0u);
  EXPECT_EQ(rt.next_timer_ns(), UINT64_MAX);
}

// Timers fire in expiry order, ties in arming order, each with the clock
// at its own expiry; one armed by a callback for a time still within the
// step fires in the same advance().
TEST(ManualRuntime, TimersFireInOrderAtTheirOwnTimes) {
  ManualRuntime rt(0);
  std::vector<std::pair<int, uint64_t>> fired;
  base::Timer t[4];
  for (int i = 0; i < 4; i++) t[i].init(&rt.timers(), [&, i] { fired.emplace_back(i, rt.now_ns()); });
  base::Timer chained;
  chained.init(&rt.timers(), [&] { fired.emplace_back(9, rt.now_ns()); });
  t[0].arm_at(30);
  t[1].arm_at(10);
  t[2].arm_at(20);
  t[3].arm_at(20);
  base::Timer starter;
  starter.init(&rt.timers(), [&] { chained.arm_after(5); });
  starter.arm_at(22);
  EXPECT_EQ(rt.next_timer_ns(), 10u);
  EXPECT_EQ(rt.advance(19), 1u);
  EXPECT_EQ(rt.advance(11), 5u);  // to 30: 20, 20, 22, 27 (chained), 30
  EXPECT_EQ(rt.now_ns(), 30u);
  const std::vector<std::pair<int, uint64_t>> want = {{1, 10}, {2, 20}, {3, 20}, {9, 27}, {0, 30}};
  EXPECT_EQ(fired, want);
  EXPECT_EQ(rt.next_timer_ns(), UINT64_MAX);
}

// A timer cancelled before its time never fires; one re-armed later moves.
TEST(ManualRuntime, CancelAndRearm) {
  ManualRuntime rt(0);
  int n = 0;
  base::Timer t;
  t.init(&rt.timers(), [&] { n++; });
  t.arm_at(10);
  EXPECT_TRUE(t.cancel());
  EXPECT_EQ(rt.advance(100), 0u);
  t.arm_after(10);
  t.arm_after(50);
  EXPECT_EQ(rt.advance(49), 0u);
  EXPECT_EQ(rt.advance(1), 1u);
  EXPECT_EQ(n, 1);
}

// ---- the core on a manual runtime ----

// A driver out of resources (BLK_STS_RESOURCE), as the kernel handles
// it: the submitter's direct issue is refused, so it puts the request on
// the dispatch list and runs the queue itself at once
// (blk_mq_try_issue_directly); that run marks the hctx for restart, and
// its refusal then waits for BLK_MQ_RESOURCE_DELAY (3 ms) or a freed tag,
// whichever comes first.
TEST(RuntimeCore, ResourceBusyIsRetriedAtOnceThenAfterTheResourceDelay) {
  ManualRuntime rt;
  StubDriver d(on(rt));
  d.busy_next = 2;
  BioTracker t;
  Slots s;
  submit_n(d.q(), t, s, 1);
  EXPECT_EQ(d.q().hctx_stats(0).busy, 2u);
  EXPECT_EQ(rt.pending(), 0u) << "the retry went to kblockd";
  EXPECT_EQ(d.nr_seen(), 0u);
  EXPECT_EQ(rt.next_timer_ns(), rt.now_ns() + 3 * kMs);
  rt.advance(3 * kMs - 1);
  EXPECT_EQ(d.nr_seen(), 0u) << "rerun before the resource delay";
  rt.advance(1);
  EXPECT_EQ(d.nr_seen(), 1u);
  EXPECT_EQ(t.ended.load(), 1);
}

// BLK_STS_DEV_RESOURCE promises a rerun when one of the device's requests
// completes: no timer is armed for it, and the held request's completion
// restarts the queue.
TEST(RuntimeCore, DevResourceWaitsForACompletionNotATimer) {
  ManualRuntime rt;
  StubDriver d(on(rt, CompleteMode::never));
  BioTracker t;
  Slots s;
  submit_n(d.q(), t, s, 1);
  ASSERT_EQ(d.nr_seen(), 1u);
  d.dev_busy_next = 1000;  // refused while a request is in flight
  submit_n(d.q(), t, s, 1);
  rt.run_pending();
  EXPECT_GE(d.q().hctx_stats(0).busy, 2u);
  rt.advance(1000 * kMs);
  EXPECT_EQ(d.nr_seen(), 1u) << "dev_resource was retried without a completion";
  for (Request* rq : d.take_held()) complete_request(rq, BlkStatus::ok);
  rt.run_pending();
  EXPECT_EQ(d.nr_seen(), 2u) << "the completion did not restart the queue";
  for (Request* rq : d.take_held()) complete_request(rq, BlkStatus::ok);
  rt.run_pending();
  EXPECT_EQ(t.ended.load(), 2);
}

// All driver tags taken: the next request waits (SCHED_RESTART) and a
// freed tag dispatches it; the only timer is the requests' timeout scan,
// BLK_MAX_TIMEOUT (5 s) away.
TEST(RuntimeCore, AFreedDriverTagRestartsTheWaitingQueue) {
  ManualRuntime rt;
  StubDriver::Options o = on(rt, CompleteMode::never);
  o.depth = 2;
  o.scheduler = "mq-deadline";
  StubDriver d(o);
  BioTracker t;
  Slots s;
  submit_n(d.q(), t, s, 3);
  rt.run_pending();
  EXPECT_EQ(d.nr_seen(), 2u);
  EXPECT_EQ(rt.next_timer_ns(), rt.now_ns() + 5000 * kMs) << "a timer other than the timeout scan's";
  auto held = d.take_held();
  complete_request(held[0], BlkStatus::ok);
  rt.run_pending();
  EXPECT_EQ(d.nr_seen(), 3u);
  for (Request* rq : d.take_held()) complete_request(rq, BlkStatus::ok);
  complete_request(held[1], BlkStatus::ok);
  rt.run_pending();
  EXPECT_EQ(t.ended.load(), 3);
}

// No dispatch budget (a SCSI LUN's queue_depth reached): the hctx is rerun
// BLK_MQ_BUDGET_DELAY (3 ms) later, again and again while none frees; a
// driver's delay_run_hw_queues moves that run (mod_delayed_work), and the
// run happens at the new time, once.
TEST(RuntimeCore, BudgetShortageRerunsAfterTheBudgetDelayAndADelayedRunMovesIt) {
  ManualRuntime rt;
  StubDriver::Options o = on(rt, CompleteMode::inline_complete);  // complete() puts the budget
  o.budgets = true;
  o.budget_limit = 1;
  StubDriver d(o);
  d.budget_used = 1;  // held elsewhere
  BioTracker t;
  Slots s;
  submit_n(d.q(), t, s, 2);
  rt.run_pending();
  EXPECT_EQ(d.nr_seen(), 0u);
  EXPECT_EQ(rt.next_timer_ns(), rt.now_ns() + 3 * kMs);
  const uint64_t runs = d.q().hctx_stats(0).run;
  rt.advance(3 * kMs);
  EXPECT_EQ(d.q().hctx_stats(0).run, runs + 1) << "no rerun at the budget delay";
  EXPECT_EQ(rt.next_timer_ns(), rt.now_ns() + 3 * kMs) << "the rerun found no budget and did not rearm";
  delay_run_hw_queues(&d.q(), 10);
  EXPECT_EQ(rt.next_timer_ns(), rt.now_ns() + 10 * kMs);
  d.budget_used = 0;
  rt.advance(9 * kMs);
  EXPECT_EQ(d.nr_seen(), 0u);
  rt.advance(1 * kMs);
  EXPECT_EQ(d.nr_seen(), 2u);
  EXPECT_EQ(t.ended.load(), 2);
}

// A driver's requeue with a delayed kick comes back after that delay.
TEST(RuntimeCore, RequeueWithADelayedKickComesBackAfterTheDelay) {
  ManualRuntime rt;
  StubDriver d(on(rt, CompleteMode::never));
  BioTracker t;
  Slots s;
  submit_n(d.q(), t, s, 1);
  auto held = d.take_held();
  ASSERT_EQ(held.size(), 1u);
  requeue_request(held[0], false);
  delay_kick_requeue_list(&d.q(), 5);
  rt.advance(4 * kMs);
  EXPECT_EQ(d.nr_seen(), 1u) << "requeued before the kick";
  rt.advance(1 * kMs);
  EXPECT_EQ(d.nr_seen(), 2u);
  for (Request* rq : d.take_held()) complete_request(rq, BlkStatus::ok);
  rt.run_pending();
  EXPECT_EQ(t.ended.load(), 1);
  EXPECT_EQ(t.doubles.load(), 0);
}

// ---- completion routing ----

void pin_to(unsigned cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof set, &set), 0);
}

class Unpin {
 public:
  ~Unpin() {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (unsigned c = 0; c < nr_cpu_ids(); c++) CPU_SET(c, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
};

// Seed 002's switch: from task context, softirq raises BLOCK_SOFTIRQ on
// this CPU (the completion waits for it) and local completes inline.
TEST(RuntimeRouting, TaskCompletionSoftirqWaitsForTheSoftirqLocalDoesNot) {
  Unpin unpin;
  pin_to(0);
  ManualRuntime rt;
  StubDriver d(on(rt, CompleteMode::inline_complete));
  std::vector<ExecContext> where;
  d.on_complete = [&](Request*) { where.push_back(current_context()); };
  ASSERT_TRUE(d.q().set_attr("queue/task_completion", "softirq"));
  BioTracker t;
  Slots s;
  submit_n(d.q(), t, s, 1, ReqOp::read);
  EXPECT_EQ(t.ended.load(), 0);
  EXPECT_EQ(rt.pending_completions(0), 1u);
  EXPECT_EQ(rt.run_pending(), 1u);
  EXPECT_EQ(t.ended.load(), 1);
  ASSERT_TRUE(d.q().set_attr("queue/task_completion", "local"));
  submit_n(d.q(), t, s, 1, ReqOp::read);
  EXPECT_EQ(t.ended.load(), 2) << "local completes before submit_bio returns";
  EXPECT_EQ(rt.pending(), 0u);
  EXPECT_EQ(where, (std::vector<ExecContext>{ExecContext::softirq, ExecContext::task}));
}

// From hardirq context the softirq runs at irq exit, on the same thread,
// and never waits for run_pending().
TEST(RuntimeRouting, HardirqCompletionRunsItsSoftirqAtIrqExit) {
  Unpin unpin;
  pin_to(0);
  ManualRuntime rt;
  StubDriver d(on(rt, CompleteMode::never));
  ASSERT_TRUE(d.q().set_attr("queue/rq_affinity", "0"));
  std::vector<ExecContext> where;
  d.on_complete = [&](Request*) { where.push_back(current_context()); };
  BioTracker t;
  Slots s;
  submit_n(d.q(), t, s, 2, ReqOp::read);
  {
    HardirqScope irq;
    for (Request* rq : d.take_held()) complete_request(rq, BlkStatus::ok);
    EXPECT_EQ(t.ended.load(), 0) << "completed inside the interrupt";
    EXPECT_EQ(rt.pending_completions(0), 2u);
  }
  EXPECT_EQ(t.ended.load(), 2);
  EXPECT_EQ(rt.pending(), 0u);
  EXPECT_EQ(where, (std::vector<ExecContext>{ExecContext::softirq, ExecContext::softirq}));
}

// rq_affinity=2 (QUEUE_FLAG_SAME_FORCE): a completion on another CPU is
// sent to the submitting CPU's softirq, an IPI; the same CPU completes
// where it is.
TEST(RuntimeRouting, RqAffinityTwoSendsTheCompletionToTheSubmittingCpu) {
  if (nr_cpu_ids() < 2) GTEST_SKIP() << "one CPU";
  Unpin unpin;
  pin_to(0);
  ManualRuntime rt;
  StubDriver d(on(rt, CompleteMode::never));
  ASSERT_TRUE(d.q().set_attr("queue/rq_affinity", "2"));
  BioTracker t;
  Slots s;
  submit_n(d.q(), t, s, 1, ReqOp::read);
  auto held = d.take_held();
  ASSERT_EQ(held.size(), 1u);
  pin_to(1);
  complete_request(held[0], BlkStatus::ok);
  EXPECT_EQ(rt.pending_completions(0), 1u) << "not sent to the submitting CPU";
  EXPECT_EQ(rt.pending_completions(1), 0u);
  EXPECT_EQ(t.ended.load(), 0);
  rt.run_pending();
  EXPECT_EQ(t.ended.load(), 1);
}

}  // namespace
}  // namespace blkmq::test
