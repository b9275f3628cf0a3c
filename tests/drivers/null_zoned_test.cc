// null_blk's zone rules (src/drivers/null/null_zoned.h): the parameters'
// checks and clamps, the write pointer, implicit and explicit open, the
// open and active limits with null_blk's round-robin implicit close,
// close, finish, reset and reset-all, reads past the write pointer,
// conventional zones and read-only or offline zones.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "drivers/null/null_zoned.h"

namespace blkmq::nullb {
namespace {

constexpr uint64_t kZone = 8192;  // 4 MiB zones, in sectors

std::unique_ptr<ZoneTable> table(ZonedConfig c, std::vector<std::string>* notes = nullptr) {
  auto t = ZoneTable::create(c, notes);
  EXPECT_TRUE(t) << t.status().message();
  return t ? std::move(*t) : nullptr;
}

ZonedConfig eight(unsigned max_open = 0, unsigned max_active = 0) {
  ZonedConfig c;
  c.capacity_sectors = 8 * kZone;
  c.zone_size_sectors = kZone;
  c.max_open = max_open;
  c.max_active = max_active;
  return c;
}

BlkStatus ok_xfer(uint64_t, uint64_t) { return BlkStatus::ok; }

BlkStatus wr(ZoneTable& t, unsigned zone, uint64_t nr = 8) {
  const Zone z = t.report(zone * kZone, 1).at(0);
  return t.write(z.wp, nr, false, ok_xfer);
}

ZoneCond cond(const ZoneTable& t, unsigned zone) { return t.report(zone * kZone, 1).at(0).cond; }

std::string create_error(ZonedConfig c) {
  auto t = ZoneTable::create(c, nullptr);
  return t ? "" : t.status().message();
}

TEST(NullZoned, ParametersAreCheckedAsNullBlkChecksThem) {
  ZonedConfig c = eight();
  c.zone_size_sectors = 3000;
  EXPECT_NE(create_error(c).find("power of two"), std::string::npos);
  c = eight();
  c.zone_size_sectors = 16 * kZone;
  EXPECT_NE(create_error(c).find("larger than the device"), std::string::npos);
  c = eight();
  c.zone_capacity_sectors = 2 * kZone;
  EXPECT_NE(create_error(c).find("zone_capacity"), std::string::npos);
  c = eight();
  c.capacity_sectors += 100;
  c.zone_capacity_sectors = kZone / 2;
  EXPECT_NE(create_error(c).find("smaller last zone"), std::string::npos);
  c.zone_capacity_sectors = 0;  // the same shorter last zone, with full capacity: allowed
  auto t = table(c);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->nr_zones(), 9u);
  const Zone last = t->report(8 * kZone, 1).at(0);
  EXPECT_EQ(last.len, 100u);
  EXPECT_EQ(last.capacity, 100u);
}

TEST(NullZoned, LimitsAndConventionalZonesAreClampedAsNullBlkClampsThem) {
  std::vector<std::string> notes;
  ZonedConfig c = eight(/*max_open=*/5, /*max_active=*/3);
  c.nr_conv = 20;
  auto t = table(c, &notes);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->config().nr_conv, 7u);    // nr_zones - 1
  EXPECT_EQ(t->config().max_active, 0u);  // 3 >= one sequential zone: disabled
  EXPECT_EQ(t->config().max_open, 0u);
  EXPECT_EQ(notes.size(), 3u);
  notes.clear();
  t = table(eight(5, 3), &notes);
  EXPECT_EQ(t->config().max_active, 3u);
  EXPECT_EQ(t->config().max_open, 3u) << "max_open is clamped to max_active";
  t = table(eight(8, 0), &notes);
  EXPECT_EQ(t->config().max_open, 0u) << "a limit of every sequential zone is no limit";
  t = table(eight(7, 0));
  EXPECT_EQ(t->config().max_open, 7u);
}

