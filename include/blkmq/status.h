// Status types: BlkStatus for the I/O path, Status and Result<T> for the
// control path (configuration, attributes, setup). The I/O path never throws.
#pragma once

#include <cassert>
#include <cerrno>
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
// Left out: the kernel's reservation-conflict, duration-limit and
// device-mapper statuses (no reservations or CDL here).
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
  // Zoned devices: opening one more zone would exceed the device's open
  // (-ETOOMANYREFS) or active (-EOVERFLOW) zone limit.
  zone_open_resource,
  zone_active_resource,
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

// Result of a control-path operation: OK, or a positive errno (EINVAL,
// ENOMEM, ...) with a human-readable message that says what was wrong and
// what is accepted. LevelDB's spelling: the factory Status::OK() makes a
// success, the predicate ok() tests one. [[nodiscard]]: a Status returned
// and dropped is a compile warning, so no error goes unseen. Cheap to copy
// when OK (an int and an empty string); any context.
class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status OK() { return Status(); }
  // code: a positive errno from <cerrno>; 0 is not an error, so it becomes
  // EINVAL with the message kept (an error must say it is one).
  static Status error(int code, std::string msg) { return Status(code != 0 ? code : EINVAL, std::move(msg)); }
  static Status invalid(std::string msg) { return Status(EINVAL, std::move(msg)); }

  bool ok() const { return code_ == 0; }
  explicit operator bool() const { return ok(); }
  int code() const { return code_; }  // 0 when ok()
  const std::string& message() const { return msg_; }

 private:
  Status(int code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  int code_ = 0;
  std::string msg_;
};

// A value or an error Status. [[nodiscard]], as Status. Built from a T
// (success) or from an error Status; an OK Status has no value to carry,
// so Result(Status::OK()) is refused: it becomes an EINVAL error saying
// so (and asserts in debug builds), never a Result that claims a value.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(refuse_ok(std::move(s))) {}  // NOLINT: an error
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  // The value; only when ok().
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  // The error; only when !ok().
  const Status& status() const { return std::get<1>(v_); }

 private:
  static Status refuse_ok(Status s) {
    assert(!s.ok() && "Result built from an OK Status");
    if (s.ok()) return Status::invalid("internal error: a Result was built from an OK status, without a value");
    return s;
  }
  std::variant<T, Status> v_;
};

}  // namespace blkmq
