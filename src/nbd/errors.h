// The NBD error a reply carries for a block status: one table for every
// BlkStatus, so a new status cannot reach the wire unmapped.
#pragma once

#include <cstdint>

#include "blkmq/status.h"

namespace blkmq::nbd {

// The NBD error value (protocol.h's Err: EPERM, EIO, ENOMEM, EINVAL, ENOSPC,
// EOVERFLOW, ENOTSUP, ESHUTDOWN) for the status a request's bio ended with;
// 0 for BlkStatus::ok, never 0 otherwise. Statuses the spec has no error
// for become EIO, its generic one. Any thread, any context; a switch, no
// allocation. The connection calls it for every failed READ, WRITE, FLUSH,
// TRIM and WRITE_ZEROES; errors found before a bio is built (bad range,
// flags, read-only export) are chosen by the codec (protocol.h) instead.
uint32_t nbd_error(BlkStatus st);

}  // namespace blkmq::nbd
