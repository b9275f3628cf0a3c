#include "drivers/scsi/scsi_params.h"

#include <charconv>
#include <string>

namespace blkmq::scsi {
namespace {

Status bad_value(std::string_view name, std::string_view accepted, std::string_view value) {
  return Status::invalid("scsi: parameter '" + std::string(name) + "' must be " +
                         std::string(accepted) + "; got '" + std::string(value) + "'");
}

// Ranges are checked by validate() on the configs; this only reads numbers.
template <typename T>
Status parse_uint(std::string_view name, std::string_view value, T* out) {
  T v{};
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || p != value.data() + value.size())
    return bad_value(name, "an unsigned integer", value);
  *out = v;
  return Status::ok();
}

Status parse_bool(std::string_view name, std::string_view value, bool* out) {
  if (value == "1" || value == "y" || value == "Y" || value == "true") {
    *out = true;
  } else if (value == "0" || value == "n" || value == "N" || value == "false") {
    *out = false;
  } else {
    return bad_value(name, "0 or 1 (also y/n, true/false)", value);
  }
  return Status::ok();
}

using Apply = Status (*)(ScsiParams& p, std::string_view name, std::string_view v);

struct ParamDef {
  const char* name;
  const char* default_value;
  const char* help;
  Apply apply;
};

const ParamDef kParams[] = {
    {"can_queue", "64", "host tags shared by all LUNs (per hw queue unless host_tagset=1)",
     [](ScsiParams& p, std::string_view n, std::string_view v) {
       return parse_uint(n, v, &p.host.can_queue);
     }},
    {"queue_depth", "32", "commands in flight per LUN (the device budget)",
     [](ScsiParams& p, std::string_view n, std::string_view v) {
       return parse_uint(n, v, &p.lun.queue_depth);
     }},
    {"nr_hw_queues", "1", "hardware queues of the host; clamped to the CPU count",
     [](ScsiParams& p, std::string_view n, std::string_view v) {
       return parse_uint(n, v, &p.host.nr_hw_queues);
     }},
    {"luns", "1", "LUNs on the host, each its own queue; the device's queue is LUN 0",
     [](ScsiParams& p, std::string_view n, std::string_view v) { return parse_uint(n, v, &p.luns); }},
    {"backing", "null", "LUN data: null (none kept) or memory (sparse pages, unwritten reads zeros)",
     [](ScsiParams& p, std::string_view n, std::string_view v) {
       if (v == "null") {
         p.lun.backing = ScsiBacking::null;
       } else if (v == "memory") {
         p.lun.backing = ScsiBacking::memory;
       } else {
         return bad_value(n, "null or memory", v);
       }
       return Status::ok();
     }},
    {"size", "250G", "capacity per LUN in bytes; suffixes k, M, G, T, P (powers of 1024)",
     [](ScsiParams& p, std::string_view n, std::string_view v) {
       auto r = parse_size(n, v);
       if (!r) return r.status();
       p.lun.size = *r;
       return Status::ok();
     }},
    {"bs", "512", "logical block size in bytes: 512, 1024, 2048 or 4096",
     [](ScsiParams& p, std::string_view n, std::string_view v) { return parse_uint(n, v, &p.lun.bs); }},
    {"latency_us", "0", "command latency; 0 = complete inline in queue_rq, else from the host's irq thread",
     [](ScsiParams& p, std::string_view n, std::string_view v) {
       return parse_uint(n, v, &p.host.latency_us);
     }},
    {"no_sched", "0", "1: no I/O scheduler possible (tag set flag no_sched, seed 001)",
     [](ScsiParams& p, std::string_view n, std::string_view v) { return parse_bool(n, v, &p.host.no_sched); }},
    {"host_tagset", "0", "1: one tag space of can_queue for all hw queues (shared tags)",
     [](ScsiParams& p, std::string_view n, std::string_view v) {
       return parse_bool(n, v, &p.host.host_tagset);
     }},
};

}  // namespace

Result<uint64_t> parse_size(std::string_view name, std::string_view value) {
  constexpr std::string_view kAccepted =
      "a byte count with an optional suffix k, M, G, T or P (e.g. 4096, 64M, 2G)";
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc()) return bad_value(name, kAccepted, value);
  std::string_view rest(p, value.data() + value.size() - p);
  unsigned shift = 0;
  if (!rest.empty()) {
    switch (rest.front()) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      case 'p': case 'P': shift = 50; break;
      default: return bad_value(name, kAccepted, value);
    }
    rest.remove_prefix(1);
    if (rest != "" && rest != "B" && rest != "iB") return bad_value(name, kAccepted, value);
  }
  if (shift && v > (UINT64_MAX >> shift)) return bad_value(name, kAccepted, value);
  return v << shift;
}

Result<ScsiParams> parse_scsi_params(const ParamMap& params) {
  ScsiParams p;
  for (const auto& [name, value] : params) {
    if (name.starts_with("attr:")) continue;
    const ParamDef* def = nullptr;
    for (const ParamDef& d : kParams) {
      if (name == d.name) def = &d;
    }
    if (!def) {
      std::string known;
      for (const ParamDef& d : kParams) known += std::string(known.empty() ? "" : ", ") + d.name;
      return Status::invalid("scsi: unknown parameter '" + name + "' (known: " + known + ")");
    }
    if (Status st = def->apply(p, name, value); !st) return st;
  }
  if (p.luns < 1 || p.luns > kMaxLuns) {
    return bad_value("luns", "in 1.." + std::to_string(kMaxLuns), std::to_string(p.luns));
  }
  if (p.lun.backing == ScsiBacking::memory) p.host.blocking = true;
  if (Status st = validate(p.host); !st) return st;
  if (Status st = validate(p.lun); !st) return st;
  return p;
}

std::vector<ParamInfo> scsi_param_infos() {
  std::vector<ParamInfo> v;
  for (const ParamDef& d : kParams) v.push_back({d.name, d.default_value, d.help});
  return v;
}

}  // namespace blkmq::scsi
