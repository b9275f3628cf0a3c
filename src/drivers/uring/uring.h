// The io_uring file/block-device driver ("uring"). Everything a user needs
// goes through blkmq::create_device("uring", params); this header only
// exists so that a static link keeps the driver (see builtin.cc).
#pragma once

namespace blkmq {

// Makes sure the "uring" driver is registered. Idempotent and thread-safe;
// registers the first time only (same contract as null_driver_link()).
void uring_driver_link();

}  // namespace blkmq
