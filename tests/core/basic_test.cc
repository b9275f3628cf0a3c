// Submission, data integrity, bad input and attributes.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <thread>

#include "base/lockstat.h"
#include "blkmq/ioctx.h"
#include "core/core.h"
#include "support/stub_driver.h"

namespace blkmq::test {
namespace {

StubDriver::Options opts() { return StubDriver::Options{}; }

// A thread's I/O context stays readable after the thread exits (requests
// keep the pointer); a later thread gets a context with a new id.
TEST(IoContext, OutlivesItsThreadAndIdsAreNeverReused) {
  IoContext* first = nullptr;
  uint64_t first_id = 0;
  std::thread([&] {
    first = current_io_context();
    first->weight = 300;
    first_id = first->id;
  }).join();
  ASSERT_NE(first, nullptr);
  EXPECT_NE(first->id, 0u);  // still readable: ASan would flag a freed context
  uint64_t second_id = 0;
  uint16_t second_weight = 0;
  std::thread([&] {
    second_id = current_io_context()->id;
    second_weight = current_io_context()->weight;
  }).join();
  EXPECT_NE(second_id, first_id);
  EXPECT_EQ(second_weight, 100u);  // a recycled context starts from the defaults
  EXPECT_NE(current_io_context()->id, second_id);
}

TEST(Core, SyncWriteThenReadBack) {
  StubDriver d(opts());
  std::vector<uint8_t> w(8192), r(8192);
  for (size_t i = 0; i < w.size(); i++) w[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_EQ(d.q().write_sync(w.data(), 4096, 8192), BlkStatus::ok);
  ASSERT_EQ(d.q().read_sync(r.data(), 4096, 8192), BlkStatus::ok);
  EXPECT_EQ(w, r);
  ASSERT_TRUE(wait_requests_freed(d.q()));  // accounting follows the bio's end
  DiskStat s = d.q().disk_stat();
  EXPECT_EQ(s.write_ios, 1u);
  EXPECT_EQ(s.read_ios, 1u);
  EXPECT_EQ(s.write_sectors, 16u);
  EXPECT_EQ(s.read_sectors, 16u);
  EXPECT_EQ(s.in_flight, 0u);
}

TEST(Core, BadBiosFailCleanlyAndTouchNothing) {
  StubDriver d(opts());
  BioTracker t;
  std::vector<std::unique_ptr<BioTracker::Slot>> slots;
  slots.push_back(t.make(ReqOp::read, 100, 4096));                 // misaligned (sector not multiple of lbs? 100 bytes -> sector 0 but size ok)
  slots.back()->bio.sector = 0;
  slots.back()->bio.size = 1000;                                    // not a multiple of 512
  slots.push_back(t.make(ReqOp::write, (64ull << 20), 4096));      // beyond capacity
  slots.push_back(t.make(ReqOp::read, 0, 4096));
  slots.back()->bio.size = 8192;                                    // vector shorter than size
  slots.push_back(t.make(ReqOp::discard, 0, 4096));                 // unsupported
  slots.back()->bio.size = 4096;
  for (auto& s : slots) d.q().submit_bio(&s->bio);
  ASSERT_TRUE(t.wait_for(4));
  EXPECT_EQ(slots[0]->status, BlkStatus::inval);
  EXPECT_EQ(slots[1]->status, BlkStatus::inval);
  EXPECT_EQ(slots[2]->status, BlkStatus::inval);
  EXPECT_EQ(slots[3]->status, BlkStatus::notsupp);
  EXPECT_EQ(d.nr_seen(), 0u);
  EXPECT_EQ(t.doubles.load(), 0);
}

TEST(Core, AttributesReadWriteAndRefuseBadValues) {
  StubDriver d(opts());
  Queue& q = d.q();
  EXPECT_EQ(*q.attr("queue/scheduler"), "[none] mq-deadline kyber bfq");
  EXPECT_EQ(*q.attr("queue/rq_affinity"), "1");
  EXPECT_TRUE(q.set_attr("queue/rq_affinity", "2"));
  EXPECT_EQ(*q.attr("queue/rq_affinity"), "2");
  Status bad = q.set_attr("queue/rq_affinity", "3");
  EXPECT_FALSE(bad);
  EXPECT_EQ(bad.message(), "queue/rq_affinity: '3' is out of range; expected an integer from 0 to 2");
  EXPECT_EQ(*q.attr("queue/rq_affinity"), "2");
  EXPECT_FALSE(q.set_attr("queue/nomerges", "x"));
  EXPECT_FALSE(q.set_attr("queue/no_such_thing", "1"));
  EXPECT_FALSE(q.set_attr("stat", "1"));
  EXPECT_FALSE(q.set_attr("queue/scheduler", "cfq"));
  EXPECT_EQ(*q.attr("queue/sched_insert_run"), "[sync] async");
  EXPECT_TRUE(q.set_attr("queue/sched_insert_run", "async"));
  EXPECT_EQ(*q.attr("queue/sched_insert_run"), "sync [async]");
  EXPECT_FALSE(q.set_attr("queue/task_completion", "maybe"));
  EXPECT_EQ(*q.attr("queue/task_completion"), "[local] softirq");
  EXPECT_EQ(*q.attr("queue/submit_plug"), "[none] implicit");
  EXPECT_EQ(*q.attr("queue/plug_direct_issue"), "1");
  EXPECT_EQ(*q.attr("queue/io_timeout"), "30000");
  EXPECT_EQ(*q.attr("queue/max_sectors_kb"), "1280");
  EXPECT_TRUE(q.set_attr("queue/max_sectors_kb", "64"));
  EXPECT_FALSE(q.set_attr("queue/max_sectors_kb", "4096"));
  EXPECT_EQ(*q.attr("queue/nr_requests"), "64");
  EXPECT_TRUE(q.set_attr("queue/nr_requests", "2"));  // clamped to 4 like the kernel
  EXPECT_EQ(*q.attr("queue/nr_requests"), "4");
  EXPECT_FALSE(q.set_attr("queue/nr_requests", "65"));
  EXPECT_EQ(*q.attr("mq/0/nr_tags"), "64");
  EXPECT_FALSE(q.attr("mq/9/nr_tags"));
}

// mq/<n>/dispatch_lock_stat counts the hctx lock: a request the driver
// refuses (resource) goes to the dispatch list under it, and is taken off
// it under it again. ctx_lock_stat parses too.
TEST(Core, HctxLockStatisticsCountTheDispatchList) {
  StubDriver d(opts());
  base::LockStat before, after, ctx;
  ASSERT_TRUE(base::LockStat::parse(*d.q().attr("mq/0/dispatch_lock_stat"), &before));
  ASSERT_TRUE(base::LockStat::parse(*d.q().attr("mq/0/ctx_lock_stat"), &ctx));
  d.busy_next = 1;
  std::vector<uint8_t> b(4096);
  ASSERT_EQ(d.q().write_sync(b.data(), 0, 4096), BlkStatus::ok);
  ASSERT_TRUE(wait_requests_freed(d.q()));
  ASSERT_TRUE(base::LockStat::parse(*d.q().attr("mq/0/dispatch_lock_stat"), &after));
  EXPECT_GE(after.acquired, before.acquired + 2);
  EXPECT_LE(after.hold_samples, after.acquired / base::kHoldSampleEvery);
}

TEST(Core, StatHasTheKernelsSeventeenFields) {
  StubDriver d(opts());
  std::vector<uint8_t> b(4096);
  ASSERT_EQ(d.q().write_sync(b.data(), 0, 4096), BlkStatus::ok);
  ASSERT_TRUE(wait_requests_freed(d.q()));
  std::istringstream in(*d.q().attr("stat"));
  std::vector<uint64_t> f;
  uint64_t v;
  while (in >> v) f.push_back(v);
  ASSERT_EQ(f.size(), 17u);
  EXPECT_EQ(f[4], 1u);  // write ios
  EXPECT_EQ(f[6], 8u);  // write sectors
  EXPECT_EQ(*d.q().attr("inflight"), "       0        0");
}

TEST(Core, ManyAsyncBiosAllCompleteOnceAndNoTagLeaks) {
  auto o = opts();
  o.depth = 4;
  o.mode = CompleteMode::irq_thread;
  StubDriver d(o);
  BioTracker t;
  std::vector<std::unique_ptr<BioTracker::Slot>> slots;
  for (int i = 0; i < 256; i++) slots.push_back(t.make(ReqOp::write, uint64_t(i) * 8192, 4096));
  for (auto& s : slots) d.q().submit_bio(&s->bio);
  ASSERT_TRUE(t.wait_for(256));
  EXPECT_EQ(t.doubles.load(), 0);
  EXPECT_EQ(t.errors.load(), 0);
  EXPECT_LE(d.max_inflight.load(), 4);
  ASSERT_TRUE(wait_requests_freed(d.q()));
  auto* q = static_cast<QueueImpl*>(&d.q());
  EXPECT_EQ(q->hctx(0)->tags->bitmap_tags.bitmap().weight(), 0u);
}

TEST(Core, NowaitFailsInsteadOfSleepingForATag) {
  auto o = opts();
  o.depth = 2;
  o.mode = CompleteMode::never;
  StubDriver d(o);
  BioTracker t;
  auto a = t.make(ReqOp::read, 0, 4096);
  auto b = t.make(ReqOp::read, 8192, 4096);
  auto c = t.make(ReqOp::read, 16384, 4096, kBioNowait);
  d.q().submit_bio(&a->bio);
  d.q().submit_bio(&b->bio);
  d.q().submit_bio(&c->bio);
  ASSERT_TRUE(t.wait_for(1));
  EXPECT_EQ(c->status, BlkStatus::again);
  for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
  ASSERT_TRUE(t.wait_for(3));
}

// mq/<n>/tags_wait_lock_stat counts the tag wait queues' locks: a submitter
// that finds no tag queues itself under one, and the freed tag's wake-up
// unlinks it under the same lock.
TEST(Core, TagsWaitLockStatisticsCountASubmitterThatSleptForATag) {
  auto o = opts();
  o.depth = 2;
  o.mode = CompleteMode::never;
  StubDriver d(o);
  auto waits = [&] {
    base::LockStat s;
    EXPECT_TRUE(base::LockStat::parse(*d.q().attr("mq/0/tags_wait_lock_stat"), &s));
    return s.acquired;
  };
  EXPECT_EQ(waits(), 0u);
  BioTracker t;
  auto a = t.make(ReqOp::read, 0, 4096);
  auto b = t.make(ReqOp::read, 8192, 4096);
  auto c = t.make(ReqOp::read, 16384, 4096);
  d.q().submit_bio(&a->bio);
  d.q().submit_bio(&b->bio);
  std::thread sleeper([&] { d.q().submit_bio(&c->bio); });  // no tag left: sleeps
  EXPECT_TRUE(eventually([&] { return waits() >= 1; }, 5000));
  for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
  sleeper.join();
  std::vector<Request*> last;
  EXPECT_TRUE(eventually([&] { return !(last = d.take_held()).empty(); }, 5000));
  for (Request* rq : last) end_request(rq, BlkStatus::ok);
  ASSERT_TRUE(t.wait_for(3));
  EXPECT_GE(waits(), 2u);
}

TEST(Core, PolledBiosCompleteThroughPoll) {
  auto o = opts();
  o.nr_poll = 1;
  StubDriver d(o);
  BioTracker t;
  auto s = t.make(ReqOp::read, 0, 4096, kBioPolled);
  d.q().submit_bio(&s->bio);
  EXPECT_EQ(t.ended.load(), 0);
  int found = 0;
  for (int i = 0; i < 1000 && !found; i++) found += d.q().poll(&s->bio);
  EXPECT_EQ(found, 1);
  EXPECT_EQ(t.ended.load(), 1);
  EXPECT_EQ(d.seen().at(0).hctx, 1u);  // the poll queue follows the default queue
}

TEST(Core, PolledBioOnQueueWithoutPollQueuesIsRefused) {
  StubDriver d(opts());
  BioTracker t;
  auto s = t.make(ReqOp::read, 0, 4096, kBioPolled);
  d.q().submit_bio(&s->bio);
  ASSERT_TRUE(t.wait_for(1));
  EXPECT_EQ(s->status, BlkStatus::notsupp);
}

TEST(Core, TagSetValidation) {
  DriverOps ops;
  TagSetConfig c;
  EXPECT_FALSE(TagSet::create(c));  // no ops
  ops.queue_rq = [](HwCtx*, const QueueData&) { return BlkStatus::ok; };
  c.ops = &ops;
  c.queue_depth = 0;
  EXPECT_FALSE(TagSet::create(c));
  c.queue_depth = 20000;
  EXPECT_FALSE(TagSet::create(c));
  c.queue_depth = 8;
  c.reserved_tags = 8;
  EXPECT_FALSE(TagSet::create(c));
  c.reserved_tags = 1;
  EXPECT_TRUE(TagSet::create(c));
}

}  // namespace
}  // namespace blkmq::test

namespace blkmq::test {
namespace {

TEST(Passthrough, ReservedTagIsAvailableWhenNormalTagsAreExhausted) {
  StubDriver::Options o;
  o.depth = 4;
  o.mode = CompleteMode::never;
  DriverOps ops;
  StubDriver d(o);
  // A second set with one reserved tag on the same driver callbacks.
  TagSetConfig c = d.set().config();
  c.reserved_tags = 1;
  auto set = TagSet::create(c);
  ASSERT_TRUE(set);
  QueueConfig qc;
  qc.scheduler = "none";
  qc.limits.capacity_sectors = 1 << 20;
  qc.queuedata = &d;
  auto q = Queue::create(*set.value(), qc);
  ASSERT_TRUE(q);
  BioTracker t;
  std::vector<std::unique_ptr<BioTracker::Slot>> s;
  for (int i = 0; i < 3; i++) {
    s.push_back(t.make(ReqOp::read, uint64_t(i) * 8192, 4096));
    q.value()->submit_bio(&s.back()->bio);
  }
  EXPECT_EQ(q.value()->alloc_request(ReqOp::read, false, true), nullptr);  // normal tags exhausted
  Request* rq = q.value()->alloc_request(ReqOp::flush, true, true);
  ASSERT_NE(rq, nullptr);
  EXPECT_TRUE(rq->rq_flags & kRqfResv);
  std::atomic<int> done{0};
  rq->end_io = [](Request* r, BlkStatus) {
    static_cast<std::atomic<int>*>(r->end_io_data)->fetch_add(1);
    return true;
  };
  rq->end_io_data = &done;
  q.value()->execute_request_nowait(rq);
  auto held = d.take_held();
  ASSERT_EQ(held.size(), 4u);
  EXPECT_EQ(held[3]->op, ReqOp::flush);  // the command went straight to the driver
  for (Request* r : held) end_request(r, BlkStatus::ok);
  EXPECT_EQ(done.load(), 1);
  ASSERT_TRUE(t.wait_for(3));
}

TEST(Passthrough, ExecuteRequestWaits) {
  StubDriver d(StubDriver::Options{});
  Request* rq = d.q().alloc_request(ReqOp::flush);
  ASSERT_NE(rq, nullptr);
  EXPECT_EQ(d.q().execute_request(rq), BlkStatus::ok);
  EXPECT_EQ(d.nr_seen(), 1u);
  Request* unused = d.q().alloc_request(ReqOp::flush);
  d.q().free_request(unused);
  EXPECT_TRUE(wait_requests_freed(d.q()));
}

TEST(Batch, PolledCompletionsReturnTagsInGroups) {
  StubDriver::Options o;
  o.nr_poll = 1;
  o.depth = 64;
  StubDriver d(o);
  BioTracker t;
  std::vector<std::unique_ptr<BioTracker::Slot>> s;
  {
    Plug plug;
    for (int i = 0; i < 40; i++) {
      s.push_back(t.make(ReqOp::read, uint64_t(i) * 8192, 4096, kBioPolled));
      d.q().submit_bio(&s.back()->bio);
    }
  }
  int found = 0;
  for (int i = 0; i < 1000 && found < 40; i++) found += d.q().poll(&s[0]->bio);
  EXPECT_EQ(found, 40);
  ASSERT_TRUE(t.wait_for(40));
  ASSERT_TRUE(wait_requests_freed(d.q()));
  auto* q = static_cast<QueueImpl*>(&d.q());
  EXPECT_EQ(q->hctx(1)->tags->bitmap_tags.bitmap().weight(), 0u);
  EXPECT_EQ(d.q().disk_stat().read_ios, 40u);
}

}  // namespace
}  // namespace blkmq::test
