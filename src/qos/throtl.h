// io.max (the kernel's blk-throttle): per (group, queue) read and write
// limits in bytes and I/Os per second, enforced on bios before they reach
// the queue (submit_bio_noacct's blk_throtl_bio), so a throttled bio holds
// no request, no tag and no usage reference while it waits. Only src/core
// and src/qos include this; docs/QOS.md has the model and the departures.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "blkmq/bio.h"
#include "blkmq/status.h"
#include "core/kblockd.h"

namespace blkmq {

class QueueImpl;
struct Blkg;
struct ThrotlData;

// A limit not set ("max").
constexpr uint64_t kThrotlNoLimit = UINT64_MAX;

// Bio::throtl_flags bits (set only on bios charged to a group).
enum : uint8_t {
  // Its bytes were charged on the way up (BIO_BPS_THROTTLED): a later pass
  // (a split part) counts one I/O per level and no bytes.
  kThrotlBpsDone = 1u << 0,
  // A part of a split bio, throttled again for its I/O: released past the
  // split, straight into the queue.
  kThrotlSplitPart = 1u << 1,
};

// Bios linked through Bio::bi_next, first in first out.
struct BioFifo {
  Bio* head = nullptr;
  Bio* tail = nullptr;
  bool empty() const { return head == nullptr; }
  void push(Bio* b) {
    b->bi_next = nullptr;
    (tail ? tail->bi_next : head) = b;
    tail = b;
  }
  Bio* pop() {
    Bio* b = head;
    if ((head = b->bi_next) == nullptr) tail = nullptr;
    b->bi_next = nullptr;
    return b;
  }
};

// One direction (read or write) of one group on one queue. Everything is
// under the queue's ThrotlData::lock.
struct ThrotlDir {
  uint64_t bps = kThrotlNoLimit;
  uint64_t iops = kThrotlNoLimit;
  // What the current slice dispatched: bytes and I/Os.
  uint64_t bytes_disp = 0;
  uint64_t io_disp = 0;
  // Allowance carried across a limit change (credit or, negative, debt).
  int64_t carry_bytes = 0;
  int64_t carry_ios = 0;
  uint64_t slice_start = 0;
  uint64_t slice_end = 0;
  // Waiting bios, this group's own and those its children passed up.
  BioFifo sync, async;
  unsigned nr_queued = 0;
  unsigned sync_run = 0;  // syncs taken in a row while an async waited
  // Credit (throtl_bio_slow's fast path): I/Os and bytes of the current
  // slice, already counted in io_disp and bytes_disp above where their
  // limit is set, that a bio takes without the lock. Given out under the
  // lock while the slice has room to spare; dropped with the slice, and
  // taken back before a bio waits and before a limit changes. Written
  // under the lock or by a compare-and-swap that only takes.
  std::atomic<int64_t> credit_ios{0};
  std::atomic<int64_t> credit_bytes{0};
  bool limited() const { return bps != kThrotlNoLimit || iops != kThrotlNoLimit; }
};

// ThrotlGroup::fast values: what a bio of the group may do without the
// throttle lock, per direction.
enum : uint8_t {
  kThrotlFastNone = 0,    // take the lock
  kThrotlFastCredit = 1,  // only its own level is limited: spend credit
  kThrotlFastFree = 2,    // no level is limited: pass
};

// A group's throttle state on one queue (throtl_grp), owned by its Blkg.
struct ThrotlGroup {
  ThrotlData* td = nullptr;
  ThrotlGroup* parent = nullptr;  // the parent blkg's; nullptr below the root
  ThrotlDir dir[2];               // [0] read, [1] write
  uint64_t disptime = 0;          // when its first waiting bio may go
  bool pending = false;           // in td->pending
  bool canceling = false;         // its group was removed: no limits apply
  // Per direction, a kThrotlFast* value: set under the lock and the tree
  // mutex whenever a limit of the queue changes, read with no lock.
  std::atomic<uint8_t> fast[2] = {kThrotlFastFree, kThrotlFastFree};
};

// A queue's throttle (throtl_data). Made with the queue, freed after its
// blkgs at teardown.
struct ThrotlData {
  QueueImpl* q = nullptr;
  std::mutex lock;
  // Groups of this queue with a limit set: 0 makes the stage one load and
  // a branch for a bio charged to a group (nothing at all for the root's).
  std::atomic<int> nr_limited{0};
  std::vector<ThrotlGroup*> pending;  // groups with waiting bios
  DelayedWork dispatch_work;          // releases them (kthrotld's work)
  uint64_t armed_at = UINT64_MAX;     // when dispatch_work fires next
  bool dying = false;                 // the queue is going: nothing waits
};

// Made and freed with the queue (QueueImpl::init, the destructor's end,
// which waits for a release still running). Task context.
void throtl_init_queue(QueueImpl* q);
void throtl_exit_queue(QueueImpl* q);

// Made with a blkg (its parent's first), freed with it; a new group's
// fast-path state follows its ancestors' limits. Under the tree mutex
// (alloc); any context (free).
ThrotlGroup* throtl_tg_alloc(QueueImpl* q, Blkg* parent);
void throtl_tg_free(ThrotlGroup* tg);

// The bio stage (blk_throtl_bio): true if the throttle took bio, which then
// reaches the queue later through submit_bio_throttled (or ends with
// `ioerr` if the queue dies first); false if it goes on now, charged.
// bio has a blkg. Task context; called only while throtl_active (the fast
// path's gate); takes the queue's throttle lock.
bool throtl_bio_slow(QueueImpl* q, Bio* bio);
// Whether any group of the queue has a limit: the one load a charged bio
// pays before throtl_bio_slow. Relaxed: a limit being set races with the
// bios submitted meanwhile, as in the kernel. Any context.
inline bool throtl_active(const ThrotlData* td) { return td->nr_limited.load(std::memory_order_relaxed) != 0; }

// The group of blkg was removed: its waiting bios go now, without its
// limits (the kernel flushes a dying group's bios). Under the tree mutex.
void throtl_blkg_offline(Blkg* b);
// The queue is dying (Queue::mark_dead, teardown): every waiting bio ends
// with `ioerr`, exactly once, on the caller's thread, and later ones pass
// to the queue, which refuses them. Any thread; takes the throttle lock.
void throtl_cancel_bios(QueueImpl* q);

// An io.max write, parsed: per direction, the new bps and iops (a value
// or kThrotlNoLimit), or `keep` for a key the write did not name.
struct ThrotlConf {
  static constexpr uint64_t kKeep = UINT64_MAX - 1;
  uint64_t bps[2] = {kKeep, kKeep};
  uint64_t iops[2] = {kKeep, kKeep};
};
// Parses "[MAJ:MIN] key=value..." (keys rbps, wbps, riops, wiops; a
// value is a size with the project's suffixes for bps, a count for iops,
// or "max"); the MAJ:MIN prefix is accepted and not checked. EINVAL with
// the offending token. Pure; any thread.
Result<ThrotlConf> throtl_iomax_parse(std::string_view value);
// Applies c to b's group, all at once; waiting bios get new dispatch
// times (tg_conf_updated). Under the tree mutex.
void throtl_iomax_apply(QueueImpl* q, Blkg* b, const ThrotlConf& c);
// io.max of b (nullptr: no blkg yet, so no limit): the kernel's line,
// "MAJ:MIN rbps=.. wbps=.. riops=.. wiops=..", or "" when no limit is set.
// Under the tree mutex.
std::string throtl_iomax_show(const QueueImpl* q, Blkg* b);

}  // namespace blkmq
