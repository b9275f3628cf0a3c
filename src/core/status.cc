// The status table: each BlkStatus with its name, its errno and the
// kernel's description (blk_errors in block/blk-core.c), so that the two
// directions of the mapping cannot disagree.
#include <cerrno>
#include <iterator>

#include "blkmq/status.h"

namespace blkmq {
namespace {

struct StatusRow {
  BlkStatus status;
  const char* name;
  int err;  // negative errno, 0 for ok
  const char* description;
};

// In enum order: row i describes the status of value i.
constexpr StatusRow kRows[] = {
    {BlkStatus::ok, "ok", 0, ""},
    {BlkStatus::notsupp, "notsupp", -EOPNOTSUPP, "operation not supported"},
    {BlkStatus::timeout, "timeout", -ETIMEDOUT, "timeout"},
    {BlkStatus::nospc, "nospc", -ENOSPC, "critical space allocation"},
    {BlkStatus::ioerr, "ioerr", -EIO, "I/O"},
    {BlkStatus::inval, "inval", -EINVAL, "invalid"},
    {BlkStatus::again, "again", -EAGAIN, "nonblocking retry"},
    {BlkStatus::resource, "resource", -ENOMEM, "kernel resource"},
    {BlkStatus::dev_resource, "dev_resource", -EBUSY, "device resource"},
    {BlkStatus::medium, "medium", -ENODATA, "critical medium"},
    {BlkStatus::transport, "transport", -ENOLINK, "recoverable transport"},
    {BlkStatus::target, "target", -EREMOTEIO, "critical target"},
    {BlkStatus::protection, "protection", -EILSEQ, "protection"},
    {BlkStatus::offline, "offline", -ENODEV, "device offline"},
    {BlkStatus::readonly, "readonly", -EROFS, "read-only device"},
    {BlkStatus::zone_open_resource, "zone_open_resource", -ETOOMANYREFS, "open zones exceeded"},
    {BlkStatus::zone_active_resource, "zone_active_resource", -EOVERFLOW, "active zones exceeded"},
};

constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < std::size(kRows); i++)
    if (static_cast<size_t>(kRows[i].status) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "kRows must list every BlkStatus in enum order");
static_assert(static_cast<size_t>(BlkStatus::zone_active_resource) + 1 == std::size(kRows), "a BlkStatus has no row");

const StatusRow& row(BlkStatus s) {
  const auto i = static_cast<size_t>(s);
  return i < std::size(kRows) ? kRows[i] : kRows[static_cast<size_t>(BlkStatus::ioerr)];
}

}  // namespace

const char* blk_status_name(BlkStatus s) { return row(s).name; }
const char* blk_status_description(BlkStatus s) { return row(s).description; }
int blk_status_to_errno(BlkStatus s) { return row(s).err; }

BlkStatus errno_to_blk_status(int err) {
  if (err > 0) err = -err;
  for (const StatusRow& r : kRows)
    if (r.err == err) return r.status;
  return BlkStatus::ioerr;
}

}  // namespace blkmq
