// Kyber with I/O: token pools cap what reaches the driver per domain,
// throttled requests merge in their kcq, requeues give tokens back, and
// switching schedulers under I/O loses nothing.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <thread>

#include "support/stub_driver.h"
#include "sched/kyber/kyber.h"

namespace blkmq::test {
namespace {

using namespace blkmq::kyber;
using Slots = std::vector<std::unique_ptr<BioTracker::Slot>>;

constexpr uint64_t kMs = 1'000'000;

// Keeps the test thread on one CPU, so its bios go to one ctx (and kcq).
class PinToOneCpu {
 public:
  PinToOneCpu() {
    pthread_getaffinity_np(pthread_self(), sizeof old_, &old_);
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &old_)) {
        CPU_SET(c, &one);
        break;
      }
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  }
  ~PinToOneCpu() { pthread_setaffinity_np(pthread_self(), sizeof old_, &old_); }

 private:
  cpu_set_t old_;
};

StubDriver::Options kyber_opts(CompleteMode mode, unsigned nr_queues = 1, Runtime* rt = nullptr) {
  StubDriver::Options o;
  o.scheduler = "kyber";
  o.mode = mode;
  o.nr_queues = nr_queues;
  o.runtime = rt;
  return o;
}

// Drives the write pool down to `target` tokens through the feedback loop
// (congested reads squeeze writes, which are within their target).
void squeeze_writes(ElevatorQueue* eq, unsigned target) {
  for (int i = 0; i < 10 && domain_depth(eq, kWrite) > target; i++) {
    for (int n = 0; n < 600; n++) {
      record_latency(eq, kRead, kIoLatency, 3 * kMs);
      record_latency(eq, kWrite, kTotalLatency, 1 * kMs);
    }
    run_timer_work(eq, 1000 + i);
  }
}

// Completes what the driver holds, on a manual runtime, until `n` bios
// ended (the driver keeps receiving requests as tokens free, through the
// runs the completions queue). False if a round makes no progress first.
bool complete_held_until(ManualRuntime& rt, StubDriver& d, BioTracker& t, int n, unsigned max_held_writes) {
  for (size_t progress = 1; progress && t.ended.load() < n;) {
    auto held = d.take_held();
    unsigned writes = 0;
    for (Request* rq : held) writes += rq->op == ReqOp::write;
    EXPECT_LE(writes, max_held_writes);
    for (Request* rq : held) complete_request(rq, BlkStatus::ok);
    progress = held.size() + rt.run_pending();
  }
  return t.ended.load() == n;
}

TEST(KyberTokens, CapWritesInTheDriverWhileReadsPass) {
  PinToOneCpu pin;
  ManualRuntime rt;
  StubDriver d(kyber_opts(CompleteMode::never, 1, &rt));
  ElevatorQueue* eq = queue_elevator(&d.q());
  squeeze_writes(eq, 8);
  ASSERT_EQ(domain_depth(eq, kWrite), 8u);
  BioTracker t;
  Slots s;
  for (int i = 0; i < 24; i++) {  // gaps between them: no merges
    s.push_back(t.make(ReqOp::write, uint64_t(i) * 8192, 4096));
    d.q().submit_bio(&s.back()->bio);
  }
  EXPECT_EQ(d.nr_seen(), 8u);
  EXPECT_EQ(domain_tokens_in_use(eq, kWrite), 8u);
  for (int i = 0; i < 10; i++) {
    s.push_back(t.make(ReqOp::read, (1 << 20) + uint64_t(i) * 8192, 4096));
    d.q().submit_bio(&s.back()->bio);
  }
  EXPECT_EQ(d.nr_seen(), 18u);  // reads have their own tokens
  EXPECT_EQ(domain_tokens_in_use(eq, kRead), 10u);
  // Each freed write token reruns the hctx (wait entry), letting the next
  // write through; never more than 8 writes at the driver.
  ASSERT_TRUE(complete_held_until(rt, d, t, 34, 8));
  EXPECT_EQ(d.nr_seen(), 34u);
  EXPECT_EQ(t.doubles.load(), 0);
  for (unsigned dom = 0; dom < kNrDomains; dom++)
    EXPECT_EQ(domain_tokens_in_use(eq, Domain(dom)), 0u) << dom;
}

