// Device::allocation: the null driver's page store and memory-backed
// device (never written or discarded pages are holes) and the uring driver
// on a sparse file (lseek SEEK_DATA/SEEK_HOLE), in whole device blocks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "blkmq/blkmq.h"
#include "support/device_test_util.h"
#include "drivers/null/null_store.h"

namespace blkmq {
namespace {

constexpr uint32_t kHZ = kExtentHole | kExtentZero;

std::vector<std::pair<uint64_t, uint32_t>> flat(const Result<std::vector<Extent>>& r) {
  std::vector<std::pair<uint64_t, uint32_t>> v;
  EXPECT_TRUE(r.ok()) << (r ? "" : r.status().message());
  if (r) {
    for (const Extent& e : r.value()) v.emplace_back(e.length, e.flags);
  }
  return v;
}
using Map = std::vector<std::pair<uint64_t, uint32_t>>;

// Runs one bio to completion.
BlkStatus run_io(Device& d, ReqOp op, uint64_t off, uint32_t len, unsigned seed = 1) {
  devtest::Waiter w;
  devtest::IoSlot s;
  s.prep(op, off, len, &w);
  if (op == ReqOp::write) s.buf = devtest::pattern(len, seed), s.iov = {s.buf.data(), len};
  d.queue().submit_bio(&s.bio);
  EXPECT_TRUE(w.wait(1));
  return s.bio.status;
}

TEST(NullStoreAllocation, UnwrittenAndDiscardedPagesAreHoles) {
  nullb::PageStore s(1 << 20, 0);
  EXPECT_EQ(flat(s.allocation(0, 1 << 20, 4096, 100)), (Map{{1 << 20, kHZ}}));
  std::vector<unsigned char> data(100, 7);
  ASSERT_EQ(s.write(8192 + 10, data.data(), data.size(), false), BlkStatus::ok);  // inside page 2
  ASSERT_EQ(s.write(5 * 4096, data.data(), data.size(), false), BlkStatus::ok);   // page 5
  EXPECT_EQ(flat(s.allocation(0, 1 << 20, 4096, 100)),
            (Map{{8192, kHZ}, {4096, 0}, {8192, kHZ}, {4096, 0}, {(1 << 20) - 6 * 4096, kHZ}}));
  // The limit cuts the map to a prefix; a range inside a page takes its answer.
  EXPECT_EQ(flat(s.allocation(0, 1 << 20, 4096, 2)), (Map{{8192, kHZ}, {4096, 0}}));
  EXPECT_EQ(flat(s.allocation(8192 + 512, 1024, 4096, 100)), (Map{{1024, 0}}));
  // Units of 16 KiB: any stored page makes its unit data.
  EXPECT_EQ(flat(s.allocation(0, 1 << 20, 16384, 100)), (Map{{32768, 0}, {(1 << 20) - 32768, kHZ}}));
  ASSERT_EQ(s.discard(8192, 4096), BlkStatus::ok);
  EXPECT_EQ(flat(s.allocation(0, 8 * 4096, 4096, 100)), (Map{{5 * 4096, kHZ}, {4096, 0}, {8192, kHZ}}));
  EXPECT_FALSE(s.allocation(4096, 1 << 20, 4096, 100).ok());
}

TEST(NullStoreAllocation, CachedPagesAreData) {
  nullb::PageStore s(1 << 20, 64 << 10);
  std::vector<unsigned char> data(4096, 1);
  ASSERT_EQ(s.write(4096, data.data(), data.size(), false), BlkStatus::ok);
  ASSERT_EQ(s.cached_pages(), 1u);
  EXPECT_EQ(flat(s.allocation(0, 3 * 4096, 4096, 10)), (Map{{4096, kHZ}, {4096, 0}, {4096, kHZ}}));
}

TEST(NullDeviceAllocation, MemoryBackedReportsItsMapOthersDoNot) {
  auto plain = devtest::make_device("null", {{"size", "1"}});
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->reports_allocation());
  EXPECT_EQ(plain->allocation(0, 4096, 8).status().code(), EOPNOTSUPP);
  EXPECT_FALSE(plain->write_zeroes_is_cheap());

  auto d = devtest::make_device("null", {{"memory_backed", "1"}, {"size", "1"}, {"discard", "1"}});
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->reports_allocation());
  ASSERT_EQ(run_io(*d, ReqOp::write, 64 << 10, 8192), BlkStatus::ok);
  EXPECT_EQ(flat(d->allocation(0, 1 << 20, 64)), (Map{{64 << 10, kHZ}, {8192, 0}, {(1 << 20) - (72 << 10), kHZ}}));
  ASSERT_EQ(run_io(*d, ReqOp::discard, 64 << 10, 4096), BlkStatus::ok);
  EXPECT_EQ(flat(d->allocation(60 << 10, 12 << 10, 64)), (Map{{8192, kHZ}, {4096, 0}}));
  EXPECT_EQ(d->allocation(100, 512, 8).status().code(), EINVAL);      // not block aligned
  EXPECT_EQ(d->allocation(0, 2 << 20, 8).status().code(), EINVAL);    // past the end
}

// A sparse file: blocks written with pwrite behind the device's back (the
// map is the file's), then through the device.
TEST(UringDeviceAllocation, SparseFileHolesAndData) {
  devtest::TempDir dir("blkmq-alloc");
  const std::string f = dir.file("sparse");
  const int fd = open(f.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4 << 20), 0);
  std::vector<char> block(4096, 'x');
  ASSERT_EQ(pwrite(fd, block.data(), block.size(), 1 << 20), 4096);
  close(fd);
  auto d = devtest::make_device("uring", {{"filename", f}});
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->reports_allocation());
  const auto m = flat(d->allocation(0, 4 << 20, 64));
  // The file system may allocate more around the block; the block itself is
  // data, the file's start and end are holes.
  ASSERT_GE(m.size(), 3u);
  EXPECT_EQ(m.front().second, kHZ);
  EXPECT_EQ(m.back().second, kHZ);
  uint64_t pos = 0, sum = 0;
  for (auto& [len, flags] : m) {
    if (pos <= (1u << 20) && (1u << 20) < pos + len) {
      EXPECT_EQ(flags, 0u);
    }
    EXPECT_EQ(len % 512, 0u);
    pos += len;
    sum += len;
  }
  EXPECT_EQ(sum, 4u << 20);
  EXPECT_EQ(flat(d->allocation(1 << 20, 4096, 1)), (Map{{4096, 0}}));
  EXPECT_EQ(flat(d->allocation(3 << 20, 1 << 20, 8)), (Map{{1 << 20, kHZ}}));
  ASSERT_EQ(run_io(*d, ReqOp::write, 3 << 20, 4096), BlkStatus::ok);
  const auto after = flat(d->allocation(3 << 20, 1 << 20, 8));
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.front().second, 0u);  // a completed write is in the map
  EXPECT_EQ(d->allocation(0, 8 << 20, 8).status().code(), EINVAL);
  EXPECT_TRUE(d->write_zeroes_is_cheap() == (d->queue().limits().max_write_zeroes_sectors > 0));
}

}  // namespace
}  // namespace blkmq
