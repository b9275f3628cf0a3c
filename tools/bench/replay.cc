#include "bench/replay.h"

#include <byteswap.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "trace/blktrace_format.h"

namespace bench {
namespace {

namespace bt = blkmq::blktrace;

void swap_record(bt::Record* r) {
  r->magic = bswap_32(r->magic);
  r->sequence = bswap_32(r->sequence);
  r->time = bswap_64(r->time);
  r->sector = bswap_64(r->sector);
  r->bytes = bswap_32(r->bytes);
  r->action = bswap_32(r->action);
  r->pid = bswap_32(r->pid);
  r->device = bswap_32(r->device);
  r->cpu = bswap_32(r->cpu);
  r->error = bswap_16(r->error);
  r->pdu_len = bswap_16(r->pdu_len);
}

bool is_magic(uint32_t m) { return (m & 0xffffff00u) == bt::kMagic && (m & 0xffu) == bt::kVersion; }

}  // namespace

blkmq::Result<ReplayTrace> load_blktrace(const std::string& path, const ReplayOptions& o) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return blkmq::Status::error(errno, "read_iolog: " + path + ": " + std::strerror(errno));
  ReplayTrace t;
  bool swapped = false, first = true, have_t0 = false, cut = false;
  uint64_t t0 = 0;
  for (bt::Record r; in.read(reinterpret_cast<char*>(&r), sizeof r);) {
    if (first) {
      swapped = !is_magic(r.magic) && is_magic(bswap_32(r.magic));
      first = false;
    }
    if (swapped) swap_record(&r);
    if (!is_magic(r.magic))
      return blkmq::Status::invalid("read_iolog: " + path + ": not a blktrace (version 7) file, or damaged");
    if (r.pdu_len && (!in.ignore(r.pdu_len) || in.gcount() != r.pdu_len)) {
      cut = true;
      break;
    }
    const uint32_t cats = r.action >> bt::kTcShift;
    if ((r.action & 0xffff) != (bt::kQueue & 0xffff) || (cats & bt::kTcNotify)) continue;
    if ((cats & (bt::kTcDiscard | bt::kTcFlush)) || r.bytes == 0) {
      t.skipped++;
      continue;
    }
    if (!have_t0) {
      t0 = r.time;
      have_t0 = true;
    }
    uint64_t off = (r.sector << 9) / (o.scale ? o.scale : 1);
    if (o.align) off &= ~(o.align - 1);
    const uint64_t gap = r.time >= t0 ? r.time - t0 : 0;
    t.ios.push_back({off, r.bytes, (cats & bt::kTcWrite) != 0, gap * o.time_scale / 100});
    if (r.bytes > t.max_len) t.max_len = r.bytes;
  }
  if (cut || in.gcount() > 0) return blkmq::Status::invalid("read_iolog: " + path + ": cut inside a record");
  if (first) return blkmq::Status::invalid("read_iolog: " + path + ": empty");
  if (t.ios.empty()) return blkmq::Status::invalid("read_iolog: " + path + ": no queued reads or writes to replay");
  return t;
}

}  // namespace bench
