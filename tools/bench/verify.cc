#include "bench/verify.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "bench/crc32c.h"
#include "bench/randmap.h"

namespace bench {
namespace {

struct VerifyHeader {
  uint32_t magic;
  uint32_t crc;       // CRC-32C of the block from `offset` to the end
  uint64_t offset;
  uint32_t len;
  uint32_t pad;
};
static_assert(sizeof(VerifyHeader) == kVerifyHeaderSize);

constexpr uint32_t kCrcStart = 8;  // the CRC covers everything after magic and crc

std::string fmt(const char* f, uint64_t a, uint64_t b, uint64_t c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

}  // namespace

void verify_fill(void* buf, uint32_t len, uint64_t offset, uint64_t seed) {
  auto* p = static_cast<uint8_t*>(buf);
  SplitMix64 rng(seed ^ (offset * 0x9e3779b97f4a7c15ull));
  for (uint32_t i = kVerifyHeaderSize; i + 8 <= len; i += 8) {
    uint64_t v = rng.next();
    std::memcpy(p + i, &v, 8);
  }
  for (uint32_t i = len & ~7u; i < len; ++i)
    if (i >= kVerifyHeaderSize) p[i] = static_cast<uint8_t>(i);
  VerifyHeader h{kVerifyMagic, 0, offset, len, 0};
  std::memcpy(p, &h, sizeof h);
  h.crc = crc32c(0, p + kCrcStart, len - kCrcStart);
  std::memcpy(p, &h, sizeof h);
}

bool verify_check(const void* buf, uint32_t len, uint64_t offset, std::string* why) {
  const auto* p = static_cast<const uint8_t*>(buf);
  VerifyHeader h;
  std::memcpy(&h, p, sizeof h);
  if (h.magic != kVerifyMagic) {
    *why = fmt("verify: bad magic at offset %" PRIu64 " (got 0x%" PRIx64 ", want 0x%" PRIx64 ")", offset,
               h.magic, kVerifyMagic);
    return false;
  }
  if (h.offset != offset || h.len != len) {
    *why = fmt("verify: block at offset %" PRIu64 " claims offset %" PRIu64 " length %" PRIu64, offset,
               h.offset, h.len);
    return false;
  }
  uint32_t crc = crc32c(0, p + kCrcStart, len - kCrcStart);
  if (crc != h.crc) {
    *why = fmt("verify: crc32c mismatch at offset %" PRIu64 " (expected 0x%08" PRIx64 ", got 0x%08" PRIx64 ")",
               offset, h.crc, crc);
    return false;
  }
  return true;
}

}  // namespace bench
