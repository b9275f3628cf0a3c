// A ublk zoned target (UBLK_F_ZONED): the built-in null target with
// zoned=1 reports its zones, takes zone management and appends through
// the target ops, and its queue orders zone writes by zone write plugging
// under ublk's default scheduler.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "blkmq/blkmq.h"
#include "blkmq/driver/ublk.h"
#include "support/device_test_util.h"

namespace blkmq {
namespace {

using devtest::IoSlot;
using devtest::Waiter;

constexpr uint64_t kZoneSectors = 16u << 11;  // zone_size=16m
constexpr uint64_t kZoneBytes = kZoneSectors << kSectorShift;

std::unique_ptr<Device> make(ParamMap extra = {}) {
  ParamMap p{{"target", "null"}, {"zoned", "1"}, {"size", "256m"}, {"zone_size", "16m"}};
  for (auto& [k, v] : extra) p[k] = v;
  return devtest::make_device("ublk", p);
}

BlkStatus submit_wait(Queue& q, ReqOp op, uint64_t off, uint32_t len, uint64_t* sector = nullptr) {
  Waiter w;
  IoSlot s;
  s.prep(op, off, len, &w);
  q.submit_bio(&s.bio);
  EXPECT_TRUE(w.wait(1));
  if (sector) *sector = s.bio.sector;
  return s.bio.status;
}

TEST(UblkZoned, TheTargetsZonesAreTheQueues) {
  auto dev = make({{"zone_max_open", "4"}, {"zone_max_active", "6"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  EXPECT_EQ(*q.attr("queue/zoned"), "host-managed");
  EXPECT_EQ(*q.attr("queue/nr_zones"), "16");
  EXPECT_EQ(*q.attr("queue/chunk_sectors"), std::to_string(kZoneSectors));
  EXPECT_EQ(*q.attr("queue/max_open_zones"), "4");
  EXPECT_EQ(*q.attr("queue/max_active_zones"), "6");
  auto r = q.report_zones(0, 100);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 16u);
  for (unsigned i = 0; i < 16; i++) {
    EXPECT_EQ((*r)[i].start, i * kZoneSectors);
    EXPECT_EQ((*r)[i].cond, ZoneCond::empty);
  }
  // Refused: a zone size that is not a power of two; zones on the loop target.
  EXPECT_NE(devtest::make_device_error("ublk", {{"target", "null"}, {"zoned", "1"}, {"size", "256m"},
                                                {"zone_size", "3m"}})
                .find("power of two"),
            std::string::npos);
  EXPECT_NE(devtest::make_device_error("ublk", {{"target", "loop"}, {"zoned", "1"}, {"filename", "/nonexistent"}})
                .find("zoned"),
            std::string::npos);
}

TEST(UblkZoned, WritesAppendsAndZoneCommandsReachTheTarget) {
  for (const char* append_max : {"2560", "0"}) {
    SCOPED_TRACE(std::string("zone_append_max_sectors=") + append_max);
    auto dev = make({{"zone_append_max_sectors", append_max}});
    ASSERT_TRUE(dev);
    Queue& q = dev->queue();
    EXPECT_EQ(submit_wait(q, ReqOp::write, kZoneBytes, 8192), BlkStatus::ok);
    EXPECT_EQ(submit_wait(q, ReqOp::write, kZoneBytes + 4096, 4096), BlkStatus::ioerr);  // behind the pointer
    uint64_t at = 0;
    EXPECT_EQ(submit_wait(q, ReqOp::zone_append, kZoneBytes, 4096, &at), BlkStatus::ok);
    EXPECT_EQ(at, kZoneSectors + 16);
    auto z = q.report_zones(kZoneSectors, 1);
    ASSERT_TRUE(z);
    EXPECT_EQ(z->front().wp, kZoneSectors + 24);
    EXPECT_EQ(z->front().cond, ZoneCond::imp_open);
    EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::finish, kZoneSectors), BlkStatus::ok);
    EXPECT_EQ(q.report_zones(kZoneSectors, 1)->front().cond, ZoneCond::full);
    EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::open, 2 * kZoneSectors), BlkStatus::ok);
    EXPECT_EQ(q.report_zones(2 * kZoneSectors, 1)->front().cond, ZoneCond::exp_open);
    EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::reset_all, 0), BlkStatus::ok);
    auto all = q.report_zones(0, 16);  // held: a range-for over *temporary would outlive it
    ASSERT_TRUE(all);
    for (const Zone& zz : *all) EXPECT_EQ(zz.cond, ZoneCond::empty);
  }
}

// zbd/005 on the ublk target: whole zones of 256 KiB writes queued at once,
// under ublk's mq-deadline and under none, all land in order.
TEST(UblkZoned, DeepSequentialWritersLandInOrder) {
  for (const char* sched : {"mq-deadline", "none"}) {
    SCOPED_TRACE(sched);
    auto dev = make({{"nr_hw_queues", "2"}, {"attr:queue/scheduler", sched}});
    ASSERT_TRUE(dev);
    Queue& q = dev->queue();
    constexpr unsigned kLen = 256 << 10, kPer = static_cast<unsigned>(kZoneBytes / kLen);
    Waiter w;
    std::vector<IoSlot> slots(3 * kPer);
    for (unsigned i = 0; i < kPer; i++)
      for (unsigned z = 0; z < 3; z++) {
        slots[z * kPer + i].prep(ReqOp::write, (4 + z) * kZoneBytes + uint64_t{i} * kLen, kLen, &w);
        q.submit_bio(&slots[z * kPer + i].bio);
      }
    ASSERT_TRUE(w.wait(static_cast<int>(slots.size())));
    EXPECT_EQ(w.errors(), 0);
    for (unsigned z = 4; z < 7; z++) EXPECT_EQ(q.report_zones(z * kZoneSectors, 1)->front().cond, ZoneCond::full);
  }
}

}  // namespace
}  // namespace blkmq
