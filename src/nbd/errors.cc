// BlkStatus -> NBD error. The spec lists eight errors and says which one a
// server should send in a few cases (shared/reference/nbd-protocol.md); for
// the rest the closest one is chosen below, and EIO where none is close.
#include "nbd/errors.h"

#include "nbd/protocol.h"

namespace blkmq::nbd {

// A BlkStatus added without a case here is a compile error, not a silent EIO.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
uint32_t nbd_error(BlkStatus st) {
  switch (st) {
    case BlkStatus::ok: return 0;
    // The spec keeps ENOTSUP for a refused FAST_ZERO, which is where the
    // server itself sends it. From a device it means the same thing (the
    // backing store cannot do this operation, e.g. a file system without
    // hole punching), and clients act on it: qemu's block layer falls back
    // to writing zeros on ENOTSUP, where EIO would fail the guest's I/O.
    case BlkStatus::notsupp: return kErrNotSup;
    case BlkStatus::nospc: return kErrNoSpc;
    case BlkStatus::inval: return kErrInval;
    // The spec's answer to a write to a read-only export.
    case BlkStatus::readonly: return kErrPerm;
    // Only a driver that ended a request with its backing store's -ENOMEM
    // gets here (the core retries a resource returned by queue_rq itself).
    // The spec asks servers to avoid ENOMEM where they can; this server
    // could not, and the truth tells the client the failure is transient.
    // qemu-nbd sends ENOMEM for -ENOMEM too.
    case BlkStatus::resource: return kErrNoMem;
    // The rest have no NBD counterpart and are errors of the I/O itself.
    // dev_resource (-EBUSY): a busy device is not out of memory.
    case BlkStatus::dev_resource:
    // again (-EAGAIN): NBD has no "retry"; the server submits without
    // REQ_NOWAIT, so only a dying queue produces it.
    case BlkStatus::again:
    case BlkStatus::timeout:
    case BlkStatus::ioerr:
    case BlkStatus::medium:
    // transport (-ENOLINK): the device's own link (an RBD cluster), not
    // this NBD connection, which is still up to carry the reply.
    case BlkStatus::transport:
    case BlkStatus::target:
    case BlkStatus::protection:
    // offline (-ENODEV): not ESHUTDOWN, which announces that the server is
    // shutting down and will end the connection (the client is to send
    // NBD_CMD_DISC); a device that went away does neither.
    case BlkStatus::offline:
    // A zoned device's open or active zone limit: NBD exports no zones, so
    // for its client this is a failed write.
    case BlkStatus::zone_open_resource:
    case BlkStatus::zone_active_resource:
      return kErrIo;
  }
  return kErrIo;  // a value outside the enum: a corrupted status
}
#pragma GCC diagnostic pop

}  // namespace blkmq::nbd
