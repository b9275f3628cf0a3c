// create_device("ublk", params): parameter parsing, the built-in target
// choice, and registration as driver "ublk".
#include <string_view>

#include "base/registry.h"
#include "blkmq/device.h"
#include "blkmq/driver/device_driver.h"
#include "drivers/params.h"
#include "drivers/ublk/ublk_dev.h"
#include "drivers/ublk/ublk_targets.h"

namespace blkmq::ublkd {
namespace {

// The null target's capacity when size is not given (null_blk's 250 GiB).
constexpr uint64_t kNullDefaultSize = 250ull << 30;

struct UblkParams {
  std::string target = "null";
  std::string filename;
  bool direct = false;  // loop: open the file with O_DIRECT
  uint64_t size = 0;  // 0: the target's own (file size, or 250 GiB)
  uint64_t zone_size = 256ull << 20;  // zoned=1
  UblkOptions opts;
};

using drvparam::ParamValue;

constexpr base::SizeRule kSizeRule = drvparam::byte_capacity(/*zero_ok=*/true);
// Zones of whole sectors, up to chunk_sectors' 32 bits.
constexpr base::SizeRule kZoneSizeRule{.lo = 4096, .hi = uint64_t{1} << 40, .multiple = kSectorSize};

// The queue count and the block size are checked further by
// validate_options() (against the CPU count; a power of two).
const drvparam::ParamDef<UblkParams> kParams[] = {
    {"target", "null", "built-in target: null (complete at once) or loop (a file via io_uring)",
     [](UblkParams& p, const ParamValue& v) {
       size_t i = 0;
       Status st = v.to_choice({"null", "loop"}, &i);
       if (st) p.target = std::string(v.value);
       return st;
     }},
    {"nr_hw_queues", "1", "hw queues, one server thread each (at most the CPU count)",
     [](UblkParams& p, const ParamValue& v) { return v.to_int(1u, 4096u, &p.opts.nr_hw_queues); }},
    {"queue_depth", "128", "driver tags per hw queue (1..4096)",
     [](UblkParams& p, const ParamValue& v) { return v.to_int(1u, 4096u, &p.opts.queue_depth); }},
    {"size", "0", "capacity; 0 = the file's size (loop) or 250 GiB (null)",
     [](UblkParams& p, const ParamValue& v) { return v.to_size(kSizeRule, &p.size); }, &kSizeRule},
    {"bs", "512", "logical block size: a power of two in 512..4096",
     [](UblkParams& p, const ParamValue& v) {
       return v.to_int(512u, 4096u, &p.opts.logical_block_size);
     }},
    {"filename", "", "backing file of target=loop",
     [](UblkParams& p, const ParamValue& v) {
       p.filename = std::string(v.value);
       return Status::OK();
     }},
    {"direct", "0",
     "1: target=loop opens its file with O_DIRECT (bypasses the page cache, as ublksrv's loop does by default; "
     "buffers and offsets must then be aligned to the file system's block)",
     [](UblkParams& p, const ParamValue& v) { return v.to_bool(&p.direct); }},
    {"pin", "0", "1: pin server thread N to CPU N",
     [](UblkParams& p, const ParamValue& v) { return v.to_bool(&p.opts.pin); }},
    {"zoned", "0", "1: target=null serves host-managed zones (a ublk zoned target, with null_blk's zone rules)",
     [](UblkParams& p, const ParamValue& v) { return v.to_bool(&p.opts.zoned); }},
    {"zone_size", "256m", "zone size with zoned=1, a power of two",
     [](UblkParams& p, const ParamValue& v) { return v.to_size(kZoneSizeRule, &p.zone_size); }, &kZoneSizeRule},
    {"zone_max_open", "0", "open zone limit with zoned=1 (0 = none)",
     [](UblkParams& p, const ParamValue& v) { return v.to_int(0u, 1u << 30, &p.opts.max_open_zones); }},
    {"zone_max_active", "0", "active zone limit with zoned=1 (0 = none)",
     [](UblkParams& p, const ParamValue& v) { return v.to_int(0u, 1u << 30, &p.opts.max_active_zones); }},
    {"zone_append_max_sectors", "2560", "largest native zone append in sectors with zoned=1; 0 = emulated by the core",
     [](UblkParams& p, const ParamValue& v) { return v.to_int(0u, 65535u, &p.opts.max_zone_append_sectors); }},
};

Result<std::unique_ptr<UblkTarget>> make_target(UblkParams& p) {
  if (p.target == "null") {
    if (!p.filename.empty()) return Status::invalid("ublk: parameter 'filename' is for target=loop only");
    if (p.direct) return Status::invalid("ublk: parameter 'direct' is for target=loop only");
    if (!p.size) p.size = kNullDefaultSize;
    p.opts.size = p.size;
    if (p.opts.zoned) {
      p.opts.zone_sectors = static_cast<uint32_t>(p.zone_size >> kSectorShift);
      return make_zoned_null_target(&p.opts);
    }
    return make_null_target();
  }
  if (p.opts.zoned) return Status::invalid("ublk: zoned=1 is for target=null only");
  if (p.filename.empty()) return Status::invalid("ublk: target=loop needs parameter 'filename'");
  uint64_t file_size = 0;
  auto t = make_loop_target(p.filename, p.direct, p.opts.nr_hw_queues, p.opts.queue_depth,
                            p.opts.logical_block_size, &file_size);
  if (!t) return t;
  if (p.size > file_size)
    return Status::invalid("ublk: size " + std::to_string(p.size) + " is larger than " + p.filename +
                           " (" + std::to_string(file_size) + " bytes in whole blocks)");
  p.opts.size = p.size ? p.size : file_size;
  // A file has a page cache: flushes must reach it (fdatasync); FUA writes
  // use RWF_DSYNC.
  p.opts.write_cache = true;
  p.opts.fua = true;
  p.opts.discard = true;
  return t;
}

Result<std::unique_ptr<Device>> create_from_params(const ParamMap& params) {
  UblkParams p;
  if (Status st = drvparam::parse_params(kDriverName, kParams, params, &p); !st) return st;
  if (Status st = validate_options([&] {
        UblkOptions o = p.opts;
        o.size = o.logical_block_size;  // the size is checked once the target set it
        o.zoned = false;                // and the zones once it made them
        return o;
      }());
      !st)
    return st;
  auto t = make_target(p);
  if (!t) return t.status();
  return create_ublk_device(std::move(*t), p.opts);
}

std::vector<ParamInfo> param_infos() { return drvparam::param_infos(kParams); }

}  // namespace
}  // namespace blkmq::ublkd

// The driver, listed by the table CMake generates from src/drivers' folders.
BLKMQ_BUILTIN(blkmq::DeviceDriver, driver, ublk, 0,
              {blkmq::ublkd::kDriverName, &blkmq::ublkd::create_from_params, blkmq::ublkd::param_infos()});
