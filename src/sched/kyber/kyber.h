// The kyber I/O scheduler (block/kyber-iosched.c): throttles each class of
// I/O (read, write, discard, other) with a device-wide pool of tokens and
// resizes the pools from measured latencies so reads meet their target.
//
// It registers itself as queue/scheduler "kyber" (kyber_iosched.cc). This
// header is introspection for tests and tools: it lets a test feed
// synthetic latencies and run the timer's work with a fake time, so the
// feedback loop is checked deterministically, without a device or a clock.
#pragma once

#include <cstdint>

#include "blkmq/elevator/elevator.h"

namespace blkmq::kyber {

// Scheduling domains, by request op.
enum Domain : unsigned { kRead = 0, kWrite, kDiscard, kOther, kNrDomains };
// Latency kinds kept per domain: total (allocation to completion, includes
// the time throttled in the scheduler) and I/O (issue to completion).
enum LatencyType : unsigned { kTotalLatency = 0, kIoLatency, kNrLatencyTypes };

constexpr unsigned kLatencyShift = 2;    // KYBER_LATENCY_SHIFT: a bucket is target / 4 wide
constexpr unsigned kGoodBuckets = 4;     // KYBER_GOOD_BUCKETS: buckets 0-3, within the target
constexpr unsigned kLatencyBuckets = 8;  // KYBER_LATENCY_BUCKETS: bucket 7, above 1.75 x target
// Token pool sizes (also the most a resize can grow them to): kyber_depth.
constexpr unsigned kDomainDepth[kNrDomains] = {256, 128, 64, 16};
// Requests dispatched from one domain before the next gets a turn:
// kyber_batch_size.
constexpr unsigned kBatchSize[kNrDomains] = {16, 8, 1, 1};
// Default latency targets (ns) of the domains that have one:
// kyber_latency_targets.
constexpr uint64_t kDefaultTarget[kOther] = {2'000'000ull, 10'000'000ull, 5'000'000'000ull};
// Tunable range for read_lat_nsec / write_lat_nsec.
constexpr uint64_t kMinTargetNs = 1;
constexpr uint64_t kMaxTargetNs = 3600ull * 1'000'000'000ull;

// The domain an op is scheduled in.
Domain op_domain(ReqOp op);

// ---- introspection; eq must be a queue's kyber instance ----

// Current size of a domain's token pool.
unsigned domain_depth(ElevatorQueue* eq, Domain d);
// Tokens of a domain held by dispatched requests right now.
unsigned domain_tokens_in_use(ElevatorQueue* eq, Domain d);
// Latency target (ns) of a domain below kOther.
uint64_t latency_target(ElevatorQueue* eq, Domain d);
// Records one latency sample (ns) on the calling CPU as a completion would,
// without arming the timer.
void record_latency(ElevatorQueue* eq, Domain d, LatencyType type, uint64_t latency_ns);
// Runs the timer's work now with `now_ns` as the time: sums the histograms
// and resizes the token pools. Serialised with the real timer.
void run_timer_work(ElevatorQueue* eq, uint64_t now_ns);

}  // namespace blkmq::kyber

namespace blkmq {

// A queue's kyber state, as debugfs shows it (the domains' token pools and
// the latency targets); the same shape as bfq_stats and deadline_stats.
struct KyberStats {
  unsigned depth[kyber::kNrDomains] = {};          // token pool sizes now
  unsigned tokens_in_use[kyber::kNrDomains] = {};  // held by dispatched requests
  uint64_t target_ns[kyber::kOther] = {};          // read, write, discard targets
};
// q must be running kyber. Any thread; lock-free reads, so a snapshot
// taken under I/O is approximate.
KyberStats kyber_stats(Queue* q);

}  // namespace blkmq
