// The built-in targets behind create_device("ublk", {{"target", ...}}).
#pragma once

#include <memory>
#include <string>

#include "blkmq/status.h"
#include "blkmq/driver/ublk.h"

namespace blkmq::ublkd {

// "null": completes every I/O at once from the server thread, moving no data
// (ublksrv's null target).
std::unique_ptr<UblkTarget> make_null_target();
// "null" with zoned=1: host-managed zones of opts->zone_sectors over
// opts->size, with null_blk's rules and no data (a ublk zoned target:
// appends, zone management and reports). Applies null_blk's clamps of the
// open and active limits to *opts.
Result<std::unique_ptr<UblkTarget>> make_zoned_null_target(UblkOptions* opts);

// "loop": a file through io_uring (ublksrv's loop target). Each server
// thread owns a ring; reads and writes go out as readv/writev (FUA writes
// with RWF_DSYNC; a short one continues where it stopped, so a full file
// system ends a write with nospc), flush as fdatasync, discard as a hole
// punch and write_zeroes as ZERO_RANGE, which keeps the blocks allocated
// (notsupp where the file system has no ZERO_RANGE, e.g. tmpfs); a request
// completes when its last CQE arrives. Opens `filename`
// read-write, with O_DIRECT when `direct`; *size_bytes gets the file's size
// rounded down to `bs`.
Result<std::unique_ptr<UblkTarget>> make_loop_target(const std::string& filename, bool direct, unsigned nr_queues,
                                                     unsigned depth, uint32_t bs, uint64_t* size_bytes);

}  // namespace blkmq::ublkd
