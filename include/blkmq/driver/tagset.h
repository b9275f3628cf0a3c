// The tag set: a driver's hardware queues and their tags, shared by one or
// more request queues (blk_mq_tag_set analogue).
#pragma once

#include <cstdint>
#include <memory>

#include "blkmq/driver/driver.h"
#include "blkmq/runtime.h"
#include "blkmq/status.h"

namespace blkmq {

enum TagSetFlag : uint32_t {
  // queue_rq may sleep; dispatch runs in a sleepable dispatch section.
  kTagSetBlocking = 1u << 0,
  // One tag bitmap for all hw queues of a queue (BLK_MQ_F_TAG_HCTX_SHARED,
  // null_blk's shared_tag_bitmap). Makes mq-deadline the default scheduler.
  kTagSetSharedTags = 1u << 1,
  // No I/O scheduler can be attached; plugged requests on a single hw queue
  // are issued directly (BLK_MQ_F_NO_SCHED as seed 001 used it; upstream
  // removed it in 6.14 — see docs/ARCHITECTURE.md).
  kTagSetNoSched = 1u << 2,
  // The default scheduler is none, but the user may switch.
  kTagSetNoSchedByDefault = 1u << 3,
  // Round-robin tag allocation (BLK_MQ_F_TAG_RR).
  kTagSetTagRR = 1u << 4,
};

constexpr unsigned kMaxQueueDepth = 10240;  // BLK_MQ_MAX_DEPTH
constexpr unsigned kDefaultTimeoutMs = 30000;

struct TagSetConfig {
  const DriverOps* ops = nullptr;  // required; must outlive the tag set
  void* driver_data = nullptr;     // passed to init_hctx
  // Hardware queues per type: [dflt, read, poll]. A type with 0 queues falls
  // back to dflt. nr_hw_queues is their sum. dflt must be >= 1.
  unsigned nr_queues[kNrHctxTypes] = {1, 0, 0};
  unsigned queue_depth = 64;       // driver tags per hctx (or shared), 1..10240
  unsigned reserved_tags = 0;      // taken with kRqAllocReserved only
  unsigned cmd_size = 0;           // driver payload bytes after each Request
  unsigned timeout_ms = 0;         // request timeout; 0 = 30 s
  uint32_t flags = 0;              // TagSetFlag bits
  // The runtime whose kblockd, softirq workers, timers and clock serve
  // every queue on this set (blkmq/runtime.h); it must outlive the set.
  // nullptr: Runtime::process_default(), real threads and time. A
  // ManualRuntime makes the core's logic steppable by a test.
  Runtime* runtime = nullptr;
};

// Thread-safe for the calls below; create/destroy from task context.
class TagSet {
 public:
  // Validates the config and allocates tags and static requests for every
  // hctx. Error on a bad config (with a message naming the field).
  static Result<std::unique_ptr<TagSet>> create(const TagSetConfig& cfg);
  // Destroying a tag set requires that every queue on it was destroyed.
  virtual ~TagSet();

  const TagSetConfig& config() const;
  unsigned nr_hw_queues() const;
  // Changes the number of default hw queues while I/O runs: freezes every
  // queue on the set, remaps CPUs, reallocates tags, unfreezes. In-flight
  // and queued I/O is carried over, nothing is lost. Task context; sleeps.
  // init_hctx failure falls back to the previous count and returns an error.
  Status update_nr_hw_queues(unsigned nr_default, unsigned nr_poll);

 protected:
  TagSet() = default;
};

}  // namespace blkmq