TEST(NullZoned, ReportHasEveryField) {
  ZonedConfig c = eight();
  c.nr_conv = 2;
  c.zone_capacity_sectors = 6144;
  auto t = table(c);
  const std::vector<Zone> zs = t->report(0, 100);
  ASSERT_EQ(zs.size(), 8u);
  EXPECT_EQ(zs[1], (Zone{kZone, kZone, 2 * kZone, kZone, ZoneType::conventional, ZoneCond::not_wp}));
  EXPECT_EQ(zs[2], (Zone{2 * kZone, kZone, 2 * kZone, 6144, ZoneType::seq_write_req, ZoneCond::empty}));
  EXPECT_EQ(t->report(5 * kZone + 17, 2).size(), 2u);
  EXPECT_EQ(t->report(5 * kZone, 100).front().start, 5 * kZone);
  EXPECT_TRUE(t->report(8 * kZone, 1).empty());
  c.full = true;
  t = table(c);
  EXPECT_EQ(t->report(2 * kZone, 1).at(0).cond, ZoneCond::full);
  EXPECT_EQ(t->report(2 * kZone, 1).at(0).wp, 2 * kZone + 6144);
}

TEST(NullZoned, WritesGoAtTheWritePointerUpToTheCapacity) {
  ZonedConfig c = eight();
  c.zone_capacity_sectors = 16;
  auto t = table(c);
  EXPECT_EQ(t->write(kZone + 8, 8, false, ok_xfer), BlkStatus::ioerr) << "ahead of the write pointer";
  EXPECT_EQ(cond(*t, 1), ZoneCond::empty);
  EXPECT_EQ(t->write(kZone, 8, false, ok_xfer), BlkStatus::ok);
  EXPECT_EQ(cond(*t, 1), ZoneCond::imp_open);
  EXPECT_EQ(t->nr_open(), 1u);
  EXPECT_EQ(t->write(kZone, 8, false, ok_xfer), BlkStatus::ioerr) << "behind it";
  EXPECT_EQ(t->write(kZone + 8, 16, false, ok_xfer), BlkStatus::ioerr) << "past the capacity";
  // A failed transfer does not move the pointer.
  EXPECT_EQ(t->write(kZone + 8, 8, false, [](uint64_t, uint64_t) { return BlkStatus::medium; }), BlkStatus::medium);
  EXPECT_EQ(t->report(kZone, 1).at(0).wp, kZone + 8);
  EXPECT_EQ(t->write(kZone + 8, 8, false, ok_xfer), BlkStatus::ok);
  EXPECT_EQ(cond(*t, 1), ZoneCond::full);
  EXPECT_EQ(t->nr_open(), 0u);
  EXPECT_EQ(t->write(kZone + 16, 8, true, ok_xfer), BlkStatus::ioerr) << "an append to a full zone";
}

TEST(NullZoned, AppendsWriteAtThePointerAndSayWhere) {
  auto t = table(eight());
  std::vector<std::pair<uint64_t, uint64_t>> xfers;
  for (uint64_t n : {8u, 16u, 8u}) {
    uint64_t at = 0;
    ASSERT_EQ(t->write(3 * kZone + 100, n, true,
                       [&](uint64_t s, uint64_t len) {
                         xfers.emplace_back(s, len);
                         return BlkStatus::ok;
                       },
                       &at),
              BlkStatus::ok);
    EXPECT_EQ(at, xfers.back().first);
  }
  EXPECT_EQ(xfers, (std::vector<std::pair<uint64_t, uint64_t>>{
                       {3 * kZone, 8}, {3 * kZone + 8, 16}, {3 * kZone + 24, 8}}));
}

TEST(NullZoned, ConventionalZonesTakeWritesAnywhereButNoAppendOrManagement) {
  ZonedConfig c = eight();
  c.nr_conv = 1;
  auto t = table(c);
  EXPECT_EQ(t->write(4096, 8, false, ok_xfer), BlkStatus::ok);
  EXPECT_EQ(t->write(0, 8, false, ok_xfer), BlkStatus::ok);
  EXPECT_EQ(t->write(kZone - 4, 8, false, ok_xfer), BlkStatus::ioerr) << "crosses into the next zone";
  EXPECT_EQ(t->write(0, 8, true, ok_xfer), BlkStatus::ioerr);
  for (ZoneOp op : {ZoneOp::reset, ZoneOp::open, ZoneOp::close, ZoneOp::finish})
    EXPECT_EQ(t->manage(op, 0, nullptr), BlkStatus::ioerr) << zone_op_name(op);
  EXPECT_EQ(cond(*t, 0), ZoneCond::not_wp);
}

