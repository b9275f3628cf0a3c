// The status <-> errno table against the kernel's blk_errors, both ways.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include "blkmq/status.h"

namespace blkmq {
namespace {

struct KernelRow {
  BlkStatus status;
  int err;
};
// block/blk-core.c, blk_errors[] (the statuses blkmq has).
constexpr KernelRow kKernel[] = {
    {BlkStatus::ok, 0},
    {BlkStatus::notsupp, -EOPNOTSUPP},
    {BlkStatus::timeout, -ETIMEDOUT},
    {BlkStatus::nospc, -ENOSPC},
    {BlkStatus::transport, -ENOLINK},
    {BlkStatus::target, -EREMOTEIO},
    {BlkStatus::medium, -ENODATA},
    {BlkStatus::protection, -EILSEQ},
    {BlkStatus::resource, -ENOMEM},
    {BlkStatus::dev_resource, -EBUSY},
    {BlkStatus::again, -EAGAIN},
    {BlkStatus::offline, -ENODEV},
    {BlkStatus::inval, -EINVAL},
    {BlkStatus::ioerr, -EIO},
};

TEST(StatusTable, EveryStatusHasTheKernelsErrno) {
  for (const KernelRow& k : kKernel)
    EXPECT_EQ(blk_status_to_errno(k.status), k.err) << blk_status_name(k.status);
}

TEST(StatusTable, EveryErrnoMapsBackToItsStatusEitherSign) {
  for (const KernelRow& k : kKernel) {
    EXPECT_EQ(errno_to_blk_status(k.err), k.status) << blk_status_name(k.status);
    EXPECT_EQ(errno_to_blk_status(-k.err), k.status) << blk_status_name(k.status);
  }
}

// blkmq's own status: the kernel has none for a read-only device.
TEST(StatusTable, ReadOnlyIsErofs) {
  EXPECT_EQ(blk_status_to_errno(BlkStatus::readonly), -EROFS);
  EXPECT_EQ(errno_to_blk_status(-EROFS), BlkStatus::readonly);
}

TEST(StatusTable, UnknownErrnoIsAnIoError) {
  for (int e : {EPERM, ENOENT, EXDEV, 4095})
    EXPECT_EQ(errno_to_blk_status(-e), BlkStatus::ioerr) << std::strerror(e);
}

TEST(StatusTable, NamesAreDistinctAndStatusesRoundTrip) {
  std::set<std::string> names;
  for (int v = 0; v <= static_cast<int>(BlkStatus::zone_active_resource); v++) {
    const auto s = static_cast<BlkStatus>(v);
    EXPECT_TRUE(names.insert(blk_status_name(s)).second) << blk_status_name(s);
    EXPECT_EQ(errno_to_blk_status(blk_status_to_errno(s)), s) << blk_status_name(s);
    EXPECT_EQ(std::string(blk_status_description(s)).empty(), s == BlkStatus::ok);
  }
}

// LevelDB's spelling: Status::OK() makes a success and ok() tests one. The
// factory was once spelled ok(), so `st.ok()` on an error compiled and was
// always true (issue 27).
TEST(StatusApi, OkIsThePredicateAndOKTheFactory) {
  const Status good = Status::OK();
  const Status bad = Status::error(ENOSPC, "full");
  EXPECT_TRUE(good.ok());
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), ENOSPC);
  EXPECT_EQ(bad.message(), "full");
  EXPECT_FALSE(Status::error(0, "no code").ok()) << "an error is never OK, whatever its code";
}

#ifdef NDEBUG
// A Result cannot be built from an OK Status: it has no value to carry. In
// release builds it becomes an error that says so (debug builds assert).
TEST(StatusApi, ResultRefusesAnOkStatus) {
  Result<int> r(Status::OK());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EINVAL);
  EXPECT_NE(r.status().message().find("OK status"), std::string::npos) << r.status().message();
}
#else
TEST(StatusApiDeathTest, ResultRefusesAnOkStatus) {
  EXPECT_DEATH({ Result<int> r(Status::OK()); (void)r; }, "Result built from an OK Status");
}
#endif

}  // namespace
}  // namespace blkmq
