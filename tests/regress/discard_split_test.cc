// Discards and zeroing larger than the device takes in one request are
// split by max_discard_sectors / max_write_zeroes_sectors (the kernel's
// bio_split_discard and bio_split_write_zeroes), up to the largest bio
// there is (4 GiB less a block: bi_size is 32 bits), and the requests
// they make never merge back beyond those limits.
#include <gtest/gtest.h>

#include <vector>

#include "blkmq/blkmq.h"
#include "support/stub_driver.h"

namespace blkmq::test {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

StubDriver::Options big_device(uint32_t max_discard, uint32_t max_zeroes) {
  StubDriver::Options o;
  o.capacity = 8 * kGiB;
  o.backing = false;
  o.max_discard_sectors = max_discard;
  o.max_write_zeroes_sectors = max_zeroes;
  return o;
}

// The requests seen for one bio cover [sector, sector + bytes) in order,
// each within `max_sectors`.
void expect_cover(const std::vector<SeenRq>& seen, ReqOp op, uint64_t sector, uint64_t bytes,
                  uint32_t max_sectors) {
  uint64_t at = sector;
  for (const SeenRq& r : seen) {
    EXPECT_EQ(r.op, op);
    EXPECT_EQ(r.sector, at);
    EXPECT_LE(r.bytes, uint64_t(max_sectors) << 9);
    at += r.bytes >> 9;
  }
  EXPECT_EQ(at, sector + (bytes >> 9));
}

TEST(DiscardSplit, FourGiBDiscardIsSplitByMaxDiscardSectors) {
  const uint32_t max = 1u << 21;  // 1 GiB
  StubDriver d(big_device(max, 0));
  BioTracker t;
  const uint32_t bytes = 0xFFFFF000u;  // 4 GiB - 4 KiB
  auto s = t.make(ReqOp::discard, 4096, 0);
  s->bio.size = bytes;
  d.q().submit_bio(&s->bio);
  ASSERT_TRUE(t.wait_for(1));
  EXPECT_EQ(s->status, BlkStatus::ok);
  EXPECT_EQ(s->ends.load(), 1);
  const auto seen = d.seen();
  EXPECT_EQ(seen.size(), 4u);
  expect_cover(seen, ReqOp::discard, 8, bytes, max);
  EXPECT_EQ(*d.q().attr("queue/discard_max_bytes"), std::to_string(uint64_t(max) << 9));
}

TEST(DiscardSplit, ZeroingIsSplitByMaxWriteZeroesSectors) {
  const uint32_t max = 1u << 12;  // 2 MiB
  StubDriver d(big_device(0, max));
  BioTracker t;
  const uint32_t bytes = 9 << 20;  // 4.5 requests
  auto s = t.make(ReqOp::write_zeroes, 0, 0);
  s->bio.size = bytes;
  d.q().submit_bio(&s->bio);
  ASSERT_TRUE(t.wait_for(1));
  EXPECT_EQ(s->status, BlkStatus::ok);
  const auto seen = d.seen();
  EXPECT_EQ(seen.size(), 5u);
  expect_cover(seen, ReqOp::write_zeroes, 0, bytes, max);
}

// Plugged contiguous discards merge, but only up to max_discard_sectors,
// not up to max_sectors (which is far smaller here).
TEST(DiscardSplit, DiscardsMergeUpToTheirOwnLimit) {
  const uint32_t max = 1u << 14;  // 8 MiB; max_sectors is 1.25 MiB
  StubDriver::Options o = big_device(max, 0);
  o.mode = CompleteMode::never;
  StubDriver d(o);
  BioTracker t;
  std::vector<std::unique_ptr<BioTracker::Slot>> s;
  {
    Plug plug;
    for (int i = 0; i < 12; i++) {  // 12 x 1 MiB
      s.push_back(t.make(ReqOp::discard, uint64_t(i) << 20, 0));
      s.back()->bio.size = 1 << 20;
      d.q().submit_bio(&s.back()->bio);
    }
  }
  const auto seen = d.seen();
  ASSERT_EQ(seen.size(), 2u) << "8 MiB and 4 MiB";
  expect_cover(seen, ReqOp::discard, 0, 12ull << 20, max);
  for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
  ASSERT_TRUE(t.wait_for(12));
  EXPECT_EQ(t.errors.load(), 0);
}

}  // namespace
}  // namespace blkmq::test
