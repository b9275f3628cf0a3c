// Byte-granular NBD requests on a device with larger logical blocks. The
// spec asks a server to accept a minimum block size of 1 from clients that
// did not negotiate block sizes (EXPORT_NAME, or GO without
// NBD_INFO_BLOCK_SIZE), as nbdkit and qemu-nbd do. A request whose offset
// or length is not a multiple of the device's logical block size is served
// here, synchronously on the connection's reader: READ reads the covering
// blocks and keeps the slice; WRITE reads the partial first and last
// blocks, patches them and writes the whole span back (the caller orders
// it against other writes with a WriteGate); WRITE_ZEROES zeroes the
// partial blocks that way and the aligned middle with a write-zeroes bio;
// TRIM, advisory in the spec, discards only the whole blocks inside.
// Nothing is ever truncated.
#pragma once

#include <cstdint>

#include "blkmq/bio.h"
#include "blkmq/queue.h"

namespace blkmq::nbd {

struct UnalignedOp {
  Queue* q = nullptr;
  IoContext* ioc = nullptr;  // the connection's (bfq's weight)
  uint32_t block = 512;      // the device's logical block size (a power of two)
  uint64_t offset = 0;
  uint32_t length = 0;
  bool fua = false;          // durable before the reply (a FLUSH after TRIM/WRITE_ZEROES)
};

// True when [offset, offset+length) does not fall on whole blocks.
inline bool is_unaligned(uint64_t offset, uint32_t length, uint32_t block) {
  return ((offset | length) & (block - 1)) != 0;
}

// Each returns the block status of the request. Reader thread; sleeps.
// read: fills out[0..length). write: writes data[0..length).
BlkStatus unaligned_read(const UnalignedOp& op, char* out);
BlkStatus unaligned_write(const UnalignedOp& op, const char* data);
BlkStatus unaligned_zero(const UnalignedOp& op);
BlkStatus unaligned_trim(const UnalignedOp& op);

}  // namespace blkmq::nbd
