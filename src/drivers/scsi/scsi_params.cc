#include "drivers/scsi/scsi_params.h"

#include <string>

#include "drivers/params.h"

namespace blkmq::scsi {
namespace {

using drvparam::ParamValue;

constexpr const char* kDriver = "scsi";
constexpr base::SizeRule kSizeRule = drvparam::byte_capacity(/*zero_ok=*/false);

// Numbers are only read here: validate() on the configs checks the ranges.
const drvparam::ParamDef<ScsiParams> kParams[] = {
    {"can_queue", "64", "host tags shared by all LUNs (per hw queue unless host_tagset=1)",
     [](ScsiParams& p, const ParamValue& v) {
       return v.to_uint(&p.host.can_queue);
     }},
    {"queue_depth", "32", "commands in flight per LUN (the device budget)",
     [](ScsiParams& p, const ParamValue& v) {
       return v.to_uint(&p.lun.queue_depth);
     }},
    {"nr_hw_queues", "1", "hardware queues of the host; clamped to the CPU count",
     [](ScsiParams& p, const ParamValue& v) {
       return v.to_uint(&p.host.nr_hw_queues);
     }},
    {"luns", "1", "LUNs on the host, each its own queue; the device's queue is LUN 0",
     [](ScsiParams& p, const ParamValue& v) { return v.to_uint(&p.luns); }},
    {"backing", "null", "LUN data: null (none kept) or memory (sparse pages, unwritten reads zeros)",
     [](ScsiParams& p, const ParamValue& v) {
       size_t i = 0;
       Status st = v.to_choice({"null", "memory"}, &i);
       if (st) p.lun.backing = i == 0 ? ScsiBacking::null : ScsiBacking::memory;
       return st;
     }},
    {"size", "250G", "capacity per LUN",
     [](ScsiParams& p, const ParamValue& v) { return v.to_size(kSizeRule, &p.lun.size); }, &kSizeRule},
    {"bs", "512", "logical block size in bytes: 512, 1024, 2048 or 4096",
     [](ScsiParams& p, const ParamValue& v) { return v.to_uint(&p.lun.bs); }},
    {"latency_us", "0", "command latency; 0 = complete inline in queue_rq, else from the host's irq thread",
     [](ScsiParams& p, const ParamValue& v) {
       return v.to_uint(&p.host.latency_us);
     }},
    {"no_sched", "0", "1: no I/O scheduler possible (tag set flag no_sched, seed 001)",
     [](ScsiParams& p, const ParamValue& v) { return v.to_bool(&p.host.no_sched); }},
    {"host_tagset", "0", "1: one tag space of can_queue for all hw queues (shared tags)",
     [](ScsiParams& p, const ParamValue& v) {
       return v.to_bool(&p.host.host_tagset);
     }},
};

}  // namespace

Result<ScsiParams> parse_scsi_params(const ParamMap& params) {
  ScsiParams p;
  if (Status st = drvparam::parse_params(kDriver, kParams, params, &p); !st) return st;
  if (p.luns < 1 || p.luns > kMaxLuns) {
    const std::string luns = std::to_string(p.luns);
    return ParamValue{kDriver, "luns", luns}.error("an integer from 1 to " + std::to_string(kMaxLuns));
  }
  if (p.lun.backing == ScsiBacking::memory) p.host.blocking = true;
  if (Status st = validate(p.host); !st) return st;
  if (Status st = validate(p.lun); !st) return st;
  return p;
}

std::vector<ParamInfo> scsi_param_infos() { return drvparam::param_infos(kParams); }

}  // namespace blkmq::scsi
