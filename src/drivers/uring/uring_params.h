// The uring driver's parameters, parsed and validated from create_device()'s
// string map.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/status.h"

namespace blkmq::uring {

struct UringParams {
  std::string filename;          // required: a regular file or a block device
  uint64_t size = 0;             // bytes; 0 = not given (use the file's size)
  bool direct = false;           // O_DIRECT
  unsigned bs = 512;             // logical block size: power of two, 512..4096
  unsigned submit_queues = 1;    // default-type hw queues, one ring each
  unsigned poll_queues = 0;      // poll-type hw queues, reaped by Queue::poll
  unsigned hw_queue_depth = 128; // driver tags per hw queue = ring entries (loop's default)
  bool sqpoll = false;           // IORING_SETUP_SQPOLL: a kernel thread submits
  bool fixed_files = true;       // register the fd with each ring
  bool nonvectored = true;       // one-segment reads and writes as IORING_OP_READ/WRITE (fio's default)
  unsigned max_sectors = 2560;   // max request size in 512 B sectors
  bool waiter_reaps = true;       // Queue::wait sleeps in the ring and reaps (see uring_wait.cc)
  unsigned force_async = 0;      // every Nth SQE gets IOSQE_ASYNC (fio's force_async); 0 = none
};

// Parses and validates `params`. Unknown names, malformed values and values
// out of range are refused with a message naming the parameter; entries
// named "attr:..." belong to the core and are skipped. A missing filename is
// an error. Sizes are bytes when bare, with base::parse_size's suffixes.
Result<UringParams> parse_uring_params(const ParamMap& params);

// One ParamInfo per parameter, in a stable order.
std::vector<ParamInfo> uring_param_infos();

}  // namespace blkmq::uring
