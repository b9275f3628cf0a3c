#include "drivers/null/null_params.h"

#include <string_view>

#include "blkmq/driver/tagset.h"
#include "drivers/params.h"

namespace blkmq::nullb {
namespace {

using drvparam::ParamValue;

constexpr const char* kDriver = "null";

// Upper bounds that keep arithmetic safe while allowing anything sensible.
constexpr unsigned kMaxQueues = 4096;
constexpr uint64_t kMaxSizeMib = 1ull << 32;         // 4 PiB
constexpr uint64_t kMaxCompletionNsec = 60ull * 1000 * 1000 * 1000;  // 60 s
constexpr unsigned kMaxSectorsLimit = 65535;

// null_blk's sizes are MiB when bare ("--size=1024" is 1 GiB, as its
// gb/size module parameters count); with a suffix they are bytes, which
// must be whole MiB (issue 27: "64M" was refused as not an integer, with
// no unit named).
constexpr base::SizeRule kSizeRule{
    .bare_unit = base::kMiB, .lo = drvparam::kMinCapacity, .hi = kMaxSizeMib * base::kMiB, .multiple = base::kMiB};
constexpr base::SizeRule kZoneSizeRule{.bare_unit = base::kMiB, .lo = base::kMiB, .hi = kMaxSizeMib * base::kMiB, .multiple = base::kMiB};
constexpr base::SizeRule kCacheSizeRule{.bare_unit = base::kMiB, .hi = kMaxSizeMib * base::kMiB, .multiple = base::kMiB};

Status to_mib(const ParamValue& v, const base::SizeRule& rule, uint64_t* out) {
  uint64_t bytes = 0;
  if (Status st = v.to_size(rule, &bytes); !st) return st;
  *out = bytes / base::kMiB;
  return Status::OK();
}

// A fault injection point: "interval,probability,space,times" ("" = off).
template <FaultConfig NullParams::*Point>
Status fault_param(NullParams& p, const ParamValue& v) {
  auto r = parse_fault_config(v.name, v.value);
  if (!r) return r.status();
  p.*Point = *r;
  return Status::OK();
}

const drvparam::ParamDef<NullParams> kParams[] = {
    {"submit_queues", "1", "number of submission (default-type) hw queues; clamped to the CPU count",
     [](NullParams& p, const ParamValue& v) {
       return v.to_int(1u, kMaxQueues, &p.submit_queues);
     }},
    {"poll_queues", "1", "number of poll-type hw queues (0 = none); clamped to the CPU count",
     [](NullParams& p, const ParamValue& v) {
       return v.to_int(0u, kMaxQueues, &p.poll_queues);
     }},
    {"hw_queue_depth", "64", "driver tags per hw queue",
     [](NullParams& p, const ParamValue& v) {
       return v.to_int(1u, kMaxQueueDepth, &p.hw_queue_depth);
     }},
    {"irqmode", "1", "completion: 0 = inline end_request, 1 = complete_request (softirq routing), 2 = timer",
     [](NullParams& p, const ParamValue& v) {
       unsigned m = 0;
       Status st = v.to_int(0u, 2u, &m, "0 = none, 1 = softirq, 2 = timer");
       if (st) p.irqmode = static_cast<IrqMode>(m);
       return st;
     }},
    {"completion_nsec", "10000", "completion delay in ns with irqmode=2",
     [](NullParams& p, const ParamValue& v) {
       return v.to_int(0, kMaxCompletionNsec, &p.completion_nsec);
     }},
    {"blocking", "0", "queue_rq may sleep (tag set flag blocking)",
     [](NullParams& p, const ParamValue& v) { return v.to_bool(&p.blocking); }},
    {"shared_tags", "0", "share one tag set between all devices created with shared_tags=1",
     [](NullParams& p, const ParamValue& v) {
       return v.to_bool(&p.shared_tags);
     }},
    {"shared_tag_bitmap", "0", "one tag bitmap for all hw queues of the device",
     [](NullParams& p, const ParamValue& v) {
       return v.to_bool(&p.shared_tag_bitmap);
     }},
    {"no_sched", "0", "0 = default scheduler rule, 1 = none by default (user may switch), 2 = no scheduler possible (seed 001)",
     [](NullParams& p, const ParamValue& v) {
       return v.to_int(0u, 2u, &p.no_sched, "1 = none by default, 2 = no scheduler at all");
     }},
    {"memory_backed", "0", "store data in memory (sparse 4 KiB pages); forces blocking",
     [](NullParams& p, const ParamValue& v) {
       return v.to_bool(&p.memory_backed);
     }},
    {"bs", "512", "logical block size in bytes: 512, 1024, 2048 or 4096",
     [](NullParams& p, const ParamValue& v) {
       return v.to_power_of_two(512u, 4096u, &p.bs);
     }},
    {"size", "256000", "capacity (default 250 GiB)",
     [](NullParams& p, const ParamValue& v) { return to_mib(v, kSizeRule, &p.size_mib); }, &kSizeRule},
    {"mbps", "0", "bandwidth cap in MiB/s (0 = unlimited, at most 40960)",
     [](NullParams& p, const ParamValue& v) {
       return v.to_int(0u, kMaxMbps, &p.mbps);
     }},
    {"discard", "0", "support discard (needs memory_backed; ignored otherwise)",
     [](NullParams& p, const ParamValue& v) { return v.to_bool(&p.discard); }},
    {"cache_size", "0", "write-back cache size, 0 = none (needs memory_backed; ignored otherwise)",
     [](NullParams& p, const ParamValue& v) { return to_mib(v, kCacheSizeRule, &p.cache_size_mib); },
     &kCacheSizeRule},
    {"fua", "1", "native FUA when the write-back cache is on",
     [](NullParams& p, const ParamValue& v) { return v.to_bool(&p.fua); }},
    {"rotational", "0", "report a rotational device",
     [](NullParams& p, const ParamValue& v) {
       return v.to_bool(&p.rotational);
     }},
    {"max_sectors", "2560", "maximum request size in 512-byte sectors (at least one block)",
     [](NullParams& p, const ParamValue& v) {
       return v.to_int(1u, kMaxSectorsLimit, &p.max_sectors);
     }},
    {"home_node", "-1", "NUMA node (accepted and ignored)",
     [](NullParams& p, const ParamValue& v) {
       return v.to_int(-1, 1023, &p.home_node);
     }},
    {"timeout_inject", "", "fault injection: requests that never complete, \"interval,probability,space,times\"",
     fault_param<&NullParams::timeout_inject>},
    {"requeue", "", "fault injection: requeue requests, \"interval,probability,space,times\"",
     fault_param<&NullParams::requeue>},
    {"init_hctx", "", "fault injection: fail hw queue init, \"interval,probability,space,times\"",
     fault_param<&NullParams::init_hctx>},
    {"zoned", "0", "a host-managed zoned device (null_blk's zoned mode)",
     [](NullParams& p, const ParamValue& v) { return v.to_bool(&p.zoned); }},
    {"zone_size", "256", "zone size with zoned=1, a power of two (MiB when bare)",
     [](NullParams& p, const ParamValue& v) { return to_mib(v, kZoneSizeRule, &p.zone_size_mib); }, &kZoneSizeRule},
    {"zone_capacity", "0", "writable part of each zone, at most zone_size (0 = zone_size; MiB when bare)",
     [](NullParams& p, const ParamValue& v) { return to_mib(v, kCacheSizeRule, &p.zone_capacity_mib); },
     &kCacheSizeRule},
    {"zone_nr_conv", "0", "conventional zones at the start of a zoned device",
     [](NullParams& p, const ParamValue& v) { return v.to_int(0u, 1u << 30, &p.zone_nr_conv); }},
    {"zone_max_open", "0", "open zone limit (0 = none)",
     [](NullParams& p, const ParamValue& v) { return v.to_int(0u, 1u << 30, &p.zone_max_open); }},
    {"zone_max_active", "0", "active zone limit (0 = none)",
     [](NullParams& p, const ParamValue& v) { return v.to_int(0u, 1u << 30, &p.zone_max_active); }},
    {"zone_append_max_sectors", "4294967295",
     "largest native zone append in sectors (capped at the zone size and max_sectors); 0 = no native append, the core emulates it",
     [](NullParams& p, const ParamValue& v) { return v.to_int(0u, UINT32_MAX, &p.zone_append_max_sectors); }},
    {"zone_full", "0", "sequential zones start full",
     [](NullParams& p, const ParamValue& v) { return v.to_bool(&p.zone_full); }},
};

std::string bool_str(bool b) { return b ? "1" : "0"; }

}  // namespace

uint32_t NullParams::tag_set_flags() const {
  uint32_t f = 0;
  if (blocking || memory_backed) f |= kTagSetBlocking;
  if (shared_tag_bitmap) f |= kTagSetSharedTags;
  if (no_sched == 1) f |= kTagSetNoSchedByDefault;
  if (no_sched == 2) f |= kTagSetNoSched;
  return f;
}

Result<NullParams> parse_null_params(const ParamMap& params) {
  NullParams p;
  if (Status st = drvparam::parse_params(kDriver, kParams, params, &p); !st) return st;
  // A request is whole blocks, so a partial block at the end of the limit
  // could never be used.
  if (Status st = drvparam::fit_max_sectors(kDriver, p.bs, &p.max_sectors); !st) return st;
  if (p.memory_backed) {
    // The page store allocates and takes locks in queue_rq.
    p.blocking = true;
  } else {
    // Without data there is nothing to cache or discard (as null_blk).
    p.cache_size_mib = 0;
    p.discard = false;
  }
  return p;
}

std::vector<ParamInfo> null_param_infos() { return drvparam::param_infos(kParams); }

std::vector<std::pair<std::string, std::string>> describe_null_params(const NullParams& p) {
  return {
      {"submit_queues", std::to_string(p.submit_queues)},
      {"poll_queues", std::to_string(p.poll_queues)},
      {"hw_queue_depth", std::to_string(p.hw_queue_depth)},
      {"irqmode", std::to_string(static_cast<unsigned>(p.irqmode))},
      {"completion_nsec", std::to_string(p.completion_nsec)},
      {"blocking", bool_str(p.blocking)},
      {"shared_tags", bool_str(p.shared_tags)},
      {"shared_tag_bitmap", bool_str(p.shared_tag_bitmap)},
      {"no_sched", std::to_string(p.no_sched)},
      {"memory_backed", bool_str(p.memory_backed)},
      {"bs", std::to_string(p.bs)},
      {"size", std::to_string(p.size_mib)},
      {"mbps", std::to_string(p.mbps)},
      {"discard", bool_str(p.discard)},
      {"cache_size", std::to_string(p.cache_size_mib)},
      {"fua", bool_str(p.fua)},
      {"rotational", bool_str(p.rotational)},
      {"max_sectors", std::to_string(p.max_sectors)},
      {"home_node", std::to_string(p.home_node)},
      {"timeout_inject", format_fault_config(p.timeout_inject)},
      {"requeue", format_fault_config(p.requeue)},
      {"init_hctx", format_fault_config(p.init_hctx)},
      {"zoned", bool_str(p.zoned)},
      {"zone_size", std::to_string(p.zone_size_mib)},
      {"zone_capacity", std::to_string(p.zone_capacity_mib)},
      {"zone_nr_conv", std::to_string(p.zone_nr_conv)},
      {"zone_max_open", std::to_string(p.zone_max_open)},
      {"zone_max_active", std::to_string(p.zone_max_active)},
      {"zone_append_max_sectors", std::to_string(p.zone_append_max_sectors)},
      {"zone_full", bool_str(p.zone_full)},
  };
}

}  // namespace blkmq::nullb
