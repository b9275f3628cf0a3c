// CRC-32C (Castagnoli), as used by fio's verify=crc32c and by iSCSI/ext4.
// Uses the SSE4.2 crc32 instruction when the CPU has it, else slicing-by-8
// tables. Any thread; no allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bench {

// Continues a CRC: pass 0 for a fresh one. crc32c("123456789") = 0xe3069283.
uint32_t crc32c(uint32_t crc, const void* data, size_t len);

// The portable table version, exposed so tests can compare both paths.
uint32_t crc32c_sw(uint32_t crc, const void* data, size_t len);
// True when crc32c() uses the CPU instruction.
bool crc32c_hw_available();

}  // namespace bench
