// blktests block/025 ("do a huge discard with 4k sector size"): blkdiscard
// of a whole 2 TiB scsi_debug disk with 4 KiB sectors, for 1adfc5e4136f
// (a discard bio must stay a multiple of the logical block size) and
// 4800bf7bc8c72 (no 32-bit overflow in __blkdev_issue_discard). A bio's
// size is 32 bits here as in the kernel, so a range over 4 GiB takes
// several bios; this test issues them as blkdev_issue_discard does (the
// largest block multiple that fits in 32 bits, chained to one end) on a
// null device with 4 KiB blocks, whose discard limit (UINT_MAX >> 9
// sectors, as null_blk's) is not a multiple of 4 KiB: the core's split
// must round it down, and sectors beyond 2^32 bytes must stay exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <memory>
#include <vector>

#include "base/event.h"
#include "blkmq/blkmq.h"
#include "support/verified_io.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint32_t kBs = 4096;

// One range discarded with several bios that end into one completion.
struct ChainedDiscard {
  std::vector<Bio> bios;
  std::vector<std::atomic<int>> ends;
  std::atomic<size_t> remaining{0};
  std::atomic<int> completions{0};
  base::Completion all_ended;
  std::atomic<uint8_t> status{static_cast<uint8_t>(BlkStatus::ok)};
  explicit ChainedDiscard(size_t n) : bios(n), ends(n) {}
};

void chained_end(Bio* b) {
  auto* c = static_cast<ChainedDiscard*>(b->private_data);
  c->ends[b - c->bios.data()]++;
  if (b->status != BlkStatus::ok) c->status.store(static_cast<uint8_t>(b->status));
  if (c->remaining.fetch_sub(1) == 1) {
    c->completions++;
    c->all_ended.complete();
  }
}

// Discards [offset, offset + len) as blkdev_issue_discard splits it: bios
// of the largest multiple of the block size that a 32-bit size holds.
std::unique_ptr<ChainedDiscard> discard_range(Queue& q, uint64_t offset, uint64_t len) {
  const uint64_t max_bio = (uint64_t{UINT32_MAX} / kBs) * kBs;
  auto c = std::make_unique<ChainedDiscard>((len + max_bio - 1) / max_bio);
  c->remaining = c->bios.size();
  for (size_t i = 0; i < c->bios.size(); i++) {
    const uint64_t at = offset + i * max_bio;
    Bio& b = c->bios[i];
    b.op = ReqOp::discard;
    b.sector = at >> kSectorShift;
    b.size = static_cast<uint32_t>(std::min(max_bio, offset + len - at));
    b.end_io = chained_end;
    b.private_data = c.get();
  }
  for (Bio& b : c->bios) q.submit_bio(&b);
  return c;
}

TEST(BlktestsDiscard, DiscardOverFourGiBWithFourKiBBlocks) {
  Watchdog wd("block/025 huge discard", std::chrono::seconds(120));
  auto dev = make_null_device({{"bs", "4096"}, {"memory_backed", "1"}, {"discard", "1"}, {"size", "5120"},
                               {"poll_queues", "0"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_EQ(q.limits().max_discard_sectors % (kBs >> kSectorShift), 7u) << "the limit is not a block multiple";
  // Blocks at the edges of the range, at the 32-bit boundaries of bytes
  // and of the first bio, and just outside the range.
  const uint64_t offset = kBs, len = 4 * kGiB + 2 * kBs;
  const std::vector<uint64_t> inside = {offset, 4 * kGiB - kBs, 4 * kGiB, 4 * kGiB + kBs, offset + len - kBs};
  const std::vector<uint64_t> outside = {0, offset + len};
  std::vector<uint8_t> buf(kBs), back(kBs);
  for (uint64_t at : inside) {
    std::memset(buf.data(), 0xa5, kBs);
    ASSERT_EQ(q.write_sync(buf.data(), at, kBs), BlkStatus::ok) << at;
  }
  for (uint64_t at : outside) {
    std::memset(buf.data(), 0x3c, kBs);
    ASSERT_EQ(q.write_sync(buf.data(), at, kBs), BlkStatus::ok) << at;
  }
  const DiskStat before = q.disk_stat();
  auto c = discard_range(q, offset, len);
  ASSERT_TRUE(c->all_ended.wait_for(60ull * 1000 * 1000 * 1000));
  ASSERT_EQ(c->completions.load(), 1);
  EXPECT_EQ(static_cast<BlkStatus>(c->status.load()), BlkStatus::ok);
  EXPECT_EQ(c->bios.size(), 2u);
  for (auto& e : c->ends) EXPECT_EQ(e.load(), 1);
  const DiskStat after = q.disk_stat();
  EXPECT_EQ(after.discard_sectors - before.discard_sectors, len >> kSectorShift) << "every byte discarded";
  for (uint64_t at : inside) {
    ASSERT_EQ(q.read_sync(back.data(), at, kBs), BlkStatus::ok);
    EXPECT_EQ(std::count(back.begin(), back.end(), 0), kBs) << "still there after the discard: " << at;
  }
  for (uint64_t at : outside) {
    ASSERT_EQ(q.read_sync(back.data(), at, kBs), BlkStatus::ok);
    EXPECT_EQ(std::count(back.begin(), back.end(), 0x3c), kBs) << "discarded outside the range: " << at;
  }
}

}  // namespace
}  // namespace blkmq::test
