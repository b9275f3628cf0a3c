// Verify blocks: every written block carries a small header (magic, offset,
// length, CRC-32C of the rest) followed by data derived from the offset and a
// seed, so a read-back check needs no state beyond the block itself and
// catches both corrupted data and blocks written to the wrong place.
#pragma once

#include <cstdint>
#include <string>

namespace bench {

constexpr uint32_t kVerifyMagic = 0x514d4b42;  // "BKMQ" little-endian
constexpr uint32_t kVerifyHeaderSize = 24;

// Fills buf (len bytes, >= 64) as the block at `offset` for `seed`.
void verify_fill(void* buf, uint32_t len, uint64_t offset, uint64_t seed);

// Checks a block read from `offset`. Returns true if good; else sets *why to
// a message naming the offset and what differed.
bool verify_check(const void* buf, uint32_t len, uint64_t offset, std::string* why);

}  // namespace bench
