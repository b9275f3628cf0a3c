// io.latency (the kernel's block/blk-iolatency.c) as an rq-qos policy: a
// group given a latency target that it misses over a window makes its
// peers (the groups beside it with a looser target or none) run at a
// smaller queue depth, halved per scale event down to 1, and given back
// in steps once the windows pass without misses. The file is
// cgroup/<group path>/io.latency; docs/QOS.md, "io.latency", has the
// model and where blkmq departs from the kernel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "blkmq/status.h"

namespace blkmq {

class Queue;
class QueueImpl;
struct Blkg;

// The policy's name on a queue's rq-qos chain (rq_qos_list): the kernel's
// debugfs name for RQ_QOS_LATENCY.
inline constexpr std::string_view kIolatencyPolicy = "latency";

// Registers the policy kind with register_rq_qos, once per process; later
// calls return the first call's result. The io.latency file does this
// before it adds the policy, so nothing else needs to. Any thread.
Status iolatency_register();

// Whether `path` is an io.latency file: "cgroup/<group path>/io.latency"
// or the root's "cgroup/io.latency" (which exists nowhere, as in cgroup
// v2: its store and show say so). Pure.
bool iolatency_attr_is(std::string_view path);

// Writes a group's io.latency on q: "[MAJ:MIN] target=USEC", where
// target=max or target=0 removes the target; the MAJ:MIN prefix, which
// cgroup v2 needs to name the device, is accepted and ignored since the
// attribute belongs to q. Makes the group if it is missing (as io.max
// does). A non-zero target adds the policy to q if it is not on it yet
// (the kernel's blk_iolatency_init on first configuration), which freezes
// q. A bad value is EINVAL and changes nothing; a removed group is
// ENOENT. Task context; takes q's sysfs lock and the tree mutex.
Status iolatency_attr_store(QueueImpl* q, std::string_view path, std::string_view value);

// Reads a group's io.latency on q: "MAJ:MIN target=USEC" when the group
// has a target on q, "" otherwise. ENOENT for a missing group, EINVAL for
// the root. Task context; takes the tree mutex.
Result<std::string> iolatency_attr_show(const QueueImpl* q, std::string_view path);

// "cgroup/<group path>/io.latency" for every group but the root, parents
// before children. Any thread; takes the tree mutex.
std::vector<std::string> iolatency_attr_names();

// io.latency's keys for a group's io.stat line (iolatency_pd_stat, which
// the kernel prints with blkcg_debug_stats on): " missed=N total=N
// depth=D" on a non-rotational device (the current window's bios), "
// depth=D avg_lat=USEC win=MS" on a rotational one; D is "max" when
// unlimited. "" when io.latency has no state for the blkg (or b is
// nullptr). Under q's sysfs lock and the tree mutex.
std::string iolatency_stat_keys(const QueueImpl* q, const Blkg* b);

// The blkg leaves its group's and queue's lists (the kernel's
// pd_offline): its target goes and its siblings' scaling is reset. Under
// the tree mutex. Cheap when io.latency never saw the blkg.
void iolatency_blkg_offline(Blkg* b);

// The blkg is being freed (pd_free): frees its io.latency state. Any
// context but one holding io.latency's locks. Cheap when there is none.
void iolatency_blkg_free(Blkg* b);

// One group's io.latency state on one queue, for tests and tools.
struct IolatencyInfo {
  bool on_queue = false;          // the policy is on the queue's chain
  bool tracked = false;           // io.latency has state for the group on it
  uint64_t target_ns = 0;         // 0: none
  uint64_t window_ns = 0;         // the group's window
  unsigned max_depth = UINT32_MAX;  // UINT32_MAX: unlimited
  unsigned inflight = 0;          // bios between throttle and done_bio
  unsigned waiting = 0;           // submitters asleep in throttle
  uint64_t samples = 0;           // latencies recorded since it was tracked
  uint64_t missed = 0;            // of them, at or over the target
  uint32_t scale_cookie = 0;      // the cookie its peers scale by (its parent's)
};

// Fills *out for group `path` on q. ENOENT for a missing group. Any thread
// but one holding the tree mutex.
Status iolatency_info(Queue* q, std::string_view path, IolatencyInfo* out);

}  // namespace blkmq
