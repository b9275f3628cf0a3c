// create_device("ublk", params): parameter parsing, the built-in target
// choice, and registration as driver "ublk".
#include <charconv>
#include <string_view>

#include "blkmq/device.h"
#include "drivers/ublk/ublk.h"
#include "drivers/ublk/ublk_dev.h"
#include "drivers/ublk/ublk_targets.h"

namespace blkmq::ublkd {
namespace {

constexpr const char* kDriverName = "ublk";
// The null target's capacity when size is not given (null_blk's 250 GiB).
constexpr uint64_t kNullDefaultSize = 250ull << 30;

struct UblkParams {
  std::string target = "null";
  std::string filename;
  uint64_t size = 0;  // 0: the target's own (file size, or 250 GiB)
  UblkOptions opts;
};

Status bad_param(std::string_view name, std::string_view accepted, std::string_view value) {
  return Status::invalid("ublk: parameter '" + std::string(name) + "' must be " +
                         std::string(accepted) + "; got '" + std::string(value) + "'");
}

bool parse_u64(std::string_view v, uint64_t* out) {
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  return !v.empty() && ec == std::errc() && p == v.data() + v.size();
}

// Bytes with an optional binary suffix: 4096, 64k, 1M, 2g, 1t.
bool parse_size(std::string_view v, uint64_t* out) {
  unsigned shift = 0;
  if (!v.empty()) {
    switch (v.back()) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      default: break;
    }
  }
  if (shift) v.remove_suffix(1);
  uint64_t n = 0;
  if (!parse_u64(v, &n) || (shift && n > (UINT64_MAX >> shift))) return false;
  *out = n << shift;
  return true;
}

Status parse_uint(std::string_view name, std::string_view v, unsigned lo, unsigned hi, unsigned* out) {
  uint64_t n = 0;
  if (!parse_u64(v, &n) || n < lo || n > hi)
    return bad_param(name, "an integer in " + std::to_string(lo) + ".." + std::to_string(hi), v);
  *out = static_cast<unsigned>(n);
  return Status::ok();
}

Status apply_param(UblkParams& p, std::string_view n, std::string_view v) {
  UblkOptions& o = p.opts;
  if (n == "target") {
    if (v != "null" && v != "loop") return bad_param(n, "'null' or 'loop'", v);
    p.target = std::string(v);
  } else if (n == "filename") {
    p.filename = std::string(v);
  } else if (n == "nr_hw_queues") {
    return parse_uint(n, v, 1, 4096, &o.nr_hw_queues);
  } else if (n == "queue_depth") {
    return parse_uint(n, v, 1, 4096, &o.queue_depth);
  } else if (n == "bs") {
    return parse_uint(n, v, 512, 4096, &o.logical_block_size);
  } else if (n == "size") {
    if (!parse_size(v, &p.size)) return bad_param(n, "a byte count with an optional k/m/g/t suffix", v);
  } else if (n == "pin") {
    unsigned b = 0;
    if (!parse_uint(n, v, 0, 1, &b)) return bad_param(n, "0 or 1", v);
    o.pin = b;
  } else {
    return Status::invalid("ublk: unknown parameter '" + std::string(n) +
                           "' (known: target, nr_hw_queues, queue_depth, size, bs, filename, pin)");
  }
  return Status::ok();
}

Result<std::unique_ptr<UblkTarget>> make_target(UblkParams& p) {
  if (p.target == "null") {
    if (!p.filename.empty()) return Status::invalid("ublk: parameter 'filename' is for target=loop only");
    if (!p.size) p.size = kNullDefaultSize;
    p.opts.size = p.size;
    return make_null_target();
  }
  if (p.filename.empty()) return Status::invalid("ublk: target=loop needs parameter 'filename'");
  uint64_t file_size = 0;
  auto t = make_loop_target(p.filename, p.opts.nr_hw_queues, p.opts.queue_depth, p.opts.logical_block_size, &file_size);
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
  for (const auto& [name, value] : params) {
    if (name.starts_with("attr:")) continue;  // applied by the core
    if (Status st = apply_param(p, name, value); !st) return st;
  }
  if (Status st = validate_options([&] {
        UblkOptions o = p.opts;
        o.size = o.logical_block_size;  // the size is checked once the target set it
        return o;
      }());
      !st)
    return st;
  auto t = make_target(p);
  if (!t) return t.status();
  return create_ublk_device(std::move(*t), p.opts);
}

std::vector<ParamInfo> param_infos() {
  return {
      {"target", "null", "built-in target: null (complete at once) or loop (a file via io_uring)"},
      {"nr_hw_queues", "1", "hw queues, one server thread each (at most the CPU count)"},
      {"queue_depth", "128", "driver tags per hw queue (1..4096)"},
      {"size", "0", "capacity in bytes, k/m/g/t suffixes; 0 = the file's size (loop) or 250 GiB (null)"},
      {"bs", "512", "logical block size: a power of two in 512..4096"},
      {"filename", "", "backing file of target=loop"},
      {"pin", "0", "1: pin server thread N to CPU N"},
  };
}

}  // namespace
}  // namespace blkmq::ublkd

namespace blkmq {
namespace {

Result<std::unique_ptr<Device>> create_ublk_from_params(const ParamMap& params) {
  return ublkd::create_from_params(params);
}

bool register_ublk_driver() {
  // Function-local statics: safe whatever the order of static
  // initialization, and registered exactly once.
  static const DeviceDriver driver{ublkd::kDriverName, &create_ublk_from_params,
                                   ublkd::param_infos()};
  static const bool registered = (register_device_driver(&driver), true);
  return registered;
}

[[maybe_unused]] const bool kUblkRegistered = register_ublk_driver();

}  // namespace

void ublk_driver_link() { (void)register_ublk_driver(); }

}  // namespace blkmq