// The open limit closes an implicitly open zone, round-robin from after
// the last one closed, as null_close_imp_open_zone does.
TEST(NullZoned, AtTheOpenLimitImplicitlyOpenZonesCloseRoundRobin) {
  auto t = table(eight(/*max_open=*/2));
  ASSERT_EQ(wr(*t, 0), BlkStatus::ok);
  ASSERT_EQ(wr(*t, 1), BlkStatus::ok);
  ASSERT_EQ(wr(*t, 2), BlkStatus::ok);
  EXPECT_EQ(cond(*t, 0), ZoneCond::closed);
  EXPECT_EQ(cond(*t, 1), ZoneCond::imp_open);
  ASSERT_EQ(wr(*t, 3), BlkStatus::ok);
  EXPECT_EQ(cond(*t, 1), ZoneCond::closed) << "the next after zone 0, not zone 0 again";
  ASSERT_EQ(wr(*t, 0), BlkStatus::ok) << "a closed zone opens again, closing another";
  EXPECT_EQ(cond(*t, 0), ZoneCond::imp_open);
  EXPECT_EQ(cond(*t, 2), ZoneCond::closed);
  EXPECT_EQ(cond(*t, 3), ZoneCond::imp_open);
  EXPECT_EQ(t->nr_open(), 2u);
  EXPECT_EQ(t->nr_active(), 4u);
}

TEST(NullZoned, ExplicitlyOpenZonesStayOpenAndFillTheLimit) {
  auto t = table(eight(/*max_open=*/2));
  ASSERT_EQ(t->manage(ZoneOp::open, 0, nullptr), BlkStatus::ok);
  EXPECT_EQ(cond(*t, 0), ZoneCond::exp_open);
  ASSERT_EQ(wr(*t, 1), BlkStatus::ok);
  ASSERT_EQ(wr(*t, 2), BlkStatus::ok);
  EXPECT_EQ(cond(*t, 0), ZoneCond::exp_open);
  EXPECT_EQ(cond(*t, 1), ZoneCond::closed);
  ASSERT_EQ(t->manage(ZoneOp::open, 3 * kZone, nullptr), BlkStatus::ok);
  EXPECT_EQ(cond(*t, 2), ZoneCond::closed);
  EXPECT_EQ(wr(*t, 4), BlkStatus::zone_open_resource) << "two explicitly open zones: nothing to close";
  EXPECT_EQ(t->manage(ZoneOp::open, 4 * kZone, nullptr), BlkStatus::zone_open_resource);
  EXPECT_EQ(wr(*t, 0), BlkStatus::ok) << "a write keeps an explicitly open zone open";
  EXPECT_EQ(cond(*t, 0), ZoneCond::exp_open);
}

TEST(NullZoned, TheActiveLimitRefusesNewZonesAndCanBlockTheOpenLimit) {
  auto t = table(eight(/*max_open=*/2, /*max_active=*/3));
  ASSERT_EQ(wr(*t, 0), BlkStatus::ok);
  ASSERT_EQ(wr(*t, 1), BlkStatus::ok);
  ASSERT_EQ(wr(*t, 2), BlkStatus::ok);  // closes zone 0: 3 active
  EXPECT_EQ(cond(*t, 0), ZoneCond::closed);
  EXPECT_EQ(wr(*t, 3), BlkStatus::zone_active_resource);
  EXPECT_EQ(t->manage(ZoneOp::open, 3 * kZone, nullptr), BlkStatus::zone_active_resource);
  // Zone 0 is active already, but closing another to open it would leave
  // four active.
  EXPECT_EQ(wr(*t, 0), BlkStatus::zone_open_resource);
  EXPECT_EQ(cond(*t, 3), ZoneCond::empty);
  ASSERT_EQ(t->manage(ZoneOp::finish, kZone, nullptr), BlkStatus::ok);
  EXPECT_EQ(t->nr_active(), 2u);
  EXPECT_EQ(wr(*t, 3), BlkStatus::ok);
  EXPECT_EQ(blk_status_to_errno(BlkStatus::zone_open_resource), -ETOOMANYREFS);
  EXPECT_EQ(blk_status_to_errno(BlkStatus::zone_active_resource), -EOVERFLOW);
}

