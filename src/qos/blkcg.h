// The I/O group tree's internals (the kernel's blkcg and blkcg_gq): groups,
// per (group, queue) data and io.stat's counters. Only src/core and
// src/qos include this.
#pragma once

#include <atomic>
#include <mutex>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/spinlock.h"
#include "blkmq/bio.h"
#include "blkmq/iogroup.h"
#include "blkmq/status.h"

namespace blkmq {

class QueueImpl;
struct IolatGrp;
struct ThrotlGroup;
namespace iocost {
struct Iocg;
}

// io.stat's three kinds (blk_cgroup_io_type): discards, other writes
// (flushes and zeroing included), reads.
enum IostatType : unsigned { kIostatRead = 0, kIostatWrite = 1, kIostatDiscard = 2, kIostatNr = 3 };

// One group. References: the tree's link, each member context, each blkg
// and each child group hold one; the last put frees it.
class IoGroup {
 public:
  std::string name;           // "" for the root
  IoGroup* parent = nullptr;  // held (a reference) until this group is freed
  std::vector<IoGroup*> children;  // under the tree mutex
  std::atomic<int> ref{1};
  std::atomic<int> members{0};     // contexts in it (EBUSY on remove)
  // In the tree; written under the tree mutex, read anywhere (policies
  // drop their state for a removed group).
  std::atomic<bool> online{true};
  // io.bfq.weight's default (io_group_bfq_weight).
  std::atomic<unsigned> bfq_weight{kIoGroupWeightDefault};
  // io.weight's default, io.cost's weight on every device
  // (io_group_cost_weight).
  std::atomic<unsigned> cost_weight{kIoGroupWeightDefault};
  // Its blkgs, one per queue it has been charged on; the lookup on the
  // submit path takes only this lock (the kernel's blkcg->lock).
  base::SpinLock blkg_lock;
  std::vector<struct Blkg*> blkgs;
};

// Per (group, queue) data (blkcg_gq). Linked in its group's and its
// queue's lists while both live (one reference for the link); each bio
// charged to it holds one more, so a removed group's bios in flight still
// end with their blkg in place. Never made for the root group.
struct Blkg {
  QueueImpl* q = nullptr;
  IoGroup* group = nullptr;   // referenced
  Blkg* parent = nullptr;     // referenced; nullptr below the root
  std::atomic<int> ref{1};
  bool online = true;         // linked; under the tree mutex
  // io.stat, this group's own bios (and its removed children's, folded in
  // as the kernel's rstat flush does when a blkg dies).
  std::atomic<uint64_t> bytes[kIostatNr] = {};
  std::atomic<uint64_t> ios[kIostatNr] = {};
  // io.latency's state on this queue (src/qos/iolatency.cc), made when
  // the policy first sees the blkg, freed with it or with the policy.
  std::atomic<IolatGrp*> iolat{nullptr};
  // io.max's state on this queue (src/qos/throtl.h), made and freed with
  // the blkg.
  ThrotlGroup* tg = nullptr;
  // io.cost's state on this queue (src/qos/iocost_internal.h), made when
  // the policy first sees the blkg, freed with it or with the policy.
  std::atomic<iocost::Iocg*> iocg{nullptr};
};

// The kind of I/O a bio counts as in io.stat. Pure.
inline IostatType iostat_type(ReqOp op) {
  if (op == ReqOp::discard) return kIostatDiscard;
  return op_is_write(op) ? kIostatWrite : kIostatRead;
}

// Contexts in a group other than the root, all groups together. While it
// is zero no bio can be charged, and submit skips even finding its
// context (the kernel's static keys serve the same end). A thread sees its
// own moves; another's through whatever handed it the context.
extern std::atomic<int> g_io_group_members;
inline bool io_group_members_any() { return g_io_group_members.load(std::memory_order_relaxed) != 0; }

// Charges bio to its context's group, if that is not the root, and passes
// it through io.max: true if io.max took it (it reaches the queue later,
// through submit_bio_throttled), false if it goes on now. Task.
bool blkcg_bio_start_ioc(QueueImpl* q, Bio* bio);
// Associates bio with g's blkg on q (bio_associate_blkg): looks up or
// makes it, takes a reference for the bio (bio->blkg). False if g was
// removed meanwhile (the bio is then charged to nobody, as the kernel's
// falls back to the root). g is not the root. Task context; takes g's
// spinlock, and the tree mutex the first time g is used on q.
bool blkcg_bio_associate(QueueImpl* q, Bio* bio, IoGroup* g);
// Counts bio in its blkg's io.stat: one I/O and its bytes (the kernel's
// blk_cgroup_bio_start, after blk-throttle let it pass). Any context.
void blkcg_bio_account(const Bio* bio);
// Counts `n` more I/Os for a bio split into n + 1 parts (the kernel counts
// an I/O per split and the bytes once, BIO_CGROUP_ACCT). Any context.
inline void blkcg_bio_count_splits(const Bio* bio, unsigned n) {
  if (bio->blkg) bio->blkg->ios[iostat_type(bio->op)].fetch_add(n, std::memory_order_relaxed);
}
// Drops a reference; the last one frees the blkg. Any context.
void blkg_put(Blkg* blkg);
// The bio's charge ends with it (bio_uninit's blkg_put). Any context.
inline void blkcg_bio_end(Bio* bio) {
  if (Blkg* b = bio->blkg) [[unlikely]] {
    bio->blkg = nullptr;
    bio->throtl_flags = 0;  // set only on charged bios: cleared here, off the fast path
    blkg_put(b);
  }
}
// Takes b off its group's and its queue's lists and folds its io.stat
// counts into its parent's (the kernel flushes a dying blkg's stats up).
// The caller then drops the link's reference. Under the tree mutex.
void blkg_unlink_locked(Blkg* b);
// g's blkg on q, made (with its ancestors') if no bio made it yet: a
// policy's configuration lives there (blkg_conf_prep). Valid while the
// tree mutex is held, which the caller holds; g is online, not the root.
Blkg* blkg_conf_get_locked(QueueImpl* q, IoGroup* g);
// Unlinks every blkg of q (blkcg_exit_disk). Queue teardown, after the
// last bio ended.
void blkcg_exit_queue(QueueImpl* q);

// "cgroup/<group path>/<file>" for a path under "cgroup/": io.stat (the
// line of q's device in the kernel's format, counts of the group's whole
// subtree) or io.max (its limits on q; "" when none, no file for the
// root). Task context.
Result<std::string> blkcg_attr_show(const QueueImpl* q, std::string_view rest);
// Writes "cgroup/<group path>/io.max" (the only writable group file),
// making the group if it is missing, so `--attr cgroup/a/io.max=...` works
// at device creation. A bad value is EINVAL and changes (and makes)
// nothing. Task context; takes the tree mutex.
Status blkcg_attr_store(QueueImpl* q, std::string_view rest, std::string_view value);
// The attribute names of every group: "cgroup/io.stat", and
// "cgroup/a/io.stat" and "cgroup/a/io.max" for each group below the root.
std::vector<std::string> blkcg_attr_names();

// The tree's mutex (blkcg_pol_mutex and the queue_lock in one). Order:
// after a queue's sysfs_lock_, before any group's blkg_lock.
std::mutex& blkcg_tree_lock();
// io_group_find with the tree mutex held by the caller.
IoGroup* io_group_find_locked(std::string_view path);

}  // namespace blkmq
