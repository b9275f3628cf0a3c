// mq-deadline's queue/iosched/ tunables: the kernel's names, units (ms) and
// defaults. Unlike the kernel, which clamps out-of-range values, a value
// outside the range is refused and nothing changes (DESIGN.md: a bad value
// changes nothing).
#include <climits>
#include <string>

#include "base/clock.h"
#include "base/parse.h"
#include "sched/deadline/deadline_impl.h"

namespace blkmq::dd {
namespace {

constexpr int64_t kMs = static_cast<int64_t>(base::kNsPerMs);


// Shows and stores one integer tunable under the main lock; `scale` turns
// the shown unit (ms) into the stored one (ns).
template <typename T, T Tunables::*Field, int64_t Lo, int64_t Hi, int64_t Scale = 1>
ElvAttr int_attr(const char* name) {
  ElvAttr a;
  a.name = name;
  a.show = [](ElevatorQueue* eq) {
    DeadlineData* dd = dd_of(eq);
    dd->lock.lock();
    const int64_t v = static_cast<int64_t>(dd->tun.*Field) / Scale;
    dd->lock.unlock();
    return std::to_string(v);
  };
  return a;
}

template <typename T, T Tunables::*Field, int64_t Lo, int64_t Hi, int64_t Scale>
Status store_int(ElevatorQueue* eq, std::string_view name, std::string_view v) {
  auto x = base::parse_int("queue/iosched/" + std::string(name), v, Lo, Hi);
  if (!x) return x.status();
  DeadlineData* dd = dd_of(eq);
  dd->lock.lock();
  dd->tun.*Field = static_cast<T>(*x * Scale);
  dd->lock.unlock();
  return Status::OK();
}

// The two expiries live in an array: one accessor each.
template <Dir D>
ElvAttr expire_attr(const char* name) {
  ElvAttr a;
  a.name = name;
  a.show = [](ElevatorQueue* eq) {
    DeadlineData* dd = dd_of(eq);
    dd->lock.lock();
    const int64_t v = dd->tun.fifo_expire_ns[D] / kMs;
    dd->lock.unlock();
    return std::to_string(v);
  };
  a.store = [](ElevatorQueue* eq, std::string_view v) -> Status {
    const char* name = D == kRead ? "queue/iosched/read_expire" : "queue/iosched/write_expire";
    auto x = base::parse_int(name, v, 0, INT_MAX);
    if (!x) return x.status();
    DeadlineData* dd = dd_of(eq);
    dd->lock.lock();
    dd->tun.fifo_expire_ns[D] = *x * kMs;
    dd->lock.unlock();
    return Status::OK();
  };
  return a;
}


#define DD_INT_ATTR(NAME, FIELD, T, LO, HI, SCALE)                                              \
  [] {                                                                                         \
    ElvAttr a = int_attr<T, &Tunables::FIELD, LO, HI, SCALE>(NAME);                            \
    a.store = [](ElevatorQueue* eq, std::string_view v) {                                      \
      return store_int<T, &Tunables::FIELD, LO, HI, SCALE>(eq, NAME, v);                       \
    };                                                                                         \
    return a;                                                                                  \
  }()

}  // namespace

std::vector<ElvAttr> deadline_attrs() {
  return {
      expire_attr<kRead>("read_expire"),
      expire_attr<kWrite>("write_expire"),
      DD_INT_ATTR("writes_starved", writes_starved, int, INT_MIN, INT_MAX, 1),
      DD_INT_ATTR("front_merges", front_merges, int, 0, 1, 1),
      DD_INT_ATTR("fifo_batch", fifo_batch, int, 0, INT_MAX, 1),
      DD_INT_ATTR("prio_aging_expire", prio_aging_expire_ns, int64_t, 0, INT_MAX, kMs),
      insert_lists_attr<dd_ins_of>(),
      lock_stat_attr<dd_lock_of>("lock_stat"),
      lock_stat_attr<dd_ins_lock_of>("insert_lock_stat"),
  };
}

}  // namespace blkmq::dd
