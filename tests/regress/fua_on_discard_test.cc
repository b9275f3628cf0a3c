// A discard, write-zeroes or read carrying FUA or PREFLUSH used to be
// accepted at submission and sent through the flush machinery, whose data
// step runs as a write. On null with an emulated-FUA write-back cache
// (memory_backed=1 cache_size fua=0) a discard with FUA was acknowledged
// and not performed, and a read with FUA wrote its buffer over the data.
// As the kernel's submit_bio_noacct, only a write or the empty flush may
// carry those flags; the rest fail at submission (inval) and change nothing.
#include <gtest/gtest.h>

#include <vector>

#include "blkmq/blkmq.h"
#include "support/device_test_util.h"

namespace blkmq::test {
namespace {

using devtest::IoSlot;
using devtest::Waiter;

constexpr uint32_t kLen = 64 << 10;

// null with a write-back cache, emulated FUA and discard.
std::unique_ptr<Device> cached_null() {
  return devtest::make_device("null", {{"memory_backed", "1"}, {"size", "16"}, {"cache_size", "16"},
                                       {"fua", "0"}, {"discard", "1"}});
}

// Submits one bio of `op` over [0, kLen) with `flags`; its status.
BlkStatus submit_one(Queue& q, ReqOp op, uint32_t flags, std::vector<unsigned char>* buf = nullptr) {
  Waiter w;
  IoSlot s;
  s.prep(op, 0, kLen, &w, flags);
  if (buf) std::copy(buf->begin(), buf->end(), s.buf.begin());
  q.submit_bio(&s.bio);
  EXPECT_TRUE(w.wait(1));
  EXPECT_EQ(s.ends.load(), 1);
  if (buf) *buf = s.buf;
  return s.bio.status;
}

// The device's first kLen bytes still hold `want`.
void expect_data(Queue& q, const std::vector<unsigned char>& want) {
  std::vector<unsigned char> out(kLen);
  ASSERT_EQ(q.read_sync(out.data(), 0, kLen), BlkStatus::ok);
  EXPECT_EQ(out, want);
}

TEST(FuaOnDiscard, DiscardWithFuaFailsAtSubmitInsteadOfBeingAcknowledgedUndone) {
  auto dev = cached_null();
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  const auto a = devtest::pattern(kLen, 7);
  ASSERT_EQ(q.write_sync(a.data(), 0, kLen), BlkStatus::ok);
  for (uint32_t f : {uint32_t(kBioFua), uint32_t(kBioPreflush), uint32_t(kBioFua | kBioPreflush)}) {
    EXPECT_EQ(submit_one(q, ReqOp::discard, f), BlkStatus::inval) << "flags " << f;
    expect_data(q, a);
  }
  // Without the flags the same discard is done.
  EXPECT_EQ(submit_one(q, ReqOp::discard, 0), BlkStatus::ok);
  expect_data(q, std::vector<unsigned char>(kLen, 0));
}

TEST(FuaOnDiscard, ReadWithFuaFailsAtSubmitInsteadOfWritingItsBuffer) {
  auto dev = cached_null();
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  const auto a = devtest::pattern(kLen, 8);
  ASSERT_EQ(q.write_sync(a.data(), 0, kLen), BlkStatus::ok);
  for (uint32_t f : {uint32_t(kBioFua), uint32_t(kBioPreflush)}) {
    std::vector<unsigned char> junk(kLen, 0xEE);
    EXPECT_EQ(submit_one(q, ReqOp::read, f, &junk), BlkStatus::inval) << "flags " << f;
    expect_data(q, a);
  }
}

TEST(FuaOnDiscard, WriteZeroesWithFuaFailsAtSubmit) {
  auto dev = cached_null();
  ASSERT_TRUE(dev);
  // null takes no write-zeroes: without the flags it is notsupp, with them
  // the flag check comes first, as in the kernel.
  EXPECT_EQ(submit_one(dev->queue(), ReqOp::write_zeroes, kBioFua), BlkStatus::inval);
  EXPECT_EQ(submit_one(dev->queue(), ReqOp::write_zeroes, 0), BlkStatus::notsupp);
}

TEST(FuaOnDiscard, EmptyFlushAndWritesKeepTheirFlags) {
  auto dev = cached_null();
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  for (uint32_t f : {uint32_t(kBioPreflush), uint32_t(kBioPreflush | kBioFua)}) {
    Waiter w;
    IoSlot s;
    s.prep(ReqOp::flush, 0, 0, &w, f);
    q.submit_bio(&s.bio);
    ASSERT_TRUE(w.wait(1));
    EXPECT_EQ(s.bio.status, BlkStatus::ok) << "flags " << f;
  }
  const auto a = devtest::pattern(kLen, 9);
  for (uint32_t f : {uint32_t(kBioFua), uint32_t(kBioPreflush), uint32_t(kBioFua | kBioPreflush)})
    EXPECT_EQ(q.write_sync(a.data(), 0, kLen, f), BlkStatus::ok) << "flags " << f;
  expect_data(q, a);
}

}  // namespace
}  // namespace blkmq::test
