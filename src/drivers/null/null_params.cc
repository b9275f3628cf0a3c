#include "drivers/null/null_params.h"

#include <charconv>
#include <limits>
#include <string_view>

#include "blkmq/tagset.h"

namespace blkmq::nullb {
namespace {

Status range_error(std::string_view name, std::string_view accepted, std::string_view value) {
  return Status::invalid("null: parameter '" + std::string(name) + "' must be " +
                         std::string(accepted) + "; got '" + std::string(value) + "'");
}

template <typename T>
Status parse_int_range(std::string_view name, std::string_view value, T lo, T hi, T* out) {
  T v{};
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || p != value.data() + value.size() || v < lo || v > hi) {
    return range_error(name, "an integer in " + std::to_string(lo) + ".." + std::to_string(hi),
                       value);
  }
  *out = v;
  return Status::ok();
}

Status parse_bool(std::string_view name, std::string_view value, bool* out) {
  // The kernel's bool module parameters accept these spellings.
  if (value == "1" || value == "y" || value == "Y" || value == "true") {
    *out = true;
  } else if (value == "0" || value == "n" || value == "N" || value == "false") {
    *out = false;
  } else {
    return range_error(name, "0 or 1 (also y/n, true/false)", value);
  }
  return Status::ok();
}

using Apply = Status (*)(NullParams& p, std::string_view name, std::string_view v);

struct ParamDef {
  const char* name;
  const char* default_value;
  const char* help;
  Apply apply;
};

// Upper bounds that keep arithmetic safe while allowing anything sensible.
constexpr unsigned kMaxQueues = 4096;
constexpr uint64_t kMaxSizeMib = 1ull << 32;         // 4 PiB
constexpr uint64_t kMaxCompletionNsec = 60ull * 1000 * 1000 * 1000;  // 60 s
constexpr unsigned kMaxSectorsLimit = 65535;

const ParamDef kParams[] = {
    {"submit_queues", "1", "number of submission (default-type) hw queues; clamped to the CPU count",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_int_range(n, v, 1u, kMaxQueues, &p.submit_queues);
     }},
    {"poll_queues", "1", "number of poll-type hw queues (0 = none); clamped to the CPU count",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_int_range(n, v, 0u, kMaxQueues, &p.poll_queues);
     }},
    {"hw_queue_depth", "64", "driver tags per hw queue",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_int_range(n, v, 1u, kMaxQueueDepth, &p.hw_queue_depth);
     }},
    {"irqmode", "1", "completion: 0 = inline end_request, 1 = complete_request (softirq routing), 2 = timer",
     [](NullParams& p, std::string_view n, std::string_view v) {
       unsigned m = 0;
       if (!parse_int_range(n, v, 0u, 2u, &m)) {
         return range_error(n, "0 (none), 1 (softirq) or 2 (timer)", v);
       }
       p.irqmode = static_cast<IrqMode>(m);
       return Status::ok();
     }},
    {"completion_nsec", "10000", "completion delay in ns with irqmode=2",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_int_range(n, v, uint64_t{0}, kMaxCompletionNsec, &p.completion_nsec);
     }},
    {"blocking", "0", "queue_rq may sleep (tag set flag blocking)",
     [](NullParams& p, std::string_view n, std::string_view v) { return parse_bool(n, v, &p.blocking); }},
    {"shared_tags", "0", "share one tag set between all devices created with shared_tags=1",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_bool(n, v, &p.shared_tags);
     }},
    {"shared_tag_bitmap", "0", "one tag bitmap for all hw queues of the device",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_bool(n, v, &p.shared_tag_bitmap);
     }},
    {"no_sched", "0", "0 = default scheduler rule, 1 = none by default (user may switch), 2 = no scheduler possible (seed 001)",
     [](NullParams& p, std::string_view n, std::string_view v) {
       if (!parse_int_range(n, v, 0u, 2u, &p.no_sched)) {
         return range_error(n, "0, 1 (none by default) or 2 (no scheduler at all)", v);
       }
       return Status::ok();
     }},
    {"memory_backed", "0", "store data in memory (sparse 4 KiB pages); forces blocking",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_bool(n, v, &p.memory_backed);
     }},
    {"bs", "512", "logical block size in bytes: 512, 1024, 2048 or 4096",
     [](NullParams& p, std::string_view n, std::string_view v) {
       unsigned bs = 0;
       if (!parse_int_range(n, v, 512u, 4096u, &bs) || (bs & (bs - 1))) {
         return range_error(n, "a power of two in 512..4096", v);
       }
       p.bs = bs;
       return Status::ok();
     }},
    {"size", "256000", "capacity in MiB (default 250 GiB)",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_int_range(n, v, uint64_t{1}, kMaxSizeMib, &p.size_mib);
     }},
    {"mbps", "0", "bandwidth cap in MiB/s (0 = unlimited, at most 40960)",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_int_range(n, v, 0u, kMaxMbps, &p.mbps);
     }},
    {"discard", "0", "support discard (needs memory_backed; ignored otherwise)",
     [](NullParams& p, std::string_view n, std::string_view v) { return parse_bool(n, v, &p.discard); }},
    {"cache_size", "0", "write-back cache size in MiB (needs memory_backed; ignored otherwise)",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_int_range(n, v, uint64_t{0}, kMaxSizeMib, &p.cache_size_mib);
     }},
    {"fua", "1", "native FUA when the write-back cache is on",
     [](NullParams& p, std::string_view n, std::string_view v) { return parse_bool(n, v, &p.fua); }},
    {"rotational", "0", "report a rotational device",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_bool(n, v, &p.rotational);
     }},
    {"max_sectors", "2560", "maximum request size in 512-byte sectors (at least one block)",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_int_range(n, v, 1u, kMaxSectorsLimit, &p.max_sectors);
     }},
    {"home_node", "-1", "NUMA node (accepted and ignored)",
     [](NullParams& p, std::string_view n, std::string_view v) {
       return parse_int_range(n, v, -1, 1023, &p.home_node);
     }},
    {"timeout_inject", "", "fault injection: requests that never complete, \"interval,probability,space,times\"",
     [](NullParams& p, std::string_view n, std::string_view v) {
       auto r = parse_fault_config(n, v);
       if (!r) return r.status();
       p.timeout_inject = *r;
       return Status::ok();
     }},
    {"requeue", "", "fault injection: requeue requests, \"interval,probability,space,times\"",
     [](NullParams& p, std::string_view n, std::string_view v) {
       auto r = parse_fault_config(n, v);
       if (!r) return r.status();
       p.requeue = *r;
       return Status::ok();
     }},
    {"init_hctx", "", "fault injection: fail hw queue init, \"interval,probability,space,times\"",
     [](NullParams& p, std::string_view n, std::string_view v) {
       auto r = parse_fault_config(n, v);
       if (!r) return r.status();
       p.init_hctx = *r;
       return Status::ok();
     }},
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
  for (const auto& [name, value] : params) {
    if (name.starts_with("attr:")) continue;
    const ParamDef* def = nullptr;
    for (const ParamDef& d : kParams) {
      if (name == d.name) def = &d;
    }
    if (!def) {
      std::string known;
      for (const ParamDef& d : kParams) known += std::string(known.empty() ? "" : ", ") + d.name;
      return Status::invalid("null: unknown parameter '" + name + "' (known: " + known + ")");
    }
    if (Status st = def->apply(p, name, value); !st) return st;
  }
  unsigned min_sectors = p.bs >> kSectorShift;
  if (p.max_sectors < min_sectors) {
    return Status::invalid("null: parameter 'max_sectors' must be at least one block (" +
                           std::to_string(min_sectors) + " sectors with bs=" +
                           std::to_string(p.bs) + "); got '" + std::to_string(p.max_sectors) + "'");
  }
  // A request is whole blocks, so a partial block at the end of the limit
  // could never be used.
  p.max_sectors -= p.max_sectors % min_sectors;
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

std::vector<ParamInfo> null_param_infos() {
  std::vector<ParamInfo> v;
  for (const ParamDef& d : kParams) v.push_back({d.name, d.default_value, d.help});
  return v;
}

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
  };
}

}  // namespace blkmq::nullb
