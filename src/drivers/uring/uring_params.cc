#include "drivers/uring/uring_params.h"

#include <charconv>
#include <string_view>

#include "blkmq/tagset.h"

namespace blkmq::uring {
namespace {

Status range_error(std::string_view name, std::string_view accepted, std::string_view value) {
  return Status::invalid("uring: parameter '" + std::string(name) + "' must be " +
                         std::string(accepted) + "; got '" + std::string(value) + "'");
}

Status parse_uint(std::string_view name, std::string_view value, unsigned lo, unsigned hi,
                  unsigned* out) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || p != value.data() + value.size() || v < lo || v > hi) {
    return range_error(name, "an integer in " + std::to_string(lo) + ".." + std::to_string(hi),
                       value);
  }
  *out = v;
  return Status::ok();
}

Status parse_bool(std::string_view name, std::string_view value, bool* out) {
  if (value == "1" || value == "y" || value == "Y" || value == "true") {
    *out = true;
  } else if (value == "0" || value == "n" || value == "N" || value == "false") {
    *out = false;
  } else {
    return range_error(name, "0 or 1 (also y/n, true/false)", value);
  }
  return Status::ok();
}

using Apply = Status (*)(UringParams& p, std::string_view name, std::string_view v);

struct ParamDef {
  const char* name;
  const char* default_value;
  const char* help;
  Apply apply;
};

constexpr unsigned kMaxQueues = 1024;
constexpr unsigned kMaxSectorsLimit = 65535;

const ParamDef kParams[] = {
    {"filename", "", "file or block device to serve (required); a missing regular file is created with 'size'",
     [](UringParams& p, std::string_view n, std::string_view v) {
       if (v.empty()) return range_error(n, "a path", v);
       p.filename = std::string(v);
       return Status::ok();
     }},
    {"size", "0",
     "capacity in bytes (k/m/g/t suffixes); 0 = the file's size. A missing file is created this "
     "big, a smaller file is extended; a larger file is used up to this size only",
     [](UringParams& p, std::string_view n, std::string_view v) {
       if (!parse_size_bytes(v, &p.size)) return range_error(n, "a byte count like 4096, 64m or 2g", v);
       return Status::ok();
     }},
    {"direct", "0", "open with O_DIRECT (bypass the page cache)",
     [](UringParams& p, std::string_view n, std::string_view v) { return parse_bool(n, v, &p.direct); }},
    {"bs", "512", "logical block size in bytes: 512, 1024, 2048 or 4096",
     [](UringParams& p, std::string_view n, std::string_view v) {
       unsigned bs = 0;
       if (!parse_uint(n, v, 512u, 4096u, &bs) || (bs & (bs - 1))) {
         return range_error(n, "a power of two in 512..4096", v);
       }
       p.bs = bs;
       return Status::ok();
     }},
    {"submit_queues", "1", "default-type hw queues, one io_uring and reaper thread each",
     [](UringParams& p, std::string_view n, std::string_view v) {
       return parse_uint(n, v, 1u, kMaxQueues, &p.submit_queues);
     }},
    {"poll_queues", "0", "poll-type hw queues: completions are reaped by Queue::poll, no reaper thread",
     [](UringParams& p, std::string_view n, std::string_view v) {
       return parse_uint(n, v, 0u, kMaxQueues, &p.poll_queues);
     }},
    {"hw_queue_depth", "64", "driver tags per hw queue (= ring entries)",
     [](UringParams& p, std::string_view n, std::string_view v) {
       return parse_uint(n, v, 1u, 4096u, &p.hw_queue_depth);
     }},
    {"sqpoll", "0", "IORING_SETUP_SQPOLL: a kernel thread per ring picks up submissions",
     [](UringParams& p, std::string_view n, std::string_view v) { return parse_bool(n, v, &p.sqpoll); }},
    {"fixed_files", "1", "register the file with each ring (IOSQE_FIXED_FILE)",
     [](UringParams& p, std::string_view n, std::string_view v) {
       return parse_bool(n, v, &p.fixed_files);
     }},
    {"max_sectors", "2560", "maximum request size in 512-byte sectors (at least one block)",
     [](UringParams& p, std::string_view n, std::string_view v) {
       return parse_uint(n, v, 1u, kMaxSectorsLimit, &p.max_sectors);
     }},
};

}  // namespace

bool parse_size_bytes(std::string_view s, uint64_t* out) {
  size_t i = 0;
  uint64_t x = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (x > (UINT64_MAX - d) / 10) return false;
    x = x * 10 + d;
    i++;
  }
  if (i == 0) return false;
  unsigned shift = 0;
  if (i < s.size()) {
    if (i + 1 != s.size()) return false;
    switch (s[i] | 0x20) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      default: return false;
    }
  }
  if (shift && x > (UINT64_MAX >> shift)) return false;
  *out = x << shift;
  return true;
}

Result<UringParams> parse_uring_params(const ParamMap& params) {
  UringParams p;
  for (const auto& [name, value] : params) {
    if (name.starts_with("attr:")) continue;
    const ParamDef* def = nullptr;
    for (const ParamDef& d : kParams) {
      if (name == d.name) def = &d;
    }
    if (!def) {
      std::string known;
      for (const ParamDef& d : kParams) known += std::string(known.empty() ? "" : ", ") + d.name;
      return Status::invalid("uring: unknown parameter '" + name + "' (known: " + known + ")");
    }
    if (Status st = def->apply(p, name, value); !st) return st;
  }
  if (p.filename.empty()) {
    return Status::invalid("uring: parameter 'filename' is required (a regular file or a block device)");
  }
  const unsigned min_sectors = p.bs >> kSectorShift;
  if (p.max_sectors < min_sectors) {
    return Status::invalid("uring: parameter 'max_sectors' must be at least one block (" +
                           std::to_string(min_sectors) + " sectors with bs=" + std::to_string(p.bs) +
                           "); got '" + std::to_string(p.max_sectors) + "'");
  }
  p.max_sectors -= p.max_sectors % min_sectors;
  return p;
}

std::vector<ParamInfo> uring_param_infos() {
  std::vector<ParamInfo> v;
  for (const ParamDef& d : kParams) v.push_back({d.name, d.default_value, d.help});
  return v;
}

}  // namespace blkmq::uring
