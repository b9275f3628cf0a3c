// Kyber's feedback loop: latency histograms filled by completions, and the
// timer that turns them into token pool sizes. Also the latency tunables.
#include <algorithm>
#include <cstring>
#include <string>

#include "base/parse.h"
#include "sched/kyber/kyber_internal.h"

namespace blkmq::kyber {
namespace {

unsigned latency_bucket(uint64_t target, uint64_t latency) {
  if (latency == 0) return 0;
  const uint64_t width = std::max<uint64_t>(target >> kLatencyShift, 1);
  return static_cast<unsigned>(std::min<uint64_t>((latency - 1) / width, kLatencyBuckets - 1));
}

// Moves every CPU's counts into the timer's totals.
void flush_latency_buckets(KyberData* kqd) {
  for (unsigned cpu = 0; cpu < kqd->cpu_latency.size(); cpu++) {
    CpuLatency& c = kqd->cpu_latency[cpu];
    for (unsigned d = 0; d < kOther; d++)
      for (unsigned t = 0; t < kNrLatencyTypes; t++)
        for (unsigned b = 0; b < kLatencyBuckets; b++)
          kqd->latency_buckets[d][t][b] += c.buckets[d][t][b].exchange(0, std::memory_order_relaxed);
  }
}

// The bucket holding the given percentile of a domain's samples, or -1 if
// there are too few samples to trust yet. A computed percentile consumes
// the samples, so each decision rests on fresh data. The window is kept per
// domain and shared by both latency types, as the kernel does.
int calculate_percentile(KyberData* kqd, unsigned d, unsigned type, unsigned percentile,
                         uint64_t now) {
  uint64_t* buckets = kqd->latency_buckets[d][type];
  uint64_t samples = 0;
  for (unsigned b = 0; b < kLatencyBuckets; b++) samples += buckets[b];
  if (samples == 0) return -1;
  if (kqd->latency_timeout[d] == 0) kqd->latency_timeout[d] = std::max<uint64_t>(now + kPercentileWindowNs, 1);
  if (samples < kMinPercentileSamples && now < kqd->latency_timeout[d]) return -1;
  kqd->latency_timeout[d] = 0;
  uint64_t wanted = (samples * percentile + 99) / 100;
  unsigned bucket = 0;
  for (; bucket < kLatencyBuckets - 1; bucket++) {
    if (buckets[bucket] >= wanted) break;
    wanted -= buckets[bucket];
  }
  std::memset(buckets, 0, sizeof(uint64_t) * kLatencyBuckets);
  return static_cast<int>(bucket);
}

void resize_domain(KyberData* kqd, unsigned d, uint64_t depth) {
  const unsigned nd = static_cast<unsigned>(std::clamp<uint64_t>(depth, 1, kDomainDepth[d]));
  if (nd != kqd->tokens[d]->depth()) kqd->tokens[d]->resize(nd);
}

// Resizes domain d from the p99 bucket of its total latency.
void adjust_domain(KyberData* kqd, unsigned d, bool congested, uint64_t now) {
  int p99 = calculate_percentile(kqd, d, kTotalLatency, kResizePercentile, now);
  if (congested) {
    // Use what the domain looked like before the congestion if it has no
    // fresh p99; the remembered value is spent either way.
    if (p99 < 0) p99 = kqd->domain_p99[d];
    kqd->domain_p99[d] = -1;
  } else if (p99 >= 0) {
    kqd->domain_p99[d] = p99;
  }
  if (p99 < 0) return;
  // Under congestion, domains within target (p99 bucket 0-3) are squeezed
  // to 1/4..4/4 of their depth and those missing it grow by up to 2x; a
  // domain missing its target grows even without congestion, since its
  // total latency includes the time it waits for tokens.
  if (congested || p99 >= static_cast<int>(kGoodBuckets)) {
    const uint64_t depth = kqd->tokens[d]->depth();
    resize_domain(kqd, d, (depth * static_cast<uint64_t>(p99 + 1)) >> kLatencyShift);
  }
}

template <Domain D>
std::string show_target(ElevatorQueue* eq) {
  return std::to_string(kqd_of(eq)->targets[D].load(std::memory_order_relaxed));
}

template <Domain D>
Status store_target(ElevatorQueue* eq, std::string_view value) {
  const char* name = D == kRead ? "queue/iosched/read_lat_nsec" : "queue/iosched/write_lat_nsec";
  auto v = base::parse_uint(name, value, kMinTargetNs, kMaxTargetNs, "ns");
  if (!v) return v.status();
  kqd_of(eq)->targets[D].store(*v, std::memory_order_relaxed);
  return Status::OK();
}

}  // namespace

void add_latency_sample(KyberData* kqd, Domain d, LatencyType type, uint64_t latency_ns) {
  const uint64_t target = kqd->targets[d].load(std::memory_order_relaxed);
  kqd->cpu_latency.local().buckets[d][type][latency_bucket(target, latency_ns)].fetch_add(
      1, std::memory_order_relaxed);
}

void timer_work(KyberData* kqd, uint64_t now) {
  std::lock_guard<std::mutex> g(kqd->timer_lock);
  flush_latency_buckets(kqd);
  // The device is congested when any domain's I/O latency (time at the
  // device only) has a p90 above its target.
  bool congested = false;
  for (unsigned d = 0; d < kOther; d++)
    if (calculate_percentile(kqd, d, kIoLatency, kCongestionPercentile, now) >= static_cast<int>(kGoodBuckets))
      congested = true;
  for (unsigned d = 0; d < kOther; d++) adjust_domain(kqd, d, congested, now);
}

void timer_fired(KyberData* kqd) {
  // Cleared first: a completion during the work arms the next period.
  // Pairs with kyber_iosched.cc:completed_request's exchange, which then
  // re-arms. seq_cst pairs with nothing that needs it: a sample the flush
  // below misses stays in its CPU's counters for the next period.
  kqd->timer_armed.store(false, std::memory_order_seq_cst);
  timer_work(kqd, kqd->q->now_ns());
}

std::vector<ElvAttr> latency_attrs() {
  return {
      ElvAttr{"read_lat_nsec", &show_target<kRead>, &store_target<kRead>},
      ElvAttr{"write_lat_nsec", &show_target<kWrite>, &store_target<kWrite>},
  };
}

// ---- introspection ----

uint64_t latency_target(ElevatorQueue* eq, Domain d) { return kqd_of(eq)->targets[d].load(); }

void record_latency(ElevatorQueue* eq, Domain d, LatencyType type, uint64_t latency_ns) {
  add_latency_sample(kqd_of(eq), d, type, latency_ns);
}

void run_timer_work(ElevatorQueue* eq, uint64_t now_ns) { timer_work(kqd_of(eq), now_ns); }


}  // namespace blkmq::kyber
