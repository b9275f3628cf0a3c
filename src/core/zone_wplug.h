// Zone write plugging (block/blk-zoned.c since 6.10): the zoned queue's
// zone model (learned from the driver's report when the queue is made)
// and one plug per sequential zone with a write in flight. A zone has one
// write request at a time; later writes wait in its plug as bios, holding
// a queue usage reference but no tag or request, and are issued in order
// from kblockd as each completes, merged into one request where they can
// be. Appends become writes at the plug's write pointer where the device
// has no native append. A failed write aborts what the plug holds and
// marks the zone until a reset, a finish or a report tells the pointer
// again. Works under every scheduler: nothing here is the scheduler's.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "blkmq/bio.h"
#include "blkmq/zoned.h"
#include "blkmq/driver/list.h"
#include "base/spinlock.h"
#include "blkmq/driver/request.h"
#include "core/kblockd.h"

namespace blkmq {

class QueueImpl;

// Bio::zwp_flags.
enum ZwpBioFlag : uint8_t {
  kZwpPlugging = 1u << 0,         // holds its zone's plug (BIO_ZONE_WRITE_PLUGGING)
  kZwpEmulatedAppend = 1u << 1,   // an append sent as a write; restored when it ends
  kZwpSetNomerge = 1u << 2,       // the emulation set kBioNomerge; cleared with it
  kZwpFromPlug = 1u << 3,         // waited in the plug: its request gathers the bios behind it
  kZwpNativeAppend = 1u << 4,     // an append the device does itself: learns where it landed
};

// A request whose bios hold a zone's plug (RQF_ZONE_WRITE_PLUGGING), and a
// native append's, whose bio learns where it was written when it ends.
constexpr uint32_t kRqfZoneWplug = 1u << 13;
constexpr uint32_t kRqfZoneAppend = 1u << 14;

struct ZoneWplug;

class ZoneWplugs {
 public:
  // Learns the zones through cfg.report_zones (blk_revalidate_disk_zones):
  // every zone but the last has the zone size, the sequential ones one
  // capacity (the last its own), and a zone written part-way gets a plug
  // holding its write pointer. Sets *max_open to 128 when the device has
  // no limits and more sequential zones than that. Task context, at
  // queue creation.
  static Result<std::unique_ptr<ZoneWplugs>> create(QueueImpl* q, unsigned* max_open);
  // The queue is drained: no plug has a write in flight. Waits for any
  // plug work still finishing.
  ~ZoneWplugs();

  unsigned nr_zones() const { return nr_zones_; }
  bool is_conventional(uint64_t sector) const;

  // Submission (blk_zone_plug_bio), for a bio to this queue after merging
  // failed: writes, appends, resets, resets-all and finishes are the ones
  // it acts on (other ops return false at once). True: the bio was taken,
  // plugged (it then holds a usage reference of its own) or ended with an
  // error; the caller drops its own reference. False: go on and issue it;
  // a write then holds its zone's plug (kZwpPlugging), and its sector may
  // have changed (an emulated append). Task context. A write at the
  // pointer of a zone whose plug is idle takes it with one
  // compare-and-swap; a write to a conventional zone takes nothing;
  // anything else takes the plugs' lock.
  bool plug_bio(Bio* bio) { return bio->op == ReqOp::write ? plug_write(bio) : plug_other(bio); }
  // A bio that holds a plug merged at the back of a request that holds it
  // too (blk_zone_write_plug_bio_merged): the write pointer moves past it.
  void bio_merged(Bio* bio);
  // rq was just made from a bio released from its plug (kZwpFromPlug):
  // pulls the plugged bios that follow it on into rq while they fit
  // (blk_zone_write_plug_init_request). A bio that found its plug free
  // skips this: nothing waited behind it when it took the plug.
  void init_request(Request* rq);
  // rq, holding its plug, ends with st (before its bios end): emulated
  // appends become appends again at the sector written; a failure aborts
  // the plugged bios and marks the zone; the next plugged bio is issued
  // from kblockd, or the plug is released. Any context.
  void end_request(Request* rq, BlkStatus st);
  // A bio holding its plug failed before it had a request (no tag with
  // kBioNowait): the pointer goes back, the plug moves on. Task context.
  void unissued_bio_failed(Bio* bio);
  // A report reached the core (Queue::report_zones): marked zones take
  // the reported write pointer again (disk_zone_wplug_sync_wp_offset).
  void sync_from_report(const std::vector<Zone>& zones);

  // The debugfs zone_wplugs listing: "zone_no flags ref wp_offset
  // bio_list_size", one plug a line, by zone. Any thread.
  std::string show() const;

 private:
  explicit ZoneWplugs(QueueImpl* q);
  Status learn_zones(unsigned* max_open);
  Status learn_zone(const Zone& z, unsigned idx, bool last);

  uint64_t zone_start(unsigned zno) const { return uint64_t{zno} << zone_shift_; }
  uint64_t capacity_of(unsigned zno) const { return zno + 1 == nr_zones_ ? last_capacity_ : capacity_; }
  // With mu_ held.
  ZoneWplug* lookup(unsigned zno) const;
  ZoneWplug* get_or_alloc(unsigned zno, uint64_t wp_offset);
  bool release(ZoneWplug* p);
  void remove_if_done(ZoneWplug* p);
  bool prepare(ZoneWplug* p, Bio* bio);
  void set_wp_offset(ZoneWplug* p, uint64_t wp, Bio** aborted);
  void abort_bios(ZoneWplug* p, Bio** aborted);
  void unplug(ZoneWplug* p);
  bool plug_write(Bio* bio);
  bool plug_write_slow(Bio* bio, unsigned zno, ZoneWplug* taken);
  void end_request_locked(ZoneWplug* p, BlkStatus st);
  void pool_if_done(ZoneWplug* p, unsigned zno);
  bool plug_other(Bio* bio);
  bool handle_reset_or_finish(Bio* bio);
  void handle_native_append(Bio* bio);
  // Outside mu_: ends what abort_bios collected, dropping their references.
  void fail_aborted(Bio* list);
  static void work_fn(Work* w);
  void issue_next(ZoneWplug* p);

  QueueImpl* q_;
  unsigned zone_shift_ = 0;
  unsigned nr_zones_ = 0;
  uint64_t capacity_ = 0;       // of every sequential zone but the last
  uint64_t last_capacity_ = 0;  // the last zone's
  std::vector<uint64_t> conv_;  // bitmap of conventional zones
  // The plug table's changes, the pool, the plugs' bio lists and every
  // state change but the two without a lock (a write taking an idle plug,
  // its completion giving it back when nothing waits: see ZoneWplug in
  // zone_wplug.cc). One lock where the kernel has an RCU hash and a
  // spinlock per plug; a spinlock, as the kernel's, since nothing under it
  // sleeps (the completion side runs in any context).
  mutable base::SpinLock mu_;
  // The plug of each zone, or null: one load per lookup where the kernel
  // hashes, for 8 bytes a zone (800 KB for 100,000 zones). Written under
  // mu_, read without it by the two lock-free paths.
  std::vector<std::atomic<ZoneWplug*>> table_;
  ListNode free_;               // plugs ready for reuse
  std::vector<std::unique_ptr<ZoneWplug>> store_;  // every plug ever made
};

}  // namespace blkmq
