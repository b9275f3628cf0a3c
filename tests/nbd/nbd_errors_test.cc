// nbd_error(): every BlkStatus has its NBD error, each one of the eight the
// spec defines, and ok alone is 0.
#include <gtest/gtest.h>

#include <cstddef>
#include <iterator>
#include <set>

#include "blkmq/status.h"
#include "nbd/errors.h"
#include "nbd/protocol.h"

namespace blkmq::nbd {
namespace {

struct Expected {
  BlkStatus status;
  uint32_t error;
};

// Every enumerator, in enum order (checked below), with the error the
// table in src/nbd/errors.cc gives it and shared/reference/nbd-protocol.md
// asks for where it says.
constexpr Expected kExpected[] = {
    {BlkStatus::ok, 0},
    {BlkStatus::notsupp, kErrNotSup},
    {BlkStatus::timeout, kErrIo},
    {BlkStatus::nospc, kErrNoSpc},
    {BlkStatus::ioerr, kErrIo},
    {BlkStatus::inval, kErrInval},
    {BlkStatus::again, kErrIo},
    {BlkStatus::resource, kErrNoMem},
    {BlkStatus::dev_resource, kErrIo},
    {BlkStatus::medium, kErrIo},
    {BlkStatus::transport, kErrIo},
    {BlkStatus::target, kErrIo},
    {BlkStatus::protection, kErrIo},
    {BlkStatus::offline, kErrIo},
    {BlkStatus::readonly, kErrPerm},
    {BlkStatus::zone_open_resource, kErrIo},
    {BlkStatus::zone_active_resource, kErrIo},
};

constexpr bool in_enum_order() {
  for (size_t i = 0; i < std::size(kExpected); i++)
    if (static_cast<size_t>(kExpected[i].status) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kExpected lists BlkStatus in enum order, none skipped");
// zone_active_resource is the last enumerator (include/blkmq/status.h); a status added
// after it must be added here, and errors.cc's switch refuses to compile
// without it.
static_assert(static_cast<size_t>(BlkStatus::zone_active_resource) + 1 == std::size(kExpected),
              "a BlkStatus is missing from kExpected");

TEST(NbdErrors, EveryStatusMapsToItsError) {
  for (const Expected& e : kExpected)
    EXPECT_EQ(nbd_error(e.status), e.error) << blk_status_name(e.status);
}

TEST(NbdErrors, OnlyOkIsZeroAndEveryErrorIsOneTheSpecDefines) {
  const std::set<uint32_t> spec = {kErrPerm,     kErrIo,       kErrNoMem,  kErrInval,
                                   kErrNoSpc,    kErrOverflow, kErrNotSup, kErrShutdown};
  for (const Expected& e : kExpected) {
    if (e.status == BlkStatus::ok) continue;
    const uint32_t err = nbd_error(e.status);
    EXPECT_NE(err, 0u) << blk_status_name(e.status) << " would read as success";
    EXPECT_TRUE(spec.count(err)) << blk_status_name(e.status) << " -> " << err;
  }
}

// The spec's own cases: write past the end (the device's nospc), read-only
// export, bad request.
TEST(NbdErrors, TheSpecsNamedCases) {
  EXPECT_EQ(nbd_error(BlkStatus::nospc), 28u);
  EXPECT_EQ(nbd_error(BlkStatus::readonly), 1u);
  EXPECT_EQ(nbd_error(BlkStatus::inval), 22u);
  EXPECT_EQ(nbd_error(BlkStatus::ioerr), 5u);
}

// A value outside the enum (a corrupted status) is an I/O error, not success.
TEST(NbdErrors, OutOfRangeValueIsAnIoError) {
  EXPECT_EQ(nbd_error(static_cast<BlkStatus>(200)), uint32_t{kErrIo});
}

}  // namespace
}  // namespace blkmq::nbd