TEST(KyberTokens, DiscardAndOtherDomainsHaveTheirOwnPools) {
  PinToOneCpu pin;
  ManualRuntime rt;
  StubDriver d(kyber_opts(CompleteMode::never, 1, &rt));
  // A queue that accepts discard and write-zeroes, on the same driver.
  QueueConfig qc;
  qc.limits.capacity_sectors = (64ull << 20) >> 9;
  qc.limits.max_discard_sectors = 2048;
  qc.limits.max_write_zeroes_sectors = 2048;
  qc.queuedata = &d;
  qc.scheduler = "kyber";
  auto qr = Queue::create(d.set(), qc);
  ASSERT_TRUE(qr);
  std::unique_ptr<Queue> q = std::move(qr.value());
  // wbt (on by default with kyber, as in the kernel) would hold discards
  // to its background limit of 4 before kyber sees them: this test is
  // about kyber's pools.
  ASSERT_TRUE(q->set_attr("queue/wbt_lat_usec", "0").ok());
  ElevatorQueue* eq = queue_elevator(q.get());
  BioTracker t;
  Slots s;
  for (int i = 0; i < 24; i++) {
    s.push_back(t.make(ReqOp::write_zeroes, uint64_t(i) * 8192, 4096));
    s.back()->bio.size = 4096;  // a length without data
    q->submit_bio(&s.back()->bio);
  }
  EXPECT_EQ(d.nr_seen(), 16u);  // the OTHER pool holds 16 tokens
  EXPECT_EQ(domain_tokens_in_use(eq, kOther), 16u);
  for (int i = 0; i < 8; i++) {
    s.push_back(t.make(ReqOp::discard, (8 << 20) + uint64_t(i) * 8192, 4096));
    s.back()->bio.size = 4096;
    q->submit_bio(&s.back()->bio);
  }
  EXPECT_EQ(d.nr_seen(), 24u);
  EXPECT_EQ(domain_tokens_in_use(eq, kDiscard), 8u);
  ASSERT_TRUE(complete_held_until(rt, d, t, 32, 0));
  EXPECT_EQ(domain_tokens_in_use(eq, kOther), 0u);
  EXPECT_EQ(domain_tokens_in_use(eq, kDiscard), 0u);
  q.reset();
}

TEST(KyberMerge, ThrottledWritesMergeInTheirKcq) {
  PinToOneCpu pin;
  ManualRuntime rt;
  StubDriver d(kyber_opts(CompleteMode::never, 1, &rt));
  ElevatorQueue* eq = queue_elevator(&d.q());
  squeeze_writes(eq, 1);
  ASSERT_EQ(domain_depth(eq, kWrite), 1u);
  BioTracker t;
  Slots s;
  s.push_back(t.make(ReqOp::write, 8 << 20, 4096));  // takes the only token
  d.q().submit_bio(&s.back()->bio);
  ASSERT_EQ(d.nr_seen(), 1u);
  // Sequential writes wait in the kcq without a token, and merge there:
  // back merges onto 64 KiB, then one front merge at 60 KiB.
  for (int i = 0; i < 8; i++) {
    s.push_back(t.make(ReqOp::write, 64 * 1024 + uint64_t(i) * 4096, 4096));
    d.q().submit_bio(&s.back()->bio);
  }
  s.push_back(t.make(ReqOp::write, 60 * 1024, 4096));
  d.q().submit_bio(&s.back()->bio);
  EXPECT_EQ(d.nr_seen(), 1u);
  EXPECT_EQ(d.q().disk_stat().write_merges, 8u);
  ASSERT_TRUE(complete_held_until(rt, d, t, 10, 1));
  auto seen = d.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].sector, (60u * 1024) >> 9);
  EXPECT_EQ(seen[1].bytes, 9u * 4096);
  EXPECT_EQ(seen[1].nr_bios, 9u);
}

TEST(KyberMerge, ReadsDoNotMergeIntoWrites) {
  PinToOneCpu pin;
  ManualRuntime rt;
  StubDriver d(kyber_opts(CompleteMode::never, 1, &rt));
  ElevatorQueue* eq = queue_elevator(&d.q());
  squeeze_writes(eq, 1);
  BioTracker t;
  Slots s;
  s.push_back(t.make(ReqOp::write, 8 << 20, 4096));
  d.q().submit_bio(&s.back()->bio);
  s.push_back(t.make(ReqOp::write, 0, 4096));  // waits in the write kcq
  d.q().submit_bio(&s.back()->bio);
  s.push_back(t.make(ReqOp::read, 4096, 4096));  // adjacent, other domain
  d.q().submit_bio(&s.back()->bio);
  EXPECT_EQ(d.nr_seen(), 2u);  // the first write and the read
  ASSERT_TRUE(complete_held_until(rt, d, t, 3, 1));
  EXPECT_EQ(d.nr_seen(), 3u);
}

TEST(KyberRequeue, RequeuedRequestsGiveTheirTokenBack) {
  StubDriver d(kyber_opts(CompleteMode::irq_thread));
  ElevatorQueue* eq = queue_elevator(&d.q());
  d.requeue_next = 10;
  BioTracker t;
  Slots s;
  for (int i = 0; i < 40; i++) {
    s.push_back(t.make(i % 2 ? ReqOp::read : ReqOp::write, uint64_t(i) * 8192, 4096));
    d.q().submit_bio(&s.back()->bio);
  }
  ASSERT_TRUE(t.wait_for(40));
  ASSERT_TRUE(wait_requests_freed(d.q()));
  EXPECT_EQ(t.errors.load(), 0);
  EXPECT_EQ(t.doubles.load(), 0);
  for (unsigned dom = 0; dom < kNrDomains; dom++)
    EXPECT_EQ(domain_tokens_in_use(eq, Domain(dom)), 0u) << dom;
}

