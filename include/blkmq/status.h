// Status types: BlkStatus for the I/O path, Status and Result<T> for the
// control path (configuration, attributes, setup). The I/O path never throws.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace blkmq {

// Completion status of a bio or request; the analogue of blk_status_t,
// with the kernel's errno for each (blk_errors in block/blk-core.c).
// `resource` and `dev_resource` returned by a driver's queue_rq are retried
// by the core (resource: after a 3 ms delayed rerun or when a request frees;
// dev_resource: when the driver restarts the queue or a request completes)
// and never reach a bio's end_io from there; a request a driver completes
// with one of them (a backing file's -ENOMEM or -EBUSY mapped by
// errno_to_blk_status) ends its bios with that error, as in the kernel.
// Left out: the kernel's reservation-conflict, zone-resource, duration-limit
// and device-mapper statuses (no reservations, zoned devices or CDL here).
// Added: `readonly`, which the kernel has no status for (see below).
enum class BlkStatus : uint8_t {
  ok = 0,
  notsupp,       // operation not supported by the device (-EOPNOTSUPP)
  timeout,       // request timed out (-ETIMEDOUT)
  nospc,         // device or backing store full (-ENOSPC)
  ioerr,         // generic I/O error (-EIO); what an unknown errno maps to
  inval,         // bad request: out of range, misaligned (-EINVAL)
  again,         // a nowait submission would have blocked (-EAGAIN)
  resource,      // driver: out of a shared resource, retry later (-ENOMEM)
  dev_resource,  // driver: device busy, retry when it restarts the queue (-EBUSY)
  medium,        // media error (-ENODATA)
  transport,     // recoverable transport error, e.g. a lost connection (-ENOLINK)
  target,        // critical target error (-EREMOTEIO)
  protection,    // integrity (protection information) check failed (-EILSEQ)
  offline,       // device offline or gone (-ENODEV)
  readonly,      // a write, discard or zeroing to a read-only device (-EROFS);
                 // blkmq's own: the kernel only warns, for old lvm tools
};

// Short lower-case name ("ok", "ioerr", ...). Any context; no allocation.
const char* blk_status_name(BlkStatus s);
// The kernel's description ("critical medium", ...), for messages. Any context.
const char* blk_status_description(BlkStatus s);
// Negative errno for a status (0 for ok), as the kernel's
// blk_status_to_errno. Any context.
int blk_status_to_errno(BlkStatus s);
// Status for a negative (or positive) errno, as errno_to_blk_status: the
// status whose errno it is; unknown values map to ioerr. Any context.
BlkStatus errno_to_blk_status(int err);

// Result of a control-path operation: ok, or an errno-style code plus a
// human-readable message that says what was wrong and what is accepted.
class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(int code, std::string msg) { return Status(code, std::move(msg)); }
  static Status invalid(std::string msg) { return Status(22 /*EINVAL*/, std::move(msg)); }

  bool is_ok() const { return code_ == 0; }
  explicit operator bool() const { return is_ok(); }
  int code() const { return code_; }
  const std::string& message() const { return msg_; }

 private:
  Status(int code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  int code_ = 0;
  std::string msg_;
};

// A value or an error Status.
template <typename T>
class Result {
 public:
  Result(T v) : v_(std::move(v)) {}            // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) {}       // NOLINT: must be an error
  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const Status& status() const { return std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace blkmq
