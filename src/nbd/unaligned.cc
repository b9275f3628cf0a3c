#include "nbd/unaligned.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <semaphore>

namespace blkmq::nbd {
namespace {

struct Free {
  void operator()(char* p) const { std::free(p); }
};
using Buf = std::unique_ptr<char, Free>;

// Page-aligned, for O_DIRECT drivers (as the connection's own buffers).
Buf alloc(uint64_t n) { return Buf(static_cast<char*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))); }

// The whole blocks that cover the request.
struct Span {
  uint64_t start;
  uint64_t end;
  uint64_t size() const { return end - start; }
};
Span covering(const UnalignedOp& op) {
  const uint64_t mask = op.block - 1;
  return {op.offset & ~mask, (op.offset + op.length + mask) & ~mask};
}

struct Waiter {
  std::binary_semaphore done{0};
};
void wake(Bio* b) { static_cast<Waiter*>(b->private_data)->done.release(); }

// A data-less bio (discard, write-zeroes, flush), submitted and waited for.
BlkStatus nodata_sync(const UnalignedOp& op, ReqOp kind, uint64_t start, uint64_t len) {
  Waiter w;
  Bio b;
  b.op = kind;
  b.flags = kind == ReqOp::flush ? uint32_t{kBioPreflush} : 0u;
  b.sector = start >> kSectorShift;
  b.size = static_cast<uint32_t>(len);
  b.ioc = op.ioc;
  b.end_io = &wake;
  b.private_data = &w;
  op.q->submit_bio(&b);
  w.done.acquire();
  return b.status;
}

// Writes `len` bytes of `src` (or zeroes, with src null) at op-relative
// byte `at`..., by read-modify-write of the covering blocks of that piece.
BlkStatus rmw(const UnalignedOp& op, uint64_t off, uint32_t len, const char* src) {
  const Span s = covering(UnalignedOp{op.q, op.ioc, op.block, off, len, op.fua});
  Buf buf = alloc(s.size());
  if (!buf) return BlkStatus::resource;
  const uint32_t n = static_cast<uint32_t>(s.size());
  // Only the partial first and last blocks need their old contents.
  if (off != s.start)
    if (BlkStatus st = op.q->read_sync(buf.get(), s.start, op.block); st != BlkStatus::ok) return st;
  if (off + len != s.end && (s.end - op.block != s.start || off == s.start))
    if (BlkStatus st = op.q->read_sync(buf.get() + n - op.block, s.end - op.block, op.block); st != BlkStatus::ok)
      return st;
  if (src) std::memcpy(buf.get() + (off - s.start), src, len);
  else std::memset(buf.get() + (off - s.start), 0, len);
  return op.q->write_sync(buf.get(), s.start, n, op.fua ? uint32_t{kBioFua} : 0u);
}

}  // namespace

BlkStatus unaligned_read(const UnalignedOp& op, char* out) {
  const Span s = covering(op);
  Buf buf = alloc(s.size());
  if (!buf) return BlkStatus::resource;
  if (BlkStatus st = op.q->read_sync(buf.get(), s.start, static_cast<uint32_t>(s.size())); st != BlkStatus::ok)
    return st;
  std::memcpy(out, buf.get() + (op.offset - s.start), op.length);
  return BlkStatus::ok;
}

BlkStatus unaligned_write(const UnalignedOp& op, const char* data) { return rmw(op, op.offset, op.length, data); }

// The partial blocks at either end by RMW, the whole blocks between them
// with one write-zeroes (split by the core to the device's limit).
BlkStatus unaligned_zero(const UnalignedOp& op) {
  const uint64_t mask = op.block - 1;
  const uint64_t end = op.offset + op.length;
  const uint64_t mid_start = (op.offset + mask) & ~mask, mid_end = end & ~mask;
  if (mid_start >= mid_end)  // inside one or two blocks: no whole block between
    return rmw(op, op.offset, op.length, nullptr);
  if (op.offset != mid_start)
    if (BlkStatus st = rmw(op, op.offset, static_cast<uint32_t>(mid_start - op.offset), nullptr); st != BlkStatus::ok)
      return st;
  if (BlkStatus st = nodata_sync(op, ReqOp::write_zeroes, mid_start, mid_end - mid_start); st != BlkStatus::ok)
    return st;
  if (end != mid_end)
    if (BlkStatus st = rmw(op, mid_end, static_cast<uint32_t>(end - mid_end), nullptr); st != BlkStatus::ok) return st;
  return op.fua ? nodata_sync(op, ReqOp::flush, 0, 0) : BlkStatus::ok;
}

BlkStatus unaligned_trim(const UnalignedOp& op) {
  const uint64_t mask = op.block - 1;
  const uint64_t start = (op.offset + mask) & ~mask, end = (op.offset + op.length) & ~mask;
  if (start < end)
    if (BlkStatus st = nodata_sync(op, ReqOp::discard, start, end - start); st != BlkStatus::ok) return st;
  return op.fua ? nodata_sync(op, ReqOp::flush, 0, 0) : BlkStatus::ok;
}

}  // namespace blkmq::nbd
