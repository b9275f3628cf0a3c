// The null driver's parameters: null_blk's module parameter names and
// defaults, parsed and validated from create_device()'s string map.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/status.h"
#include "drivers/null/null_fault.h"

namespace blkmq::nullb {

// How a request is completed (null_blk's irqmode).
enum class IrqMode : uint8_t {
  none = 0,     // end_request() inline in queue_rq
  softirq = 1,  // complete_request() from queue_rq: routed by the core
  timer = 2,    // a per-command timer ends it completion_nsec later, in hardirq context
};

constexpr uint64_t kMiB = 1ull << 20;
// mbps is capped as null_blk caps it (40 GiB/s).
constexpr unsigned kMaxMbps = 40 * 1024;

struct NullParams {
  unsigned submit_queues = 1;     // default-type hw queues (clamped to nr_cpu_ids at creation)
  unsigned poll_queues = 1;       // poll-type hw queues
  unsigned hw_queue_depth = 64;   // driver tags per hw queue
  IrqMode irqmode = IrqMode::softirq;
  uint64_t completion_nsec = 10000;  // irqmode=2 completion delay
  bool blocking = false;          // kTagSetBlocking (forced by memory_backed)
  bool shared_tags = false;       // share one process-wide tag set between devices
  bool shared_tag_bitmap = false; // kTagSetSharedTags
  unsigned no_sched = 0;          // 1: kTagSetNoSchedByDefault; 2: kTagSetNoSched (seed 001)
  bool memory_backed = false;     // keep data in a sparse page store
  unsigned bs = 512;              // logical (and physical) block size
  uint64_t size_mib = 256000;     // capacity in MiB (250 GiB)
  unsigned mbps = 0;              // bandwidth cap in MiB/s; 0 = none
  bool discard = false;           // advertise discard (memory_backed only)
  uint64_t cache_size_mib = 0;    // write-back cache (memory_backed only)
  bool fua = true;                // native FUA when the cache is on
  bool rotational = false;
  unsigned max_sectors = 2560;    // max request size in 512 B sectors
  int home_node = -1;             // accepted and ignored (no NUMA placement here)
  FaultConfig timeout_inject;     // requests started and never completed
  FaultConfig requeue;            // queue_rq alternates resource / requeue_request
  FaultConfig init_hctx;          // init_hctx fails with -EFAULT
  // Zoned mode (null_blk's zoned parameters; sizes in MiB as null_blk's).
  bool zoned = false;
  uint64_t zone_size_mib = 256;      // power of two
  uint64_t zone_capacity_mib = 0;    // 0: the zone size
  unsigned zone_nr_conv = 0;         // conventional zones at the start
  unsigned zone_max_open = 0;        // 0: no limit
  unsigned zone_max_active = 0;      // 0: no limit
  unsigned zone_append_max_sectors = UINT32_MAX;  // 0: appends emulated by the core
  bool zone_full = false;            // sequential zones start FULL

  // Tag set flags these parameters ask for.
  uint32_t tag_set_flags() const;
  uint64_t size_bytes() const { return size_mib * kMiB; }
  // Any fault point configured: the I/O path takes its slow branch.
  bool io_faults() const { return timeout_inject.configured || requeue.configured; }
};

// Parses and validates `params`. Unknown names, malformed values and values
// out of range are refused with a message naming the parameter and the
// accepted range. Entries named "attr:..." belong to the core and are
// skipped. Applies null_blk's dependencies: memory_backed forces blocking;
// cache_size and discard are ignored without memory_backed.
Result<NullParams> parse_null_params(const ParamMap& params);

// One ParamInfo per parameter, in a stable order, with the default as the
// string parse_null_params() accepts.
std::vector<ParamInfo> null_param_infos();

// The parameters as "name=value" pairs, for reports.
std::vector<std::pair<std::string, std::string>> describe_null_params(const NullParams& p);

}  // namespace blkmq::nullb
