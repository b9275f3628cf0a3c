// Kyber's state, shared by the dispatch side (kyber_iosched.cc) and the
// latency feedback loop (kyber_latency.cc). Not part of the public API.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "base/clock.h"
#include "blkmq/queue.h"
#include "base/percpu.h"
#include "base/sbitmap.h"
#include "base/spinlock.h"
#include "base/timer.h"
#include "blkmq/elevator/elevator.h"
#include "sched/kyber/kyber.h"

namespace blkmq::kyber {

// The latency timer's period: kyber's timer is re-armed HZ / 10 ahead.
constexpr uint64_t kTimerPeriodNs = 100 * base::kNsPerMs;
// A percentile is trusted with this many samples, or once this long has
// passed since the domain's first unused sample was seen
// (calculate_percentile's bare 500, and latency_timeout = jiffies + HZ).
constexpr unsigned kMinPercentileSamples = 500;
constexpr uint64_t kPercentileWindowNs = base::kNsPerSec;
// Share of nr_requests that async I/O (everything but sync reads) may
// hold: KYBER_ASYNC_PERCENT.
constexpr unsigned kAsyncPercent = 75;
// kyber_timer_fn's percentiles (bare there): the device is congested when
// a domain's I/O latency p90 is over its target; a domain is resized from
// its total latency p99.
constexpr unsigned kCongestionPercentile = 90;
constexpr unsigned kResizePercentile = 99;

// One CPU's latency histograms. Completions on that CPU increment; the
// timer takes them with exchange(0), so no sample is lost or counted twice.
struct CpuLatency {
  std::atomic<uint32_t> buckets[kOther][kNrLatencyTypes][kLatencyBuckets];
};

// Per queue (kyber_queue_data).
struct KyberData {
  Queue* q = nullptr;
  // Device-wide token pools, created at their maximum depth.
  std::unique_ptr<base::SbitmapQueue> tokens[kNrDomains];
  std::atomic<uint64_t> targets[kOther];
  base::PerCpu<CpuLatency> cpu_latency;
  base::Timer timer;
  // Set while the timer is armed, so a completion arms it with one atomic
  // load instead of the timer thread's lock.
  std::atomic<bool> timer_armed{false};

  // The timer's own state, under timer_lock (the timer thread and tests).
  std::mutex timer_lock;
  uint64_t latency_buckets[kOther][kNrLatencyTypes][kLatencyBuckets] = {};
  uint64_t latency_timeout[kOther] = {};  // 0: no window running
  int domain_p99[kOther] = {-1, -1, -1};  // last p99 seen uncongested
};

// Bitmap of the kcqs that hold requests of one domain (kcq_map). A bit is
// set and cleared under its kcq's lock; readers may look without it.
class KcqMap {
 public:
  explicit KcqMap(unsigned nr) : nr_words_((nr + 63) / 64), words_(new std::atomic<uint64_t>[nr_words_]) {
    for (unsigned i = 0; i < nr_words_; i++) words_[i].store(0, std::memory_order_relaxed);
  }
  void set(unsigned i) { words_[i / 64].fetch_or(bit(i), std::memory_order_release); }
  void clear(unsigned i) { words_[i / 64].fetch_and(~bit(i), std::memory_order_relaxed); }
  bool any() const {
    for (unsigned i = 0; i < nr_words_; i++)
      if (words_[i].load(std::memory_order_acquire)) return true;
    return false;
  }
  template <typename Fn>
  void for_each_set(Fn&& fn) const {
    for (unsigned w = 0; w < nr_words_; w++) {
      uint64_t bits = words_[w].load(std::memory_order_acquire);
      while (bits) {
        fn(w * 64 + static_cast<unsigned>(__builtin_ctzll(bits)));
        bits &= bits - 1;
      }
    }
  }

 private:
  static uint64_t bit(unsigned i) { return 1ull << (i % 64); }
  unsigned nr_words_;
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
};

// One software queue's insertion lists (kyber_ctx_queue), one per domain,
// on its own cache line: inserts from different CPUs do not share a lock.
struct alignas(64) CtxQueue {
  base::SpinLock lock;
  ListNode rq_list[kNrDomains];
};

// A hctx's wait for a domain token. `waiting` mirrors "entry is queued";
// it is what the dispatcher reads, since the entry's own flag belongs to
// whichever wait queue holds it.
struct DomainWait {
  base::SbqWaitEntry entry;
  base::SbqWaitQueue* ws = nullptr;  // where entry was last queued (khd lock)
  std::atomic<bool> waiting{false};
  std::atomic<unsigned> wait_index{0};
  HwCtx* hctx = nullptr;
};

// Per hctx (kyber_hctx_data).
struct HctxData {
  explicit HctxData(unsigned nr)
      : nr_ctx(nr), kcqs(new CtxQueue[nr]),
        kcq_map{KcqMap(nr), KcqMap(nr), KcqMap(nr), KcqMap(nr)} {}

  base::SpinLock lock;             // rqs, cur_domain, batching, waits' ws
  ListNode rqs[kNrDomains];        // flushed out of the kcqs, ready to go
  std::atomic<bool> rqs_busy[kNrDomains] = {};  // !rqs[d].empty(), for has_work
  unsigned cur_domain = 0;
  unsigned batching = 0;
  unsigned nr_ctx;
  std::unique_ptr<CtxQueue[]> kcqs;
  KcqMap kcq_map[kNrDomains];
  DomainWait waits[kNrDomains];
};

inline KyberData* kqd_of(ElevatorQueue* eq) { return static_cast<KyberData*>(eq->elevator_data); }
inline KyberData* kqd_of(Queue* q) { return kqd_of(queue_elevator(q)); }

// Feedback loop (kyber_latency.cc).
void add_latency_sample(KyberData* kqd, Domain d, LatencyType type, uint64_t latency_ns);
void timer_work(KyberData* kqd, uint64_t now_ns);
void timer_fired(KyberData* kqd);
std::vector<ElvAttr> latency_attrs();

}  // namespace blkmq::kyber
