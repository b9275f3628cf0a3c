// io.cost (the kernel's block/blk-iocost.c) as an rq-qos policy: every bio
// of a group has a cost from a linear model of the device (a base cost per
// sequential or random I/O plus a cost per 4 KiB page), and each group
// spends device time at the rate of its share of the weight tree. A group
// whose vtime would run ahead of the device's waits in throttle, with no
// tag held. The device's vtime runs at vrate, which each period moves up
// while groups wait and the device keeps its latency targets, and down
// when requests wait for tags or the targets are missed.
//
// The files: cgroup/io.cost.qos and cgroup/io.cost.model at the root,
// cgroup/<group path>/io.weight per group. docs/QOS.md, "io.cost", has the
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
// debugfs name for RQ_QOS_COST.
inline constexpr std::string_view kIocostPolicy = "cost";

// Registers the policy kind with register_rq_qos, once per process; later
// calls return the first call's result. The files do this before they add
// the policy. Any thread.
Status iocost_register();

// Whether `path` is one of io.cost's files: "cgroup/io.cost.qos",
// "cgroup/io.cost.model" (the root's only), or "cgroup/<group
// path>/io.weight" (every group but the root). Pure.
bool iocost_attr_is(std::string_view path);

// Writes one of io.cost's files on q, in the kernel's formats:
// - io.cost.qos: "[MAJ:MIN] enable=0|1 ctrl=auto|user rpct=P rlat=USEC
//   wpct=P wlat=USEC min=P max=P", any subset; a key given makes the
//   parameters the user's (ctrl=user), ctrl=auto goes back to the
//   device's defaults. enable=1 adds the policy to q (freezing it) if it
//   is not there; enable=0 stops the control (bios pass uncharged).
// - io.cost.model: "[MAJ:MIN] ctrl=auto|user model=linear rbps=
//   rseqiops= rrandiops= wbps= wseqiops= wrandiops=".
// - io.weight: "N" or "default N" set the group's weight on every device,
//   "MAJ:MIN N" this device's, "MAJ:MIN default" clears that; 1..10000.
// The MAJ:MIN prefix is accepted and ignored: the file belongs to q. A bad
// value is EINVAL and changes nothing. Task context; takes q's sysfs lock
// and the tree mutex.
Status iocost_attr_store(QueueImpl* q, std::string_view path, std::string_view value);

// Reads one of io.cost's files on q: the qos and model lines in the
// kernel's format with the device's MAJ:MIN first, and io.weight as
// "default N" plus a "MAJ:MIN N" line when this device has a weight of
// its own. Task context.
Result<std::string> iocost_attr_show(const QueueImpl* q, std::string_view path);

// The files: the root's two, then "cgroup/<path>/io.weight" for every
// group but the root. Any thread; takes the tree mutex.
std::vector<std::string> iocost_attr_names();

// io.cost's keys for a group's io.stat line on q (" cost.usage=USEC
// cost.wait=USEC cost.indebt=USEC cost.indelay=0", and for the root
// " cost.vrate=P"), "" when io.cost is not on q. `b` is the group's blkg,
// nullptr for the root. Under the tree mutex.
std::string iocost_stat_keys(const QueueImpl* q, const Blkg* b);

// The blkg is being freed (pd_free): its io.cost state goes with it. Any
// context but a timer callback of io.cost's. Cheap when there is none.
void iocost_blkg_free(Blkg* b);

// One queue's io.cost state and one group's on it, for tests and tools.
struct IocostInfo {
  bool on_queue = false;    // the policy is on the queue's chain
  bool enabled = false;     // io.cost.qos enable=1
  uint64_t vrate_ppm = 0;   // the device's vtime rate, 1000000 = 100 %
  uint64_t period_ns = 0;
  int busy_level = 0;
  uint64_t periods = 0;     // periods ended since enabled
  bool tracked = false;     // io.cost has state for the group on the queue
  bool active = false;      // the group is in the weight tree this period
  unsigned weight = 0;      // its weight on the queue
  uint32_t hweight = 0;     // its share of the device, of 65536
  uint64_t usage_ns = 0;    // device time charged to it (abs cost)
  uint64_t wait_ns = 0;     // time its submitters slept in throttle
  unsigned waiting = 0;     // submitters asleep now
};

// Fills *out for group `path` on q ("/" for the queue's state alone).
// ENOENT for a missing group. Any thread but one holding the tree mutex.
Status iocost_info(Queue* q, std::string_view path, IocostInfo* out);

}  // namespace blkmq
