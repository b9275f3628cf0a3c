// Plugging, merging, splitting and the seed switches on the submit path.
#include <gtest/gtest.h>

#include "support/stub_driver.h"

namespace blkmq::test {
namespace {

using Slots = std::vector<std::unique_ptr<BioTracker::Slot>>;

TEST(Plug, HoldsRequestsUntilFinishAndMergesSequentialBios) {
  StubDriver d(StubDriver::Options{});
  BioTracker t;
  Slots s;
  {
    Plug plug;
    for (int i = 0; i < 8; i++) {
      s.push_back(t.make(ReqOp::write, uint64_t(i) * 4096, 4096));
      d.q().submit_bio(&s.back()->bio);
    }
    EXPECT_EQ(d.nr_seen(), 0u);  // held in the plug
  }
  ASSERT_TRUE(t.wait_for(8));
  auto seen = d.seen();
  ASSERT_EQ(seen.size(), 1u);  // one request carrying eight bios
  EXPECT_EQ(seen[0].bytes, 8u * 4096);
  EXPECT_EQ(seen[0].nr_bios, 8u);
  EXPECT_EQ(d.q().disk_stat().write_merges, 7u);
}

TEST(Plug, FlushesAtThirtyTwoRequests) {
  StubDriver d(StubDriver::Options{});
  BioTracker t;
  Slots s;
  Plug plug;
  for (int i = 0; i < 33; i++) {  // not contiguous: no merges
    s.push_back(t.make(ReqOp::read, uint64_t(i) * 8192, 4096));
    d.q().submit_bio(&s.back()->bio);
  }
  EXPECT_EQ(d.nr_seen(), 32u);
  plug.finish();
  EXPECT_EQ(d.nr_seen(), 33u);
  ASSERT_TRUE(t.wait_for(33));
}

TEST(Plug, FlushesWhenTheLastRequestIsLarge) {
  StubDriver d(StubDriver::Options{});
  BioTracker t;
  Slots s;
  Plug plug;
  s.push_back(t.make(ReqOp::write, 0, 128 * 1024));
  d.q().submit_bio(&s.back()->bio);
  EXPECT_EQ(d.nr_seen(), 0u);
  s.push_back(t.make(ReqOp::write, 1 << 20, 4096));
  d.q().submit_bio(&s.back()->bio);
  EXPECT_EQ(d.nr_seen(), 1u);
  plug.finish();
  ASSERT_TRUE(t.wait_for(2));
}

TEST(Plug, NomergesTwoDisablesMerging) {
  StubDriver d(StubDriver::Options{});
  ASSERT_TRUE(d.q().set_attr("queue/nomerges", "2"));
  BioTracker t;
  Slots s;
  {
    Plug plug;
    for (int i = 0; i < 4; i++) {
      s.push_back(t.make(ReqOp::write, uint64_t(i) * 4096, 4096));
      d.q().submit_bio(&s.back()->bio);
    }
  }
  ASSERT_TRUE(t.wait_for(4));
  EXPECT_EQ(d.nr_seen(), 4u);
}

TEST(Merge, MergesIntoTheSoftwareQueueWhileTheHctxIsStopped) {
  StubDriver d(StubDriver::Options{});
  auto* q = static_cast<QueueImpl*>(&d.q());
  stop_hw_queues(q);
  BioTracker t;
  Slots s;
  for (int i = 0; i < 4; i++) {  // front and back merges
    s.push_back(t.make(ReqOp::write, uint64_t(3 - i) * 4096, 4096));
    d.q().submit_bio(&s.back()->bio);
  }
  s.push_back(t.make(ReqOp::read, 0, 4096));  // different op: no merge
  d.q().submit_bio(&s.back()->bio);
  EXPECT_EQ(d.nr_seen(), 0u);
  start_stopped_hw_queues(q, false);
  ASSERT_TRUE(t.wait_for(5));
  auto seen = d.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].bytes, 4u * 4096);
  EXPECT_EQ(seen[0].sector, 0u);
}

TEST(Merge, RespectsMaxSectors) {
  StubDriver::Options o;
  o.max_sectors = 16;  // 8 KiB
  StubDriver d(o);
  BioTracker t;
  Slots s;
  {
    Plug plug;
    for (int i = 0; i < 4; i++) {
      s.push_back(t.make(ReqOp::write, uint64_t(i) * 4096, 4096));
      d.q().submit_bio(&s.back()->bio);
    }
  }
  ASSERT_TRUE(t.wait_for(4));
  for (auto& r : d.seen()) EXPECT_LE(r.bytes, 8192u);
}

TEST(Split, LargeBioIsSplitAndEndsOnce) {
  StubDriver::Options o;
  o.max_sectors = 16;
  o.max_segments = 2;
  StubDriver d(o);
  BioTracker t;
  // 3 vectors of 12 KiB: needs max_sectors and segment splits.
  std::vector<uint8_t> buf(36 * 1024);
  for (size_t i = 0; i < buf.size(); i++) buf[i] = static_cast<uint8_t>(i % 251);
  iovec v[3] = {{buf.data(), 12288}, {buf.data() + 12288, 12288}, {buf.data() + 24576, 12288}};
  auto slot = t.make(ReqOp::write, 1 << 20, 4096);
  slot->bio.vec = v;
  slot->bio.nr_vecs = 3;
  slot->bio.size = 36 * 1024;
  d.q().submit_bio(&slot->bio);
  ASSERT_TRUE(t.wait_for(1));
  EXPECT_EQ(slot->ends.load(), 1);
  EXPECT_EQ(slot->status, BlkStatus::ok);
  uint64_t total = 0;
  for (auto& r : d.seen()) {
    EXPECT_LE(r.bytes, 8192u);
    total += r.bytes;
  }
  EXPECT_EQ(total, 36u * 1024);
  EXPECT_EQ(std::memcmp(d.mem() + (1 << 20), buf.data(), buf.size()), 0);
}

TEST(Seed001, PlugDirectIssueOnNoSchedSingleQueue) {
  StubDriver::Options o;
  o.flags = kTagSetNoSched;
  StubDriver d(o);
  EXPECT_EQ(*d.q().attr("queue/scheduler"), "[none]");
  BioTracker t;
  Slots s;
  {
    Plug plug;
    s.push_back(t.make(ReqOp::read, 0, 4096));
    d.q().submit_bio(&s.back()->bio);
    EXPECT_EQ(d.nr_seen(), 1u);  // issued directly, not held
  }
  ASSERT_TRUE(d.q().set_attr("queue/plug_direct_issue", "0"));
  {
    Plug plug;
    s.push_back(t.make(ReqOp::read, 65536, 4096));
    d.q().submit_bio(&s.back()->bio);
    EXPECT_EQ(d.nr_seen(), 1u);  // held in the plug
  }
  EXPECT_EQ(d.nr_seen(), 2u);
  ASSERT_TRUE(t.wait_for(2));
}

TEST(Seed000, SubmitPlugImplicitWrapsEveryBio) {
  StubDriver d(StubDriver::Options{});
  ASSERT_TRUE(d.q().set_attr("queue/submit_plug", "implicit"));
  EXPECT_EQ(*d.q().attr("queue/submit_plug"), "none [implicit]");
  std::vector<uint8_t> b(4096);
  EXPECT_EQ(d.q().write_sync(b.data(), 0, 4096), BlkStatus::ok);
  EXPECT_EQ(d.nr_seen(), 1u);
}

}  // namespace
}  // namespace blkmq::test
