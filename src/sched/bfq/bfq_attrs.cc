// bfq's queue/iosched/ tunables: the kernel's names, units and defaults.
// Where the kernel clamps an out-of-range value, a value outside the range
// is refused here and nothing changes (DESIGN.md: a bad value changes
// nothing).
#include <climits>
#include <string>

#include "base/parse.h"
#include "sched/bfq/bfq_impl.h"
#include "sched/bfq/bfq_queue.h"

namespace blkmq::bfq {
namespace {

constexpr int64_t kUs = static_cast<int64_t>(base::kNsPerUs);
constexpr int64_t kMsI = static_cast<int64_t>(base::kNsPerMs);


// One integer tunable: get/set convert between the shown unit and the
// stored one; both run under the main lock.
struct IntSpec {
  const char* name;
  int64_t lo, hi;
  int64_t (*get)(const Tunables&);
  void (*set)(BfqData*, int64_t);
};

template <const IntSpec& S>
ElvAttr int_attr() {
  ElvAttr a;
  a.name = S.name;
  a.show = [](ElevatorQueue* eq) {
    BfqData* bfqd = bfqd_of(eq);
    bfqd->lock.lock();
    const int64_t v = S.get(bfqd->tun);
    bfqd->lock.unlock();
    return std::to_string(v);
  };
  a.store = [](ElevatorQueue* eq, std::string_view v) -> Status {
    auto x = base::parse_int("queue/iosched/" + std::string(S.name), v, S.lo, S.hi);
    if (!x) return x.status();
    BfqData* bfqd = bfqd_of(eq);
    bfqd->lock.lock();
    S.set(bfqd, *x);
    bfqd->lock.unlock();
    return Status::OK();
  };
  return a;
}

constexpr IntSpec kSliceIdle{"slice_idle", 0, INT_MAX,
                             [](const Tunables& t) { return static_cast<int64_t>(t.slice_idle_ns) / kMsI; },
                             [](BfqData* d, int64_t v) { d->tun.slice_idle_ns = static_cast<uint64_t>(v * kMsI); }};
constexpr IntSpec kSliceIdleUs{"slice_idle_us", 0, INT_MAX,
                               [](const Tunables& t) { return static_cast<int64_t>(t.slice_idle_ns) / kUs; },
                               [](BfqData* d, int64_t v) { d->tun.slice_idle_ns = static_cast<uint64_t>(v * kUs); }};
constexpr IntSpec kFifoSync{"fifo_expire_sync", 1, INT_MAX,
                            [](const Tunables& t) { return static_cast<int64_t>(t.fifo_expire_ns[1]) / kMsI; },
                            [](BfqData* d, int64_t v) { d->tun.fifo_expire_ns[1] = static_cast<uint64_t>(v * kMsI); }};
constexpr IntSpec kFifoAsync{"fifo_expire_async", 1, INT_MAX,
                             [](const Tunables& t) { return static_cast<int64_t>(t.fifo_expire_ns[0]) / kMsI; },
                             [](BfqData* d, int64_t v) { d->tun.fifo_expire_ns[0] = static_cast<uint64_t>(v * kMsI); }};
constexpr IntSpec kBackMax{"back_seek_max", 0, INT_MAX,
                           [](const Tunables& t) { return static_cast<int64_t>(t.back_max_kib); },
                           [](BfqData* d, int64_t v) { d->tun.back_max_kib = static_cast<uint64_t>(v); }};
constexpr IntSpec kBackPenalty{"back_seek_penalty", 1, INT_MAX,
                               [](const Tunables& t) { return static_cast<int64_t>(t.back_penalty); },
                               [](BfqData* d, int64_t v) { d->tun.back_penalty = static_cast<unsigned>(v); }};
// 0 = auto. Auto here is the kernel's default 16384 sectors (no peak-rate
// estimator, see docs/ARCHITECTURE.md).
constexpr IntSpec kMaxBudget{"max_budget", 0, INT_MAX,
                             [](const Tunables& t) { return static_cast<int64_t>(t.user_max_budget); },
                             [](BfqData* d, int64_t v) { d->tun.user_max_budget = static_cast<uint64_t>(v); }};
constexpr IntSpec kTimeoutSync{"timeout_sync", 1, INT_MAX,
                               [](const Tunables& t) { return static_cast<int64_t>(t.timeout_ns) / kMsI; },
                               [](BfqData* d, int64_t v) {
                                 d->tun.timeout_ns = static_cast<uint64_t>(v * kMsI);
                                 update_max_budget(d);  // a budget is what one timeout moves
                               }};
constexpr IntSpec kStrict{"strict_guarantees", 0, 1,
                          [](const Tunables& t) { return static_cast<int64_t>(t.strict_guarantees); },
                          [](BfqData* d, int64_t v) { d->tun.strict_guarantees = v != 0; }};
// Turning low_latency off ends all weight raising at once.
constexpr IntSpec kLowLatency{"low_latency", 0, 1,
                              [](const Tunables& t) { return static_cast<int64_t>(t.low_latency); },
                              [](BfqData* d, int64_t v) {
                                if (!v && d->tun.low_latency) end_all_wr(d);
                                d->tun.low_latency = v != 0;
                              }};


}  // namespace

std::vector<ElvAttr> bfq_attrs() {
  return {
      int_attr<kSliceIdle>(),   int_attr<kSliceIdleUs>(), int_attr<kFifoSync>(),    int_attr<kFifoAsync>(),
      int_attr<kBackMax>(),     int_attr<kBackPenalty>(), int_attr<kMaxBudget>(),   int_attr<kTimeoutSync>(),
      int_attr<kStrict>(),      int_attr<kLowLatency>(),  insert_lists_attr<bfq_ins_of>(),
      lock_stat_attr<bfq_lock_of>("lock_stat"), lock_stat_attr<bfq_ins_lock_of>("insert_lock_stat"),
  };
}

}  // namespace blkmq::bfq
