// Completion routing (inline, softirq thread, irq exit, IPI-style handoff)
// and the flush machinery.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <thread>

#include "support/stub_driver.h"

namespace blkmq::test {
namespace {

using Slots = std::vector<std::unique_ptr<BioTracker::Slot>>;

std::string thread_name() {
  char n[32] = {};
  pthread_getname_np(pthread_self(), n, sizeof n);
  return n;
}

struct Seen {
  std::mutex mu;
  std::vector<std::pair<std::string, ExecContext>> where;
};

void pin_to(unsigned cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

void unpin() {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned c = 0; c < nr_cpu_ids(); c++) CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// Seed 002: a completion from task context on a single-queue device.
TEST(Routing, TaskCompletionSoftirqWakesKsoftirqdLocalRunsInline) {
  StubDriver::Options o;
  o.mode = CompleteMode::inline_complete;
  StubDriver d(o);
  Seen seen;
  d.on_complete = [&](Request*) {
    std::lock_guard<std::mutex> g(seen.mu);
    seen.where.emplace_back(thread_name(), current_context());
  };
  pin_to(0);
  const std::string me = thread_name();
  std::vector<uint8_t> b(4096);
  ASSERT_TRUE(d.q().set_attr("queue/task_completion", "softirq"));
  ASSERT_EQ(d.q().read_sync(b.data(), 0, 4096), BlkStatus::ok);
  ASSERT_TRUE(d.q().set_attr("queue/task_completion", "local"));
  ASSERT_EQ(d.q().read_sync(b.data(), 0, 4096), BlkStatus::ok);
  unpin();
  ASSERT_EQ(seen.where.size(), 2u);
  EXPECT_EQ(seen.where[0].first.rfind("ksoftirqd/", 0), 0u) << seen.where[0].first;
  EXPECT_EQ(seen.where[0].second, ExecContext::softirq);
  EXPECT_EQ(seen.where[1].first, me);
  EXPECT_EQ(seen.where[1].second, ExecContext::task);
}

// From hardirq context the softirq runs at irq exit, on the same thread.
TEST(Routing, HardirqCompletionRunsSoftirqAtIrqExit) {
  StubDriver::Options o;
  o.mode = CompleteMode::irq_thread;
  StubDriver d(o);
  Seen seen;
  d.on_complete = [&](Request*) {
    std::lock_guard<std::mutex> g(seen.mu);
    seen.where.emplace_back(thread_name(), current_context());
  };
  pin_to(0);
  std::vector<uint8_t> b(4096);
  ASSERT_EQ(d.q().read_sync(b.data(), 0, 4096), BlkStatus::ok);
  unpin();
  ASSERT_EQ(seen.where.size(), 1u);
  EXPECT_EQ(seen.where[0].second, ExecContext::softirq);
  EXPECT_EQ(seen.where[0].first.rfind("ksoftirqd/", 0), std::string::npos);
}

// rq_affinity=2 forces the completion back to the submitting CPU.
TEST(Routing, RqAffinityTwoHandsOffToTheSubmittingCpu) {
  if (nr_cpu_ids() < 2) GTEST_SKIP() << "needs two CPUs";
  StubDriver::Options o;
  o.mode = CompleteMode::never;
  StubDriver d(o);
  ASSERT_TRUE(d.q().set_attr("queue/rq_affinity", "2"));
  Seen seen;
  d.on_complete = [&](Request*) {
    std::lock_guard<std::mutex> g(seen.mu);
    seen.where.emplace_back(thread_name(), current_context());
  };
  BioTracker t;
  Slots s;
  pin_to(0);
  s.push_back(t.make(ReqOp::read, 0, 4096));
  d.q().submit_bio(&s.back()->bio);
  unpin();
  auto held = d.take_held();
  ASSERT_EQ(held.size(), 1u);
  std::thread other([&] {
    pin_to(1);
    HardirqScope irq;
    complete_request(held[0], BlkStatus::ok);
  });
  other.join();
  ASSERT_TRUE(t.wait_for(1));
  ASSERT_EQ(seen.where.size(), 1u);
  EXPECT_EQ(seen.where[0].first, "ksoftirqd/0");
}

TEST(Routing, DoubleCompletionIsIgnored) {
  StubDriver::Options o;
  o.mode = CompleteMode::never;
  StubDriver d(o);
  BioTracker t;
  auto s = t.make(ReqOp::read, 0, 4096);
  d.q().submit_bio(&s->bio);
  auto held = d.take_held();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_TRUE(complete_request(held[0], BlkStatus::ok));
  ASSERT_TRUE(t.wait_for(1));
  ASSERT_TRUE(wait_requests_freed(d.q()));
  EXPECT_FALSE(complete_request(held[0], BlkStatus::ioerr));  // a late second completion
  EXPECT_EQ(s->ends.load(), 1);
  EXPECT_EQ(s->status, BlkStatus::ok);
}

// complete_request_batched (issue 29): one winner as complete_request; a
// request it may batch ends only with the batch, an error at once, and a
// late second completion of a batched one is refused.
TEST(Routing, CompleteRequestBatchedEndsOnceInTheBatchAndErrorsAtOnce) {
  StubDriver::Options o;
  o.mode = CompleteMode::never;
  StubDriver d(o);
  ASSERT_TRUE(d.q().set_attr("queue/rq_affinity", "0"));
  ASSERT_TRUE(d.q().set_attr("queue/task_completion", "local"));
  BioTracker t;
  Slots s;
  for (int i = 0; i < 3; i++) {
    s.push_back(t.make(ReqOp::read, uint64_t(i) * 8192, 4096));
    d.q().submit_bio(&s.back()->bio);
  }
  auto held = d.take_held();
  ASSERT_EQ(held.size(), 3u);
  IoCompBatch iob;
  EXPECT_TRUE(complete_request_batched(held[0], BlkStatus::ok, &iob));
  EXPECT_TRUE(complete_request_batched(held[1], BlkStatus::ioerr, &iob));
  EXPECT_FALSE(complete_request_batched(held[0], BlkStatus::ioerr, &iob));
  EXPECT_EQ(s[0]->ends.load(), 0);  // waits for the batch
  EXPECT_EQ(s[1]->ends.load(), 1);  // an error is never batched
  EXPECT_EQ(s[1]->status, BlkStatus::ioerr);
  end_request_batch(&iob);
  EXPECT_EQ(s[0]->ends.load(), 1);
  EXPECT_EQ(s[0]->status, BlkStatus::ok);
  EXPECT_TRUE(complete_request(held[2], BlkStatus::ok));
  ASSERT_TRUE(t.wait_for(3));
  ASSERT_TRUE(wait_requests_freed(d.q()));
  for (auto& x : s) EXPECT_EQ(x->ends.load(), 1);
  EXPECT_EQ(*d.q().attr("mq/0/tags_busy"), "0");
}

// ---- flush machinery ----

std::vector<std::string> ops_seen(StubDriver& d) {
  std::vector<std::string> v;
  for (auto& r : d.seen()) {
    std::string s = r.op == ReqOp::flush ? "F" : r.op == ReqOp::write ? "W" : "R";
    if (r.flags & kBioFua) s += "+fua";
    v.push_back(s);
  }
  return v;
}

TEST(Flush, WithoutWriteCacheFlagsAreDroppedAndEmptyFlushesEndAtOnce) {
  StubDriver d(StubDriver::Options{});
  std::vector<uint8_t> b(4096);
  EXPECT_EQ(d.q().write_sync(b.data(), 0, 4096, kBioFua | kBioPreflush), BlkStatus::ok);
  EXPECT_EQ(d.q().flush_sync(), BlkStatus::ok);
  EXPECT_EQ(ops_seen(d), (std::vector<std::string>{"W"}));
}

TEST(Flush, PreflushAndEmulatedFuaBecomeFlushWriteFlush) {
  StubDriver::Options o;
  o.write_cache = true;
  o.fua = false;
  StubDriver d(o);
  std::vector<uint8_t> b(4096, 7);
  EXPECT_EQ(d.q().write_sync(b.data(), 0, 4096, kBioFua | kBioPreflush), BlkStatus::ok);
  EXPECT_EQ(ops_seen(d), (std::vector<std::string>{"F", "W", "F"}));
  EXPECT_EQ(d.mem()[0], 7);
  d.clear_seen();
  EXPECT_EQ(d.q().flush_sync(), BlkStatus::ok);
  EXPECT_EQ(ops_seen(d), (std::vector<std::string>{"F"}));
  ASSERT_TRUE(wait_requests_freed(d.q()));  // accounting follows the bio's end
  // As the kernel counts them: the data write and the empty flush are
  // writes; each of the three flushes the device saw is a flush.
  DiskStat st = d.q().disk_stat();
  EXPECT_EQ(st.write_ios, 2u);
  EXPECT_EQ(st.write_sectors, 8u);
  EXPECT_EQ(st.flush_ios, 3u);
}

// Regression: flush_ios counted the empty flush bios (as their own group)
// and none of the flushes the flush machinery sends for a preflush or an
// emulated FUA, where the kernel's diskstats count every flush sent to the
// device (blk_account_io_flush) and an empty flush bio as a write with no
// data. The kernel on a loop device (write back, no FUA), read from
// /sys/block/loopN/stat: two fsync()s give writes +2, flushes +2; an
// O_DIRECT|O_DSYNC 4 KiB write (FUA, emulated, then fsync's flush) gives
// writes +2, 8 sectors, flushes +2.
TEST(Flush, FlushesSentToTheDeviceAreCountedAsTheKernelCountsThem) {
  StubDriver::Options o;
  o.write_cache = true;
  o.fua = false;
  StubDriver d(o);
  EXPECT_EQ(d.q().flush_sync(), BlkStatus::ok);
  EXPECT_EQ(d.q().flush_sync(), BlkStatus::ok);
  ASSERT_TRUE(wait_requests_freed(d.q()));
  DiskStat st = d.q().disk_stat();
  EXPECT_EQ(st.write_ios, 2u);
  EXPECT_EQ(st.write_sectors, 0u);
  EXPECT_EQ(st.flush_ios, 2u);
  std::vector<uint8_t> b(4096, 1);
  EXPECT_EQ(d.q().write_sync(b.data(), 0, 4096, kBioFua), BlkStatus::ok);
  EXPECT_EQ(d.q().flush_sync(), BlkStatus::ok);
  ASSERT_TRUE(wait_requests_freed(d.q()));
  st = d.q().disk_stat();
  EXPECT_EQ(st.write_ios, 4u);
  EXPECT_EQ(st.write_sectors, 8u);
  EXPECT_EQ(st.flush_ios, 4u);
  // A device with native FUA gets no flush for a FUA write.
  o.fua = true;
  StubDriver n(o);
  EXPECT_EQ(n.q().write_sync(b.data(), 0, 4096, kBioFua), BlkStatus::ok);
  ASSERT_TRUE(wait_requests_freed(n.q()));
  EXPECT_EQ(n.q().disk_stat().flush_ios, 0u);
  EXPECT_EQ(n.q().disk_stat().write_ios, 1u);
}

TEST(Flush, NativeFuaIsPassedThrough) {
  StubDriver::Options o;
  o.write_cache = true;
  o.fua = true;
  StubDriver d(o);
  std::vector<uint8_t> b(4096);
  EXPECT_EQ(d.q().write_sync(b.data(), 0, 4096, kBioFua), BlkStatus::ok);
  EXPECT_EQ(ops_seen(d), (std::vector<std::string>{"W+fua"}));
}

TEST(Flush, ConcurrentFlushesAreBatchedAndAllEnd) {
  StubDriver::Options o;
  o.write_cache = true;
  o.mode = CompleteMode::irq_thread;
  StubDriver d(o);
  BioTracker t;
  Slots s;
  for (int i = 0; i < 32; i++) {
    s.push_back(t.make(ReqOp::write, uint64_t(i) * 4096, 4096, i % 2 ? kBioPreflush : kBioFua));
    d.q().submit_bio(&s.back()->bio);
    s.push_back(t.make(ReqOp::flush, 0, 0, kBioPreflush));
    d.q().submit_bio(&s.back()->bio);
  }
  ASSERT_TRUE(t.wait_for(64));
  EXPECT_EQ(t.errors.load(), 0);
  EXPECT_EQ(t.doubles.load(), 0);
  size_t flushes = 0;
  for (auto& x : ops_seen(d)) flushes += x == "F";
  EXPECT_LE(flushes, 64u);  // at most one per waiter; batching makes it fewer
  ASSERT_TRUE(wait_requests_freed(d.q()));
}

TEST(Flush, FailedFlushFailsTheWrite) {
  // The driver fails every flush.
  DriverOps ops;
  ops.queue_rq = [](HwCtx*, const QueueData& bd) {
    if (bd.rq->op == ReqOp::flush) return BlkStatus::ioerr;
    start_request(bd.rq);
    end_request(bd.rq, BlkStatus::ok);
    return BlkStatus::ok;
  };
  TagSetConfig c;
  c.ops = &ops;
  auto set = TagSet::create(c);
  QueueConfig qc;
  qc.scheduler = "none";
  qc.limits.capacity_sectors = 1 << 20;
  qc.limits.write_cache = true;
  auto q = Queue::create(*set.value(), qc);
  ASSERT_TRUE(q);
  std::vector<uint8_t> b(4096);
  EXPECT_EQ(q.value()->write_sync(b.data(), 0, 4096, kBioPreflush), BlkStatus::ioerr);
  EXPECT_EQ(q.value()->flush_sync(), BlkStatus::ioerr);
}

}  // namespace
}  // namespace blkmq::test