// Kyber's window (KYBER_TIMER: 100 ms) on a manual runtime, through real
// requests whose latency the test sets by moving the clock between their
// dispatch and their completion. The first completion arms the timer for
// the window's end; a fast device (no time passes) shrinks nothing; reads
// that take 3 ms against their 2 ms target mean congestion, and at a
// window's end the timer throttles the domain whose latency is good, the
// writes (completed at once), by their p99 against their target. Kyber
// waits up to a second for 500 samples of a domain.
TEST(KyberWindow, TheTimerEndsEachWindowAndSlowReadsSqueezeWrites) {
  ManualRuntime rt;
  StubDriver d(kyber_opts(CompleteMode::never, 1, &rt));
  ElevatorQueue* eq = queue_elevator(&d.q());
  BioTracker t;
  Slots s;
  auto submit = [&](ReqOp op, int n) {
    for (int i = 0; i < n; i++) {
      s.push_back(t.make(op, uint64_t(s.size()) * 8192 % (32 << 20), 4096));
      d.q().submit_bio(&s.back()->bio);
    }
    rt.run_pending();
  };
  auto complete_all = [&](const std::vector<Request*>& held) {
    for (Request* rq : held) complete_request(rq, BlkStatus::ok);
    rt.run_pending();
  };
  // 8 writes served at once, then 32 reads served in read_ns.
  auto round = [&](uint64_t read_ns) {
    submit(ReqOp::write, 8);
    complete_all(d.take_held());
    submit(ReqOp::read, 32);
    auto held = d.take_held();
    EXPECT_EQ(held.size(), 32u);
    rt.advance(read_ns);
    complete_all(held);
  };
  const uint64_t t0 = rt.now_ns();
  round(0);
  EXPECT_EQ(rt.next_timer_ns(), t0 + 100 * kMs) << "the window ends 100 ms after the first completion";
  EXPECT_GE(rt.advance(100 * kMs), 1u);
  EXPECT_EQ(domain_depth(eq, kRead), 256u);
  EXPECT_EQ(domain_depth(eq, kWrite), 128u) << "a device meeting every target was throttled";
  const uint64_t t1 = rt.now_ns();
  while (domain_depth(eq, kWrite) == 128u && rt.now_ns() - t1 < 3000 * kMs) round(3 * kMs);
  EXPECT_LT(domain_depth(eq, kWrite), 128u) << "slow reads never squeezed the writes";
  EXPECT_GE(rt.now_ns() - t1, 100 * kMs) << "the pools changed before a window ended";
  EXPECT_EQ(domain_depth(eq, kRead), 256u) << "the congested domain itself was throttled";
  EXPECT_EQ(t.ended.load(), static_cast<int>(s.size()));
  EXPECT_EQ(t.doubles.load(), 0);
}

// Several submitters, completions from the driver's "irq" thread, while the
// main thread flips the scheduler between kyber, none and back.
void switch_under_io(unsigned nr_queues) {
  StubDriver d(kyber_opts(CompleteMode::irq_thread, nr_queues));
  constexpr int kThreads = 4, kPerThread = 600, kWindow = 16;
  std::atomic<int> done_threads{0};
  std::vector<std::unique_ptr<BioTracker>> trackers;
  for (int i = 0; i < kThreads; i++) trackers.push_back(std::make_unique<BioTracker>());
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; th++) {
    threads.emplace_back([&, th] {
      BioTracker& t = *trackers[th];
      Slots s;
      for (int i = 0; i < kPerThread; i++) {
        const ReqOp op = (i + th) % 3 ? ReqOp::read : ReqOp::write;
        // Partly sequential per thread, so merges happen too.
        const uint64_t off = (uint64_t(th) << 24) + uint64_t(i / 2) * 4096 + (i % 2) * (1 << 20);
        s.push_back(t.make(op, off, 4096));
        d.q().submit_bio(&s.back()->bio);
        if (i >= kWindow && !t.wait_for(i - kWindow + 1, 10000)) break;
      }
      t.wait_for(kPerThread, 10000);
      done_threads.fetch_add(1);
    });
  }
  const char* names[] = {"none", "kyber"};
  auto ended = [&] {
    int n = 0;
    for (auto& t : trackers) n += t->ended.load();
    return n;
  };
  // At least a few switches, even if the I/O finishes early; between two,
  // some I/O ends under the scheduler just set (or all of it has).
  for (int i = 0; (done_threads.load() < kThreads || i < 6) && i < 200; i++) {
    Status st = d.q().set_attr("queue/scheduler", names[i % 2]);
    EXPECT_TRUE(st) << st.message();
    if (!st) break;
    const int seen = ended();
    EXPECT_TRUE(eventually([&] { return ended() >= seen + 16 || done_threads.load() == kThreads; }));
  }
  for (auto& th : threads) th.join();
  for (auto& t : trackers) {
    EXPECT_EQ(t->ended.load(), kPerThread);
    EXPECT_EQ(t->errors.load(), 0);
    EXPECT_EQ(t->doubles.load(), 0);
  }
  ASSERT_TRUE(wait_requests_freed(d.q()));
}

TEST(KyberSwitch, ToKyberAndBackUnderIoLosesNothing) { switch_under_io(1); }
TEST(KyberSwitch, PerHctxWithSeveralHwQueues) { switch_under_io(3); }

}  // namespace
}  // namespace blkmq::test
