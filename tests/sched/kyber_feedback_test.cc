// Kyber's latency feedback loop, driven deterministically: synthetic
// latency samples and the timer's work run with a fake time. No I/O runs,
// so the real timer is never armed and cannot interfere.
#include <gtest/gtest.h>

#include "support/stub_driver.h"
#include "sched/kyber/kyber.h"

namespace blkmq::test {
namespace {

using namespace blkmq::kyber;

constexpr uint64_t kMs = 1'000'000;

struct KyberQueue {
  StubDriver d{[] {
    StubDriver::Options o;
    o.scheduler = "kyber";
    o.mode = CompleteMode::never;
    return o;
  }()};
  ElevatorQueue* eq = queue_elevator(&d.q());
};

void feed(ElevatorQueue* eq, Domain dom, LatencyType type, uint64_t lat, unsigned n) {
  for (unsigned i = 0; i < n; i++) record_latency(eq, dom, type, lat);
}

// Reads miss their 2 ms target at the device (congestion); writes are fine.
void feed_congested_reads(ElevatorQueue* eq) {
  feed(eq, kRead, kIoLatency, 3 * kMs, 600);     // bucket 5
  feed(eq, kRead, kTotalLatency, 3 * kMs, 600);
  feed(eq, kWrite, kIoLatency, 1 * kMs, 600);    // bucket 0 of 10 ms
  feed(eq, kWrite, kTotalLatency, 1 * kMs, 600);
}

TEST(KyberFeedback, StartsAtTheMaximumDepths) {
  KyberQueue k;
  ASSERT_NE(k.eq, nullptr);
  EXPECT_EQ(k.eq->type->name, "kyber");
  EXPECT_EQ(domain_depth(k.eq, kRead), 256u);
  EXPECT_EQ(domain_depth(k.eq, kWrite), 128u);
  EXPECT_EQ(domain_depth(k.eq, kDiscard), 64u);
  EXPECT_EQ(domain_depth(k.eq, kOther), 16u);
  // 75 % of nr_requests (2 x min(64, 128)) for everything but sync reads.
  EXPECT_EQ(queue_async_depth(&k.d.q()), 96u);
}

TEST(KyberFeedback, ShrinksWritesWhenReadsMissTheirTarget) {
  KyberQueue k;
  feed_congested_reads(k.eq);
  run_timer_work(k.eq, 1000);
  // Congested: writes (p99 in bucket 0) squeezed to 1/4; reads (bucket 5)
  // would grow by 6/4 but are already at their maximum.
  EXPECT_EQ(domain_depth(k.eq, kWrite), 32u);
  EXPECT_EQ(domain_depth(k.eq, kRead), 256u);
  EXPECT_EQ(domain_depth(k.eq, kDiscard), 64u);  // no samples: untouched
  // Persisting congestion keeps squeezing, down to one token.
  for (int i = 0; i < 6; i++) {
    feed_congested_reads(k.eq);
    run_timer_work(k.eq, 2000 + i);
  }
  EXPECT_EQ(domain_depth(k.eq, kWrite), 1u);
}

TEST(KyberFeedback, GrowsWritesBackWhenLatenciesRecover) {
  KyberQueue k;
  feed_congested_reads(k.eq);
  run_timer_work(k.eq, 1000);
  ASSERT_EQ(domain_depth(k.eq, kWrite), 32u);
  // Reads recover; throttled writes now wait for tokens, so their total
  // latency (15 ms, bucket 5) misses the target while the device is fast.
  unsigned prev = 32;
  for (int round = 0; round < 10 && domain_depth(k.eq, kWrite) < 128; round++) {
    feed(k.eq, kRead, kIoLatency, 1 * kMs, 600);
    feed(k.eq, kRead, kTotalLatency, 1 * kMs, 600);
    feed(k.eq, kWrite, kIoLatency, 1 * kMs, 600);
    feed(k.eq, kWrite, kTotalLatency, 15 * kMs, 600);
    run_timer_work(k.eq, 2000 + round);
    const unsigned now = domain_depth(k.eq, kWrite);
    EXPECT_EQ(now, std::min(prev * 6 / 4, 128u));  // x (p99 + 1) / 4
    prev = now;
  }
  EXPECT_EQ(domain_depth(k.eq, kWrite), 128u);
  EXPECT_EQ(domain_depth(k.eq, kRead), 256u);
}

TEST(KyberFeedback, WithinTargetAndUncongestedChangesNothing) {
  KyberQueue k;
  feed(k.eq, kRead, kIoLatency, 1 * kMs, 600);
  feed(k.eq, kRead, kTotalLatency, 1 * kMs, 600);
  feed(k.eq, kWrite, kIoLatency, 5 * kMs, 600);
  feed(k.eq, kWrite, kTotalLatency, 9 * kMs, 600);  // bucket 3: still good
  run_timer_work(k.eq, 1000);
  EXPECT_EQ(domain_depth(k.eq, kRead), 256u);
  EXPECT_EQ(domain_depth(k.eq, kWrite), 128u);
}

TEST(KyberFeedback, CongestionUsesTheRememberedP99OfAQuietDomain) {
  KyberQueue k;
  // Uncongested round: writes' p99 lands in bucket 1 and is remembered.
  feed(k.eq, kWrite, kIoLatency, 1 * kMs, 600);
  feed(k.eq, kWrite, kTotalLatency, 4 * kMs, 600);
  run_timer_work(k.eq, 1000);
  ASSERT_EQ(domain_depth(k.eq, kWrite), 128u);
  // Congested round without any write sample: the remembered bucket 1
  // halves the write depth, and is then forgotten.
  feed(k.eq, kRead, kIoLatency, 3 * kMs, 600);
  run_timer_work(k.eq, 2000);
  EXPECT_EQ(domain_depth(k.eq, kWrite), 64u);
  feed(k.eq, kRead, kIoLatency, 3 * kMs, 600);
  run_timer_work(k.eq, 3000);
  EXPECT_EQ(domain_depth(k.eq, kWrite), 64u);
}

TEST(KyberFeedback, FewSamplesWaitForTheOneSecondWindow) {
  KyberQueue k;
  constexpr uint64_t kSec = 1000 * kMs;
  feed(k.eq, kRead, kIoLatency, 3 * kMs, 10);
  feed(k.eq, kWrite, kTotalLatency, 1 * kMs, 10);
  run_timer_work(k.eq, 5 * kSec);            // opens the windows
  run_timer_work(k.eq, 5 * kSec + 500 * kMs);
  EXPECT_EQ(domain_depth(k.eq, kWrite), 128u);  // too few samples, too soon
  run_timer_work(k.eq, 6 * kSec + 1);
  EXPECT_EQ(domain_depth(k.eq, kWrite), 32u);
}

TEST(KyberFeedback, SamplesAreBucketedAgainstTheCurrentTarget) {
  KyberQueue k;
  // With a 20 ms read target, 3 ms reads are fine: no congestion.
  ASSERT_TRUE(k.d.q().set_attr("queue/iosched/read_lat_nsec", "20000000"));
  feed_congested_reads(k.eq);
  run_timer_work(k.eq, 1000);
  EXPECT_EQ(domain_depth(k.eq, kWrite), 128u);
}

TEST(KyberTunables, ReadWriteAndRefuse) {
  KyberQueue k;
  Queue& q = k.d.q();
  EXPECT_EQ(*q.attr("queue/iosched/read_lat_nsec"), "2000000");
  EXPECT_EQ(*q.attr("queue/iosched/write_lat_nsec"), "10000000");
  ASSERT_TRUE(q.set_attr("queue/iosched/read_lat_nsec", "3000000"));
  ASSERT_TRUE(q.set_attr("queue/iosched/write_lat_nsec", "25000000\n"));
  EXPECT_EQ(*q.attr("queue/iosched/read_lat_nsec"), "3000000");
  EXPECT_EQ(*q.attr("queue/iosched/write_lat_nsec"), "25000000");
  EXPECT_EQ(latency_target(k.eq, kRead), 3000000u);
  for (const char* bad : {"", "abc", "0", "-5", "12ms", "1.5", "99999999999999999999", "3600000000001"}) {
    Status s = q.set_attr("queue/iosched/read_lat_nsec", bad);
    EXPECT_FALSE(s) << bad;
    EXPECT_NE(s.message().find("read_lat_nsec"), std::string::npos) << s.message();
    EXPECT_FALSE(q.set_attr("queue/iosched/write_lat_nsec", bad)) << bad;
  }
  EXPECT_EQ(*q.attr("queue/iosched/read_lat_nsec"), "3000000");
  EXPECT_EQ(*q.attr("queue/iosched/write_lat_nsec"), "25000000");
  // A new kyber instance starts from the defaults.
  ASSERT_TRUE(q.set_attr("queue/scheduler", "none"));
  EXPECT_FALSE(q.attr("queue/iosched/read_lat_nsec"));
  ASSERT_TRUE(q.set_attr("queue/scheduler", "kyber"));
  EXPECT_EQ(*q.attr("queue/iosched/read_lat_nsec"), "2000000");
  EXPECT_NE(q.attr("queue/scheduler")->find("[kyber]"), std::string::npos);
}

}  // namespace
}  // namespace blkmq::test
