// Read-only devices (`ro`, the kernel's /sys/block/<dev>/ro, set as
// BLKROSET sets it): writes, discards and zeroing fail with `readonly`
// (-EROFS) and change nothing; reads and empty flushes work.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "base/event.h"
#include "blkmq/blkmq.h"

namespace blkmq {
namespace {

struct Waited {
  base::Completion done;
};

void waited_end(Bio* b) { static_cast<Waited*>(b->private_data)->done.complete(); }

// A data-less bio (discard, write_zeroes) of `len` bytes at `offset`,
// submitted and waited for.
BlkStatus submit_range(Queue& q, ReqOp op, uint64_t offset, uint32_t len) {
  Waited w;
  Bio bio;
  bio.op = op;
  bio.sector = offset >> 9;
  bio.size = len;
  bio.end_io = waited_end;
  bio.private_data = &w;
  q.submit_bio(&bio);
  EXPECT_TRUE(w.done.wait_for(5ull * 1000 * 1000 * 1000)) << "the bio never ended";
  return bio.status;
}

std::unique_ptr<Device> make_device() {
  auto made = create_device("null", {{"memory_backed", "1"}, {"discard", "1"}, {"size", "16"}});
  if (!made) {
    ADD_FAILURE() << made.status().message();
    return nullptr;
  }
  return std::move(made.value());
}

TEST(ReadOnly, WritesDiscardsAndZeroingFailReadsWork) {
  auto dev = make_device();
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  std::vector<uint8_t> data(4096, 0xab), back(4096, 0);
  ASSERT_EQ(q.write_sync(data.data(), 0, 4096), BlkStatus::ok);
  ASSERT_EQ(*q.attr("ro"), "0");

  ASSERT_TRUE(q.set_attr("ro", "1"));
  EXPECT_EQ(*q.attr("ro"), "1");
  std::vector<uint8_t> other(4096, 0x11);
  EXPECT_EQ(q.write_sync(other.data(), 0, 4096), BlkStatus::readonly);
  EXPECT_EQ(q.write_sync(other.data(), 0, 4096, kBioFua), BlkStatus::readonly);
  EXPECT_EQ(submit_range(q, ReqOp::discard, 0, 4096), BlkStatus::readonly);
  EXPECT_EQ(submit_range(q, ReqOp::write_zeroes, 0, 4096), BlkStatus::readonly);
  EXPECT_EQ(q.flush_sync(), BlkStatus::ok) << "a flush without data passes";
  EXPECT_EQ(blk_status_to_errno(BlkStatus::readonly), -EROFS);
  ASSERT_EQ(q.read_sync(back.data(), 0, 4096), BlkStatus::ok);
  EXPECT_EQ(back, data) << "nothing was changed";

  ASSERT_TRUE(q.set_attr("ro", "0"));
  EXPECT_EQ(q.write_sync(other.data(), 0, 4096), BlkStatus::ok);
  ASSERT_EQ(q.read_sync(back.data(), 0, 4096), BlkStatus::ok);
  EXPECT_EQ(back, other);
}

TEST(ReadOnly, BadValuesAreRefused) {
  auto dev = make_device();
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  for (const char* v : {"2", "-1", "yes", ""}) {
    Status st = q.set_attr("ro", v);
    EXPECT_FALSE(st) << v;
    EXPECT_NE(st.message().find("ro"), std::string::npos) << st.message();
  }
  EXPECT_EQ(*q.attr("ro"), "0");
}

}  // namespace
}  // namespace blkmq
