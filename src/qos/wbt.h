// wbt, writeback throttling (the kernel's block/blk-wbt.c), an rq-qos
// policy: it limits how many page-cache writeback writes (kBioWriteback)
// and discards are in flight, and scales that limit down while reads
// complete slower than a target latency (queue/wbt_lat_usec). The model,
// its defaults and where it departs from the kernel: docs/QOS.md, "wbt".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "blkmq/status.h"

namespace blkmq {

class Queue;

// wbt_enable_default: puts wbt on q's chain with the default target unless
// q's scheduler disables it (ElevatorType::disable_wbt, bfq); a wbt that a
// scheduler turned off comes back on. What the core calls when a queue is
// created and after a scheduler switch. Task context; takes q's sysfs lock
// and may freeze q; not with the sysfs lock held.
void wbt_enable_default(Queue* q);
// wbt_disable_default: turns off a wbt that is on by default (not one set
// by hand through queue/wbt_lat_usec); its waiting writes go on. Task
// context, as wbt_enable_default.
void wbt_disable_default(Queue* q);
// After q's scheduler changed: wbt_disable_default if the new one
// disables wbt, else wbt_enable_default. Task context, as above.
void wbt_elevator_changed(Queue* q);

// queue/wbt_lat_usec's text: the target in microseconds, 0 when wbt is off
// or not on q. The caller holds q's sysfs lock. Task context.
std::string wbt_lat_show_locked(const Queue* q);
// Writes queue/wbt_lat_usec: -1 (the default: 2000 us, 75000 us on a
// rotational queue), 0 (off) or a target in microseconds. Adds wbt to q if
// it is not there. EINVAL for anything else, changing nothing. Writes that
// wait are woken to try the new limits at once (all of them when it turns
// wbt off). Task context; takes q's sysfs lock.
Status wbt_lat_store(Queue* q, std::string_view value);

// What the kernel's debugfs shows under rqos/wbt/, for tests and tools.
struct WbtInfo {
  int enable_state = 0;        // 1 on by default, 2 on by hand, 3 off by default, 4 off by hand
  uint64_t min_lat_nsec = 0;   // the target
  uint64_t curr_win_nsec = 0;  // the current window
  int scale_step = 0;
  unsigned max_depth = 0;
  unsigned wb_normal = 0;
  unsigned wb_background = 0;
  unsigned unknown_cnt = 0;
  int inflight[3] = {};        // background+normal, kswapd, discard
  unsigned waiting = 0;        // writes asleep in throttle, all classes
  bool window_open = false;    // a window's timer is pending (blk_stat_is_active)
};
// Fills *out with q's wbt state; false if q has no wbt. Any thread (a
// snapshot: fields may be from moments apart while I/O runs).
bool wbt_info(Queue* q, WbtInfo* out);

}  // namespace blkmq
