// mq-deadline dispatch order: sector batches, FIFO deadlines, writes_starved,
// fifo_batch, priority levels and aging, at-head inserts. Every test runs in
// locked mode, split mode, and split mode with every insert parked.
#include "support/deadline_test_util.h"

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

// Issue 10's first departure: a depth-1 device, nr_requests raised from its
// default (2) to 64, a reader and a writer each keeping 32 requests queued
// and refilling one per completion. Every request of a direction is above
// the ones before it, so no batch ends for want of a higher sector: batches
// run fifo_batch (16) long and writes get one batch after writes_starved (2)
// read batches, as the kernel's mq-deadline does. Before the fix nr_requests
// kept queue/async_depth at 2, writes could hold only two tags, and every
// write batch ended after two requests (read:write 23:1 instead of 2:1).
// The bios are nowait, so a tag limit shows as failed submissions, not a hang.
TEST_P(DeadlineTest, WriteBatchesRunFifoBatchLongWithBothDirectionsBacklogged) {
  make(/*one_at_a_time=*/true, /*depth=*/1);
  ASSERT_TRUE(d_->q().set_attr("queue/nr_requests", "64"));
  EXPECT_EQ(*d_->q().attr("queue/async_depth"), "64");
  uint64_t next[2] = {0, 1u << 16};  // next sector of reads, of writes (32 MiB on)
  auto refill = [&](ReqOp op) {
    uint64_t& s = next[op == ReqOp::write];
    slots_.push_back(t_.make(op, s << 9, 4096, kBioNowait));
    s += 16;  // a gap: no two requests merge
    submitted_++;
    d_->q().submit_bio(&slots_.back()->bio);
  };
  for (int i = 0; i < 32; i++) refill(ReqOp::read);
  for (int i = 0; i < 32; i++) refill(ReqOp::write);
  ASSERT_EQ(t_.errors.load(), 0) << "a nowait submission found no scheduler tag";
  constexpr size_t kSteps = 16 * 3 * 4;  // four rounds of write, read, read batches
  start();
  for (size_t i = 1; i <= kSteps; i++) {
    ASSERT_TRUE(wait_seen(i)) << "stalled at " << i;
    complete_held();
    refill(d_->seen()[i - 1].op);
  }
  EXPECT_EQ(t_.errors.load(), 0);
  // Runs of one direction, in dispatch order: last_dir starts as write.
  std::vector<std::pair<bool, int>> runs;
  for (size_t i = 0; i < kSteps; i++) {
    const bool w = d_->seen()[i].op == ReqOp::write;
    if (runs.empty() || runs.back().first != w) runs.push_back({w, 0});
    runs.back().second++;
  }
  std::vector<std::pair<bool, int>> want;
  for (int r = 0; r < 4; r++) want.insert(want.end(), {{true, 16}, {false, 32}});
  EXPECT_EQ(runs, want);
}

INSTANTIATE_TEST_SUITE_P(Modes, DeadlineTest,
                         ::testing::Values(InsertMode::locked, InsertMode::split, InsertMode::split_parked),
                         mode_name);

}  // namespace
}  // namespace blkmq::test
