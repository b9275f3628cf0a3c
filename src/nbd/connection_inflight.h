// Connection::InFlight, the state of one request from its header to its
// reply: shared by connection.cc (reading and submitting) and
// connection_replies.cc (sending). Private to the NBD layer.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>

#include "blkmq/bio.h"
#include "nbd/buffer_pool.h"
#include "nbd/connection.h"
#include "nbd/protocol.h"

namespace blkmq::nbd {

// One request from header to reply. Owned by the connection from the
// header's arrival until its reply is sent.
struct Connection::InFlight {
  Connection* c = nullptr;
  Request req;
  Bio bio;
  iovec iov{};
  std::unique_ptr<char, PooledBuf> buf;  // READ: filled by the device; WRITE: the payload
  std::string reply;            // a reply built before queueing (BLOCK_STATUS); sent as is
  uint64_t bytes = 0;           // buffer bytes counted against ConnLimits
  uint32_t have = 0;            // WRITE: payload bytes received so far
  uint32_t error = 0;           // NBD error of the reply
  // TRIM or WRITE_ZEROES with FUA: the device's FUA covers writes only (the
  // core refuses it on other ops, as the kernel does), so the reply waits
  // for a FLUSH after the op. `flush_next`: the op completed well and the
  // FLUSH is still to be submitted (by whoever sends replies next).
  bool flush_after = false;
  bool flush_next = false;
  bool counted = false;         // in inflight_ / inflight_bytes_
  bool gated = false;           // a write let in by the WriteGate, not yet out
  bool unaligned = false;       // served by unaligned.h, not by one bio
};

}  // namespace blkmq::nbd
