// mq-deadline dispatch order: sector batches, FIFO deadlines, writes_starved,
// fifo_batch, priority levels and aging, at-head inserts. Every test runs in
// locked mode, split mode, and split mode with every insert parked.
#include "sched/deadline_test_util.h"

namespace blkmq::test {
namespace {

using Sectors = std::vector<uint64_t>;

TEST_P(DeadlineTest, DispatchesInSectorOrderWithinABatch) {
  make();
  for (uint64_t s : {5000, 1000, 3000, 2000, 4000}) submit(ReqOp::read, s);
  start();
  ASSERT_TRUE(wait_seen(5));
  EXPECT_EQ(sectors(), (Sectors{1000, 2000, 3000, 4000, 5000}));
  EXPECT_EQ(deadline_stats(&d_->q()).level[1].dispatched, 5u);
}

TEST_P(DeadlineTest, ServesAnExpiredReadFifoHead) {
  make(/*one_at_a_time=*/true);
  set("fifo_batch", "1");
  submit(ReqOp::read, 5000);  // deadline t0 + 500 ms
  advance_ms(400);
  for (uint64_t s : {100, 200, 300}) submit(ReqOp::read, s);
  // First dispatch at t0+400 (nothing expired), the rest at t0+600.
  EXPECT_EQ(step_all(4, 200), (Sectors{100, 5000, 200, 300}));
}

TEST_P(DeadlineTest, KeepsSectorOrderWhileNothingExpired) {
  make(true);
  set("fifo_batch", "1");
  submit(ReqOp::read, 5000);
  advance_ms(400);
  for (uint64_t s : {100, 200, 300}) submit(ReqOp::read, s);
  EXPECT_EQ(step_all(4, 50), (Sectors{100, 200, 300, 5000}));
}

TEST_P(DeadlineTest, FifoBatchBoundsABatchBeforeTheDeadlineIsChecked) {
  make(true);
  set("fifo_batch", "2");
  submit(ReqOp::read, 5000);
  advance_ms(400);
  for (uint64_t s : {100, 200, 300, 400, 500}) submit(ReqOp::read, s);
  EXPECT_EQ(step_all(6, 200), (Sectors{100, 200, 5000, 300, 400, 500}));
}

TEST_P(DeadlineTest, ALongBatchRunsPastAnExpiredDeadline) {
  make(true);  // fifo_batch 16
  submit(ReqOp::read, 5000);
  advance_ms(400);
  for (uint64_t s : {100, 200, 300, 400, 500}) submit(ReqOp::read, s);
  EXPECT_EQ(step_all(6, 200), (Sectors{100, 200, 300, 400, 500, 5000}));
}

TEST_P(DeadlineTest, WritesStarvedLetsReadsPassWritesTwice) {
  make();
  set("fifo_batch", "1");
  for (uint64_t s : {100, 200, 300, 400, 500}) submit(ReqOp::read, s);
  for (uint64_t s : {1000, 1100, 1200}) submit(ReqOp::write, s);
  start();
  ASSERT_TRUE(wait_seen(8));
  // The scheduler starts in the write direction (last_dir = write), then
  // reads pass waiting writes writes_starved (2) times.
  EXPECT_EQ(sectors(), (Sectors{1000, 100, 200, 1100, 300, 400, 1200, 500}));
}

TEST_P(DeadlineTest, WritesStarvedZeroServesWritesFirst) {
  make();
  set("fifo_batch", "1");
  set("writes_starved", "0");
  for (uint64_t s : {100, 200, 300}) submit(ReqOp::read, s);
  for (uint64_t s : {1000, 1100, 1200}) submit(ReqOp::write, s);
  start();
  ASSERT_TRUE(wait_seen(6));
  EXPECT_EQ(sectors(), (Sectors{1000, 1100, 1200, 100, 200, 300}));
}

TEST_P(DeadlineTest, HigherPriorityLevelBlocksLowerWhileBusy) {
  make();
  submit(ReqOp::read, 100);         // BE
  submit(ReqOp::read, 500, 8, rt());  // RT
  start();
  ASSERT_TRUE(wait_seen(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(sectors(), (Sectors{500}));  // BE waits while RT is in flight
  complete_held();
  ASSERT_TRUE(wait_seen(2));
  EXPECT_EQ(sectors(), (Sectors{500, 100}));
}

TEST_P(DeadlineTest, IdleIsBlockedByBestEffortBeforeAging) {
  make();
  submit(ReqOp::read, 10, 8, idle());
  advance_ms(5000);
  for (uint64_t s : {100, 200, 300}) submit(ReqOp::read, s);
  start();
  ASSERT_TRUE(wait_seen(3));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(sectors(), (Sectors{100, 200, 300}));
  complete_held();
  ASSERT_TRUE(wait_seen(4));
  EXPECT_EQ(sectors().back(), 10u);
}

TEST_P(DeadlineTest, AgesAnIdleRequestPastPrioAgingExpire) {
  make();
  submit(ReqOp::read, 10, 8, idle());
  advance_ms(10001);  // older than prio_aging_expire (10 s)
  for (uint64_t s : {100, 200, 300}) submit(ReqOp::read, s);
  submit(ReqOp::read, 400, 8, rt());
  start();
  ASSERT_TRUE(wait_seen(2));
  // Aging first: the idle request beats fresh RT and BE load; then RT.
  EXPECT_EQ(sectors(), (Sectors{10, 400}));
  complete_held();
  ASSERT_TRUE(wait_seen(5));
  EXPECT_EQ(sectors(), (Sectors{10, 400, 100, 200, 300}));
  auto st = deadline_stats(&d_->q());
  EXPECT_EQ(st.level[0].inserted, 1u);
  EXPECT_EQ(st.level[1].inserted, 3u);
  EXPECT_EQ(st.level[2].inserted, 1u);
  EXPECT_EQ(st.level[2].dispatched, 1u);
}

TEST_P(DeadlineTest, AtHeadInsertsGoFirst) {
  StubDriver& d = make();
  for (uint64_t s : {100, 200, 300}) submit(ReqOp::read, s);
  ElevatorQueue* eq = queue_elevator(&d.q());
  HwCtx* h = queue_hctx(&d.q(), 0);
  // Take all three out (as a dispatch would), then put the last one back at
  // the head and the others at the tail.
  Request* a = eq->type->ops.dispatch_request(h);
  Request* b = eq->type->ops.dispatch_request(h);
  Request* c = eq->type->ops.dispatch_request(h);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(c->sector, 300u);
  EXPECT_FALSE(eq->type->ops.has_work(h));
  ListNode head, tail;
  head.push_back(&c->queuelist);
  eq->type->ops.insert_requests(h, &head, kInsertAtHead);
  tail.push_back(&a->queuelist);
  tail.push_back(&b->queuelist);
  eq->type->ops.insert_requests(h, &tail, 0);
  EXPECT_TRUE(eq->type->ops.has_work(h));
  start();
  ASSERT_TRUE(wait_seen(3));
  EXPECT_EQ(sectors(), (Sectors{300, 100, 200}));
  EXPECT_EQ(deadline_stats(&d.q()).level[1].inserted, 3u);  // counted once each
}

TEST_P(DeadlineTest, CompletionsBalanceInsertions) {
  make();
  for (uint64_t s : {100, 300, 500}) submit(ReqOp::write, s);
  submit(ReqOp::write, 108);  // merges into 100
  start();
  ASSERT_TRUE(wait_seen(3));
  complete_held();
  ASSERT_TRUE(t_.wait_for(4));
  ASSERT_TRUE(wait_requests_freed(d_->q()));
  auto st = deadline_stats(&d_->q()).level[1];
  EXPECT_EQ(st.inserted, 3u);
  EXPECT_EQ(st.dispatched, 3u);
  EXPECT_EQ(st.completed, 3u);
}

INSTANTIATE_TEST_SUITE_P(Modes, DeadlineTest,
                         ::testing::Values(InsertMode::locked, InsertMode::split, InsertMode::split_parked),
                         mode_name);

}  // namespace
}  // namespace blkmq::test