TEST(NullZoned, OpenCloseFinishAndResetFollowTheZoneStates) {
  auto t = table(eight());
  std::vector<std::pair<uint64_t, uint64_t>> discards;
  auto discard = [&](uint64_t s, uint64_t n) { discards.emplace_back(s, n); };
  EXPECT_EQ(t->manage(ZoneOp::close, 0, discard), BlkStatus::ioerr) << "close of an empty zone";
  EXPECT_EQ(t->manage(ZoneOp::open, 0, discard), BlkStatus::ok);
  EXPECT_EQ(t->manage(ZoneOp::open, 0, discard), BlkStatus::ok) << "open of an open zone";
  EXPECT_EQ(t->manage(ZoneOp::close, 0, discard), BlkStatus::ok);
  EXPECT_EQ(cond(*t, 0), ZoneCond::empty) << "closed with nothing written: empty";
  ASSERT_EQ(wr(*t, 0), BlkStatus::ok);
  EXPECT_EQ(t->manage(ZoneOp::close, 0, discard), BlkStatus::ok);
  EXPECT_EQ(cond(*t, 0), ZoneCond::closed);
  EXPECT_EQ(t->manage(ZoneOp::close, 0, discard), BlkStatus::ok) << "close of a closed zone";
  EXPECT_EQ(t->manage(ZoneOp::finish, 0, discard), BlkStatus::ok);
  EXPECT_EQ(t->report(0, 1).at(0).wp, kZone);
  EXPECT_EQ(t->manage(ZoneOp::finish, 0, discard), BlkStatus::ok) << "finish of a full zone";
  EXPECT_EQ(t->manage(ZoneOp::open, 0, discard), BlkStatus::ioerr) << "open of a full zone";
  EXPECT_EQ(t->manage(ZoneOp::close, 0, discard), BlkStatus::ioerr) << "close of a full zone";
  EXPECT_TRUE(discards.empty());
  EXPECT_EQ(t->manage(ZoneOp::reset, 0, discard), BlkStatus::ok);
  EXPECT_EQ(t->report(0, 1).at(0), (Zone{0, kZone, 0, kZone, ZoneType::seq_write_req, ZoneCond::empty}));
  EXPECT_EQ(discards, (std::vector<std::pair<uint64_t, uint64_t>>{{0, kZone}}));
  EXPECT_EQ(t->manage(ZoneOp::reset, 0, discard), BlkStatus::ok);
  EXPECT_EQ(discards.size(), 1u) << "an empty zone has nothing to discard";
  EXPECT_EQ(t->manage(ZoneOp::open, 8 * kZone, discard), BlkStatus::inval);
}

TEST(NullZoned, ResetAllResetsEveryWrittenSequentialZone) {
  ZonedConfig c = eight();
  c.nr_conv = 1;
  auto t = table(c);
  std::vector<uint64_t> discarded;
  for (unsigned z : {1u, 2u, 5u}) ASSERT_EQ(wr(*t, z), BlkStatus::ok);
  ASSERT_EQ(t->manage(ZoneOp::finish, 6 * kZone, nullptr), BlkStatus::ok);
  ASSERT_EQ(wr(*t, 7), BlkStatus::ok);
  ASSERT_TRUE(t->set_condition(7 * kZone, ZoneCond::readonly, nullptr));
  ASSERT_EQ(t->manage(ZoneOp::reset_all, 0, [&](uint64_t s, uint64_t) { discarded.push_back(s); }), BlkStatus::ok);
  EXPECT_EQ(discarded, (std::vector<uint64_t>{kZone, 2 * kZone, 5 * kZone, 6 * kZone}));
  for (unsigned z = 1; z < 7; z++) EXPECT_EQ(cond(*t, z), ZoneCond::empty) << z;
  EXPECT_EQ(cond(*t, 0), ZoneCond::not_wp);
  EXPECT_EQ(cond(*t, 7), ZoneCond::readonly);
  EXPECT_EQ(t->nr_active(), 0u);
}

