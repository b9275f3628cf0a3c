// The bio: one I/O as a submitter describes it.
#pragma once

#include <sys/uio.h>

#include <cstdint>

#include "blkmq/ioctx.h"
#include "blkmq/status.h"
#include "blkmq/zoned.h"

namespace blkmq {

constexpr unsigned kSectorShift = 9;  // sectors are always 512 bytes
constexpr uint32_t kSectorSize = 1u << kSectorShift;

enum class ReqOp : uint8_t {
  read = 0,
  write = 1,
  flush = 2,         // empty cache flush (no data)
  discard = 3,       // no data vector
  write_zeroes = 4,  // no data vector
  // Zoned devices only (QueueLimits::zoned; elsewhere notsupp). An append
  // writes its data at the write pointer of the zone whose first sector
  // `sector` names, and when it ends `sector` holds where it was written
  // (REQ_OP_ZONE_APPEND). The management ops carry no data: `sector` is
  // the zone's first sector and size 0 (reset_all: sector 0).
  zone_append = 5,
  zone_reset = 6,
  zone_reset_all = 7,
  zone_open = 8,
  zone_close = 9,
  zone_finish = 10,
};
constexpr bool op_is_write(ReqOp op) { return op != ReqOp::read; }
constexpr bool op_has_data(ReqOp op) {
  return op == ReqOp::read || op == ReqOp::write || op == ReqOp::zone_append;
}
// Reset, reset-all, open, close and finish: REQ_OP_ZONE_* but append.
constexpr bool op_is_zone_mgmt(ReqOp op) { return op >= ReqOp::zone_reset && op <= ReqOp::zone_finish; }
// A zone command's request op, and back (for a zone management op; any
// other maps to reset). For drivers and callers of zone commands; pure.
constexpr ReqOp zone_req_op(ZoneOp op) {
  switch (op) {
    case ZoneOp::reset_all: return ReqOp::zone_reset_all;
    case ZoneOp::open: return ReqOp::zone_open;
    case ZoneOp::close: return ReqOp::zone_close;
    case ZoneOp::finish: return ReqOp::zone_finish;
    default: return ReqOp::zone_reset;
  }
}
constexpr ZoneOp zone_op_of(ReqOp op) {
  switch (op) {
    case ReqOp::zone_reset_all: return ZoneOp::reset_all;
    case ReqOp::zone_open: return ZoneOp::open;
    case ReqOp::zone_close: return ZoneOp::close;
    case ReqOp::zone_finish: return ZoneOp::finish;
    default: return ZoneOp::reset;
  }
}

// Bio flags (REQ_* analogues).
enum BioFlag : uint32_t {
  kBioSync = 1u << 0,      // the submitter waits for it (reads are always sync)
  kBioFua = 1u << 1,       // forced unit access: durable when it completes
  kBioPreflush = 1u << 2,  // flush the device cache before this write
  kBioNomerge = 1u << 3,   // never merge with another bio or request
  kBioNowait = 1u << 4,    // fail with BlkStatus::again rather than sleep for a tag or a freeze
  kBioPolled = 1u << 5,    // completion is reaped by Queue::poll on a poll queue
  kBioMeta = 1u << 6,      // metadata (informational)
  // Page-cache writeback (what the kernel's writeback code submits without
  // REQ_IDLE): a write wbt may throttle. A write without it is treated as
  // the kernel treats an O_DIRECT write (REQ_SYNC|REQ_IDLE): never
  // throttled. With kBioSync it is WB_SYNC_ALL writeback (fsync), which
  // wbt lets use its whole depth. See docs/QOS.md, "wbt".
  kBioWriteback = 1u << 7,
  // Background writeback (REQ_BACKGROUND, wbc->for_background): wbt holds
  // it to its smallest limit. Meaningful with kBioWriteback.
  kBioBackground = 1u << 8,
};

struct Bio;
class Queue;
struct Blkg;  // the core's per (group, queue) data (src/qos/blkcg.h)
// Called exactly once per submitted bio, with bio->status set. Context: any
// (task, softirq or hardirq); must not block for long, must not submit to the
// same queue synchronously when called from hardirq/softirq context. The bio
// may be reused or freed by the callback.
using BioEndIo = void (*)(Bio* bio);

// A bio. The submitter owns the memory and keeps it (and its data vector and
// buffers) alive until end_io runs. A bio may be split by the core; the
// caller sees one end_io for the original bio.
// The most data vectors one bio may carry (BIO_MAX_VECS); more end with inval.
constexpr uint16_t kBioMaxVecs = 256;

struct Bio {
  ReqOp op = ReqOp::read;
  uint32_t flags = 0;
  uint16_t ioprio = kIoprioDefault;   // what mq-deadline's priority levels read
  uint64_t sector = 0;                // start, in 512-byte sectors
  uint32_t size = 0;                  // bytes; a multiple of the logical block size
  const iovec* vec = nullptr;         // data segments; sum of lengths == size
  uint16_t nr_vecs = 0;
  IoContext* ioc = nullptr;           // null: the submitting thread's context
  BioEndIo end_io = nullptr;          // required
  void* private_data = nullptr;       // caller's cookie
  BlkStatus status = BlkStatus::ok;   // valid when end_io runs
  // Owned by the core: io.max's marks (src/qos/throtl.h: bytes charged, a
  // split part), set only on a bio charged to a group and cleared with its
  // blkg in bio_endio, so neither submit nor bio_reinit need touch it. In
  // status's padding: the bio does not grow.
  uint8_t throtl_flags = 0;
  // Owned by the core: zone write plugging's marks (src/core/zone_wplug.h:
  // the bio holds a zone's plug, an append it turned into a write), set
  // while a bio to a zoned queue is in flight. Also in the padding.
  uint8_t zwp_flags = 0;

  // Owned by the core while the bio is in flight.
  Bio* bi_next = nullptr;             // chain inside a request
  uint32_t done_bytes = 0;            // bytes already completed (split/partial)
  uint64_t cookie = 0;                // poll cookie: which hctx to poll
  // The (group, queue) pair charged (the kernel's bi_blkg), holding a
  // reference until the bio ends; nullptr for the root group, which costs
  // nothing per bio. This and qos_queue are nullptr whenever the bio is
  // not in flight (bio_endio clears them), so submit need not.
  Blkg* blkg = nullptr;
  // The queue whose rq-qos chain saw it in throttle or merge (the kernel's
  // BIO_QOS_THROTTLED and BIO_QOS_MERGED): its done_bio hooks run when it
  // ends. nullptr when no policy is set.
  Queue* qos_queue = nullptr;
  // When io.latency's throttle first saw the bio (the kernel's bi_issue),
  // on the queue's clock; 0 when it did not. Its done_bio reads it and
  // sets it back to 0.
  uint64_t issue_ns = 0;

  uint64_t end_sector() const { return sector + (size >> kSectorShift); }
};

// Resets the fields the core owns so a completed bio can be submitted again.
inline void bio_reinit(Bio* b) {
  b->status = BlkStatus::ok;
  b->bi_next = nullptr;
  b->zwp_flags = 0;
  b->done_bytes = 0;
  b->cookie = 0;
  b->blkg = nullptr;
  b->qos_queue = nullptr;
}

}  // namespace blkmq
