// io.cost's state, shared by its algorithm (iocost.cc) and its files
// (iocost_conf.cc). Only those two include this.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/event.h"
#include "base/spinlock.h"
#include "base/timer.h"
#include "qos/iocost.h"

namespace blkmq {

struct Blkg;
class QueueImpl;

namespace iocost {

// The kernel's constants (blk-iocost.c), by their names there.
constexpr uint64_t kMillion = 1000000;
constexpr uint64_t kVtimePerSec = uint64_t{1} << 37;  // 1 s of device time
constexpr uint64_t kVtimePerUsec = kVtimePerSec / kMillion;
constexpr uint32_t kHweightWhole = 1u << 16;
constexpr uint64_t kMinPeriodUs = 1000, kMaxPeriodUs = 1000000;
constexpr uint64_t kMarginPct = 50;            // a group may run this much of a period behind vnow
constexpr uint64_t kWaitqTimerMarginPct = 5;   // play in the wake-up timer
constexpr uint32_t kVrateMinPpm = 10000, kVrateMaxPpm = 100000000;  // 1 % .. 10000 %
constexpr uint64_t kVrateClampAdjPct = 4;
constexpr uint64_t kRqWaitBusyPct = 5;         // requests waiting for tags this much: busy
constexpr uint64_t kUnbusyThrPct = 75;         // hysteresis before calling it not busy
constexpr unsigned kPageShift = 12;            // cost counts 4 KiB pages
constexpr uint64_t kRandioPages = 4096;        // farther than 16 MiB from the cursor: random

enum Lcoef { kRpage, kRseqio, kRrandio, kWpage, kWseqio, kWrandio, kNrLcoefs };
enum QosParam { kRppm, kRlat, kWppm, kWlat, kMin, kMax, kNrQos };

// io.cost.qos and io.cost.model's numbers (ioc_params): the qos targets
// (ppm, usec, ppm, usec, ppm, ppm) and the model's user-facing figures
// (rbps, rseqiops, rrandiops, wbps, wseqiops, wrandiops).
struct Params {
  uint64_t qos[kNrQos] = {};
  uint64_t i_lcoefs[kNrLcoefs] = {};
};

// A submitter asleep in throttle until its cost is paid by whoever wakes it.
struct Waiter {
  Waiter* next = nullptr;
  uint64_t abs_cost = 0;
  base::Completion granted;
};

struct Ioc;

// One group's state on one queue (ioc_gq), hung on its blkg. Everything
// but the atomics is under ioc->lock.
struct Iocg {
  Ioc* ioc = nullptr;
  Blkg* blkg = nullptr;
  Iocg* parent = nullptr;       // the parent group's; nullptr at the top level
  unsigned cfg_weight = 0;      // this device's io.weight, 0: the group's default
  unsigned weight = kIoGroupWeightDefault;  // the one in force
  unsigned active = 0;          // weight while in the active tree, else 0
  bool self_active = false;     // on ioc->active (its own bios)
  uint64_t child_active_sum = 0;
  uint64_t vtime = 0;           // its vtime cursor
  uint64_t active_period = 0;   // the last period it issued in
  uint64_t cursor = 0;          // the sector after its last bio: seq or random
  uint32_t hweight = kHweightWhole;  // its share, cached at hweight_gen
  uint64_t hweight_gen = 0;
  bool waited = false;          // someone waited this period (a shortage)
  Waiter* head = nullptr;
  Waiter* tail = nullptr;
  base::Timer waitq_timer;
  std::atomic<unsigned> nr_waiting{0};
  std::atomic<uint64_t> usage_vt{0};    // absolute cost charged (vtime at 100 %)
  std::atomic<uint64_t> wait_ns{0};     // submitters' sleep in throttle
  std::atomic<uint64_t> indebt_vt{0};   // charged past vnow without waiting
};

// The policy on one queue (struct ioc).
struct Ioc {
  QueueImpl* q = nullptr;
  base::SpinLock lock;
  // Under lock:
  bool enabled = false;
  bool user_qos = false, user_model = false;
  Params params;
  uint64_t lcoefs[kNrLcoefs] = {};
  uint64_t period_ns = 0, margin_ns = 0;
  uint64_t vrate_min = 0, vrate_max = 0;   // vtime per usec
  uint64_t period_at_ns = 0, period_at_vtime = 0;
  uint64_t cur_period = 1;
  int busy_level = 0;
  bool running = false;                    // the period timer is armed
  uint64_t root_active_sum = 0;            // the top-level groups' active weights
  uint64_t hweight_gen = 1;
  std::vector<Iocg*> active;
  // Read without the lock by iocost_info and the stat keys:
  std::atomic<uint64_t> vrate{kVtimePerUsec};  // vtime per usec; 100 %
  std::atomic<uint64_t> periods{0};
  // Completions' figures for the period (the kernel keeps them per CPU):
  std::atomic<uint64_t> nr_met[2] = {}, nr_missed[2] = {};
  std::atomic<uint64_t> rq_wait_ns{0};
  // What a completion needs, per direction (read, write), copied from the
  // parameters by refresh_params so that done reads them with no lock:
  // the page cost in ns at 100 % and the latency target in ns.
  std::atomic<uint64_t> done_page_ns[2] = {}, done_target_ns[2] = {};
  base::Timer timer;
  std::vector<Iocg*> all;  // under iocost_mu()
};

// Guards making and freeing Iocgs and Ioc::all. Order: after q's sysfs lock
// and the tree mutex, before any Ioc::lock.
std::mutex& iocost_mu();
// The policy's state on q, nullptr when it is not on q's chain. Under q's
// sysfs lock.
Ioc* ioc_on(const QueueImpl* q);
// b's Iocg on ioc's queue, made with its ancestors' if missing. Under
// iocost_mu().
Iocg* make_iocg_locked(Ioc* ioc, Blkg* b);
// g's share of the device (current_hweight), of kHweightWhole, cached
// until the active tree changes. Under ioc->lock.
uint32_t hweight_locked(Iocg* g);
// Recomputes the model's coefficients, the period and the vrate bounds
// from ioc->params, picking the device's defaults for what the user did
// not set (ioc_refresh_params). Under ioc->lock.
void refresh_params(Ioc* ioc);
// Turns the control on or off. Under ioc->lock; on stop, the sleepers are
// let go (the caller wakes `*ready` after unlocking).
void set_enabled(Ioc* ioc, bool on, Waiter** ready);
// Wakes the list set_enabled or a kick returned. Any context, no lock held.
void wake_all(Waiter* ready);

}  // namespace iocost
}  // namespace blkmq