TEST(NullZoned, ReadsPastTheWritePointerTransferNothingThere) {
  ZonedConfig c = eight();
  c.nr_conv = 1;
  auto t = table(c);
  ASSERT_EQ(t->write(kZone, 16, false, ok_xfer), BlkStatus::ok);
  std::vector<std::pair<uint64_t, uint64_t>> xfers;
  auto rec = [&](uint64_t s, uint64_t n) {
    xfers.emplace_back(s, n);
    return BlkStatus::ok;
  };
  uint64_t valid = 99;
  EXPECT_EQ(t->read(kZone, 8, rec, &valid), BlkStatus::ok);
  EXPECT_EQ(valid, 8u);
  EXPECT_EQ(t->read(kZone + 8, 16, rec, &valid), BlkStatus::ok);
  EXPECT_EQ(valid, 8u);
  EXPECT_EQ(t->read(kZone + 64, 8, rec, &valid), BlkStatus::ok);
  EXPECT_EQ(valid, 0u);
  EXPECT_EQ(t->read(100, 8, rec, &valid), BlkStatus::ok);
  EXPECT_EQ(valid, 8u) << "a conventional zone reads everywhere";
  EXPECT_EQ(xfers, (std::vector<std::pair<uint64_t, uint64_t>>{{kZone, 8}, {kZone + 8, 8}, {100, 8}}));
}

TEST(NullZoned, ReadOnlyAndOfflineZonesAsNullBlksFaultInjection) {
  ZonedConfig c = eight(/*max_open=*/3);
  c.nr_conv = 1;
  auto t = table(c);
  ASSERT_EQ(wr(*t, 2), BlkStatus::ok);
  ASSERT_EQ(t->nr_open(), 1u);
  ASSERT_TRUE(t->set_condition(2 * kZone, ZoneCond::readonly, nullptr));
  EXPECT_EQ(t->nr_open(), 0u) << "its open resource is freed";
  const Zone ro = t->report(2 * kZone, 1).at(0);
  EXPECT_EQ(ro.cond, ZoneCond::readonly);
  EXPECT_EQ(ro.wp, kZoneInvalidWp);
  uint64_t valid = 0;
  EXPECT_EQ(t->read(2 * kZone, 8, ok_xfer, &valid), BlkStatus::ok);
  EXPECT_EQ(valid, 8u);
  EXPECT_EQ(t->write(2 * kZone, 8, true, ok_xfer), BlkStatus::ioerr);
  EXPECT_EQ(t->manage(ZoneOp::reset, 2 * kZone, nullptr), BlkStatus::ioerr);
  ASSERT_TRUE(t->set_condition(3 * kZone, ZoneCond::offline, nullptr));
  EXPECT_EQ(t->read(3 * kZone, 8, ok_xfer, &valid), BlkStatus::ioerr);
  EXPECT_EQ(t->manage(ZoneOp::finish, 3 * kZone, nullptr), BlkStatus::ioerr);
  // Asked again, the zone comes back empty, its data discarded.
  uint64_t discarded = 0;
  ASSERT_TRUE(t->set_condition(2 * kZone, ZoneCond::readonly, [&](uint64_t s, uint64_t) { discarded = s; }));
  EXPECT_EQ(discarded, 2 * kZone);
  EXPECT_EQ(cond(*t, 2), ZoneCond::empty);
  EXPECT_EQ(wr(*t, 2), BlkStatus::ok);
  EXPECT_FALSE(t->set_condition(0, ZoneCond::readonly, nullptr)) << "a conventional zone";
  EXPECT_FALSE(t->set_condition(8 * kZone, ZoneCond::offline, nullptr)) << "out of range";
  EXPECT_FALSE(t->set_condition(kZone, ZoneCond::full, nullptr));
}

// Appends from several threads to one zone all land, each where it was
// told, none overlapping; the zone ends full.
TEST(NullZoned, ConcurrentAppendsLandWhereTheySayWithoutOverlap) {
  auto t = table(eight());
  constexpr int kThreads = 4, kEach = kZone / 8 / kThreads;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<std::thread> ths;
  for (int i = 0; i < kThreads; i++)
    ths.emplace_back([&, i] {
      for (int k = 0; k < kEach; k++) {
        uint64_t at = 0;
        ASSERT_EQ(t->write(kZone, 8, true, ok_xfer, &at), BlkStatus::ok);
        got[i].push_back(at);
      }
    });
  for (auto& th : ths) th.join();
  std::vector<uint64_t> all;
  for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  for (size_t k = 0; k < all.size(); k++) ASSERT_EQ(all[k], kZone + 8 * k);
  EXPECT_EQ(cond(*t, 1), ZoneCond::full);
}

}  // namespace
}  // namespace blkmq::nullb
