// null's zoned mode through the block layer: the zoned attributes and the
// report (blktests zbd/001, 002), reset and reset-all (zbd/003), a write
// across a zone boundary (zbd/004), deep queues of sequential writers
// under every scheduler (zbd/005), appends native and emulated, the zone
// resource statuses, and zone write plugging's error handling.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/device_test_util.h"
#include "support/watchdog.h"

namespace blkmq {
namespace {

using devtest::IoSlot;
using devtest::pattern;
using devtest::Waiter;

constexpr uint64_t kZoneSectors = 4u << 11;  // zone_size=4 (MiB)
constexpr uint64_t kZoneBytes = kZoneSectors << kSectorShift;

ParamMap zoned_params(ParamMap extra = {}) {
  ParamMap p{{"zoned", "1"}, {"size", "1024"}, {"zone_size", "4"}, {"memory_backed", "1"}};
  for (auto& [k, v] : extra) p[k] = v;
  return p;
}

std::unique_ptr<Device> make(const ParamMap& p) { return devtest::make_device("null", p); }

std::string attr(Queue& q, const char* path) {
  auto r = q.attr(path);
  EXPECT_TRUE(r) << path << ": " << r.status().message();
  return r ? *r : "";
}

Zone zone_at(Queue& q, uint64_t sector) {
  auto r = q.report_zones(sector, 1);
  EXPECT_TRUE(r && r->size() == 1);
  return r && !r->empty() ? r->front() : Zone{};
}

BlkStatus write_at(Queue& q, uint64_t byte_off, uint32_t len, unsigned seed) {
  auto data = pattern(len, seed);
  return q.write_sync(data.data(), byte_off, len);
}

// An append of `len` bytes of pattern `seed` to the zone at `zone_sector`;
// *at gets where it landed.
BlkStatus append_sync(Queue& q, uint64_t zone_sector, uint32_t len, unsigned seed, uint64_t* at) {
  auto data = pattern(len, seed);
  Waiter w;
  IoSlot s;
  s.prep(ReqOp::zone_append, zone_sector << kSectorShift, len, &w);
  std::memcpy(s.buf.data(), data.data(), len);
  q.submit_bio(&s.bio);
  EXPECT_TRUE(w.wait(1));
  *at = s.bio.sector;
  EXPECT_EQ(s.bio.op, ReqOp::zone_append);
  return s.bio.status;
}

// zbd/001 and 002: what the queue says agrees with the parameters, and the
// report covers the device, conventional zones first.
TEST(ZonedNull, AttributesAndReportAgreeWithTheParameters) {
  auto dev = make(zoned_params({{"zone_nr_conv", "2"}, {"zone_max_open", "8"}, {"zone_max_active", "10"},
                                {"zone_capacity", "3"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  EXPECT_EQ(attr(q, "queue/zoned"), "host-managed");
  EXPECT_EQ(attr(q, "queue/nr_zones"), "256");
  EXPECT_EQ(q.nr_zones(), 256u);
  EXPECT_EQ(attr(q, "queue/chunk_sectors"), std::to_string(kZoneSectors));
  EXPECT_EQ(attr(q, "queue/max_open_zones"), "8");
  EXPECT_EQ(attr(q, "queue/max_active_zones"), "10");
  EXPECT_EQ(attr(q, "queue/zone_write_granularity"), "512");
  // Native append up to a request (max_sectors 2560).
  EXPECT_EQ(attr(q, "queue/zone_append_max_bytes"), std::to_string(2560u * 512));
  auto r = q.report_zones(0, 1000);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 256u);
  for (unsigned i = 0; i < r->size(); i++) {
    const Zone& z = (*r)[i];
    EXPECT_EQ(z.start, i * kZoneSectors);
    EXPECT_EQ(z.len, kZoneSectors);
    if (i < 2) {
      EXPECT_EQ(z.type, ZoneType::conventional);
      EXPECT_EQ(z.cond, ZoneCond::not_wp);
    } else {
      EXPECT_EQ(z.type, ZoneType::seq_write_req);
      EXPECT_EQ(z.cond, ZoneCond::empty);
      EXPECT_EQ(z.wp, z.start);
      EXPECT_EQ(z.capacity, 3u << 11);
    }
  }
  // From the middle: the zone holding the sector first.
  auto mid = q.report_zones(10 * kZoneSectors + 5, 3);
  ASSERT_TRUE(mid);
  ASSERT_EQ(mid->size(), 3u);
  EXPECT_EQ(mid->front().start, 10 * kZoneSectors);
  EXPECT_FALSE(q.report_zones(256 * kZoneSectors, 1));
}

TEST(ZonedNull, ADeviceWithoutZonesRefusesZoneOperations) {
  auto dev = make({{"size", "64"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  EXPECT_EQ(attr(q, "queue/zoned"), "none");
  EXPECT_EQ(attr(q, "queue/nr_zones"), "0");
  EXPECT_EQ(attr(q, "queue/zone_append_max_bytes"), "0");
  EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::reset, 0), BlkStatus::notsupp);
  EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::reset_all, 0), BlkStatus::notsupp);
  auto r = q.report_zones(0, 1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), EOPNOTSUPP);
  uint64_t at = 0;
  EXPECT_EQ(append_sync(q, 0, 4096, 1, &at), BlkStatus::notsupp);
}

// More sequential zones than 128 and no limits: the kernel advertises its
// plug pool's size as the open limit.
TEST(ZonedNull, NoLimitsAndManyZonesAdvertise128OpenZones) {
  auto dev = make(zoned_params());
  ASSERT_TRUE(dev);
  EXPECT_EQ(attr(dev->queue(), "queue/max_open_zones"), "128");
  auto few = make(zoned_params({{"size", "256"}}));  // 64 zones
  ASSERT_TRUE(few);
  EXPECT_EQ(attr(few->queue(), "queue/max_open_zones"), "0");
}

// zbd/003: reset and reset-all bring the pointers back and the data goes.
TEST(ZonedNull, ResetAndResetAll) {
  auto dev = make(zoned_params({{"zone_nr_conv", "1"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  for (unsigned zno = 1; zno <= 3; zno++) ASSERT_EQ(write_at(q, zno * kZoneBytes, 64 << 10, zno), BlkStatus::ok);
  EXPECT_EQ(zone_at(q, 2 * kZoneSectors).wp, 2 * kZoneSectors + 128);
  EXPECT_EQ(zone_at(q, 2 * kZoneSectors).cond, ZoneCond::imp_open);
  EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::reset, 2 * kZoneSectors), BlkStatus::ok);
  Zone z = zone_at(q, 2 * kZoneSectors);
  EXPECT_EQ(z.wp, z.start);
  EXPECT_EQ(z.cond, ZoneCond::empty);
  EXPECT_EQ(zone_at(q, 3 * kZoneSectors).wp, 3 * kZoneSectors + 128);
  // Written again from its start after the reset.
  EXPECT_EQ(write_at(q, 2 * kZoneBytes, 4096, 9), BlkStatus::ok);
  EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::reset_all, 0), BlkStatus::ok);
  for (unsigned zno = 1; zno <= 3; zno++) EXPECT_EQ(zone_at(q, zno * kZoneSectors).cond, ZoneCond::empty);
  std::vector<unsigned char> got(4096, 0xaa);
  ASSERT_EQ(q.read_sync(got.data(), 3 * kZoneBytes, 4096), BlkStatus::ok);
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](unsigned char c) { return c == 0; }));
  // Not a zone's start; a conventional zone has no pointer to reset.
  EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::reset, 2 * kZoneSectors + 8), BlkStatus::inval);
  EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::reset, 0), BlkStatus::ioerr);
}

// Explicit open, close and finish through the queue.
TEST(ZonedNull, OpenCloseFinish) {
  auto dev = make(zoned_params());
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  const uint64_t z5 = 5 * kZoneSectors;
  EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::open, z5), BlkStatus::ok);
  EXPECT_EQ(zone_at(q, z5).cond, ZoneCond::exp_open);
  EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::close, z5), BlkStatus::ok);
  EXPECT_EQ(zone_at(q, z5).cond, ZoneCond::empty);  // nothing written: closing leaves it empty
  ASSERT_EQ(write_at(q, z5 << kSectorShift, 8192, 1), BlkStatus::ok);
  EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::close, z5), BlkStatus::ok);
  EXPECT_EQ(zone_at(q, z5).cond, ZoneCond::closed);
  EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::finish, z5), BlkStatus::ok);
  Zone z = zone_at(q, z5);
  EXPECT_EQ(z.cond, ZoneCond::full);
  // Full: the write plug knows, and a write there fails without reaching
  // the device; a reset makes it writable again.
  EXPECT_EQ(write_at(q, (z5 + 16) << kSectorShift, 4096, 2), BlkStatus::ioerr);
  EXPECT_EQ(q.zone_mgmt_sync(ZoneOp::reset, z5), BlkStatus::ok);
  EXPECT_EQ(write_at(q, z5 << kSectorShift, 4096, 3), BlkStatus::ok);
}

// zbd/004: a write across the end of a zone is split there; each part
// lands at its zone's pointer.
TEST(ZonedNull, WriteCrossingAZoneBoundaryIsSplit) {
  auto dev = make(zoned_params());
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  const uint64_t z2 = 2 * kZoneBytes;
  // Zone 2 written up to its last 4 KiB (in 1 MiB steps, within max_sectors).
  for (uint64_t off = 0; off < kZoneBytes - 4096; off += 1u << 20) {
    const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(1u << 20, kZoneBytes - 4096 - off));
    ASSERT_EQ(write_at(q, z2 + off, len, 1), BlkStatus::ok);
  }
  ASSERT_EQ(write_at(q, z2 + kZoneBytes - 4096, 8192, 2), BlkStatus::ok);
  EXPECT_EQ(zone_at(q, 2 * kZoneSectors).cond, ZoneCond::full);
  EXPECT_EQ(zone_at(q, 3 * kZoneSectors).wp, 3 * kZoneSectors + 8);
  auto want = pattern(8192, 2);
  std::vector<unsigned char> got(8192);
  ASSERT_EQ(q.read_sync(got.data(), z2 + kZoneBytes - 4096, 8192), BlkStatus::ok);
  EXPECT_EQ(got, want);
  // Crossing into a zone whose pointer is elsewhere: that part fails.
  ASSERT_EQ(write_at(q, 5 * kZoneBytes, 4096, 3), BlkStatus::ok);
  EXPECT_EQ(write_at(q, 5 * kZoneBytes - 4096, 8192, 4), BlkStatus::ioerr);
}

// Reads past a zone's write pointer return zeroes.
TEST(ZonedNull, ReadsPastTheWritePointerAreZero) {
  auto dev = make(zoned_params());
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_EQ(write_at(q, 4 * kZoneBytes, 4096, 7), BlkStatus::ok);
  std::vector<unsigned char> got(8192, 0xaa);
  ASSERT_EQ(q.read_sync(got.data(), 4 * kZoneBytes, 8192), BlkStatus::ok);
  auto want = pattern(4096, 7);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin()));
  EXPECT_TRUE(std::all_of(got.begin() + 4096, got.end(), [](unsigned char c) { return c == 0; }));
}

// zbd/005: many sequential writers at once on each of several zones, the
// whole zone's writes queued before any completes: zone write plugging
// issues them in order under every scheduler, none fails as unaligned, and
// the data reads back.
void deep_sequential_writes(const std::string& sched) {
  SCOPED_TRACE(sched);
  auto dev = make(zoned_params({{"irqmode", "2"}, {"completion_nsec", "20000"}, {"hw_queue_depth", "128"},
                                {"attr:queue/scheduler", sched}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  constexpr unsigned kZones = 4, kLen = 256 << 10, kPerZone = static_cast<unsigned>(kZoneBytes / kLen);
  Waiter w;
  std::vector<IoSlot> slots(kZones * kPerZone);
  for (unsigned i = 0; i < kPerZone; i++)
    for (unsigned z = 0; z < kZones; z++) {
      IoSlot& s = slots[z * kPerZone + i];
      s.prep(ReqOp::write, (8 + z) * kZoneBytes + uint64_t{i} * kLen, kLen, &w);
      auto p = pattern(kLen, z * 1000 + i);
      std::memcpy(s.buf.data(), p.data(), kLen);
      q.submit_bio(&s.bio);
    }
  ASSERT_TRUE(w.wait(static_cast<int>(slots.size())));
  EXPECT_EQ(w.errors(), 0) << static_cast<int>(w.last_error());
  for (auto& s : slots) EXPECT_EQ(s.ends.load(), 1);
  for (unsigned z = 0; z < kZones; z++) {
    EXPECT_EQ(zone_at(q, (8 + z) * kZoneSectors).cond, ZoneCond::full);
    for (unsigned i = 0; i < kPerZone; i++) {
      std::vector<unsigned char> got(kLen);
      ASSERT_EQ(q.read_sync(got.data(), (8 + z) * kZoneBytes + uint64_t{i} * kLen, kLen), BlkStatus::ok);
      ASSERT_EQ(got, pattern(kLen, z * 1000 + i)) << "zone " << 8 + z << " write " << i;
    }
  }
  // Every zone written full: no plug is left.
  EXPECT_EQ(attr(q, "zone_wplugs"), "");
}

TEST(ZonedNull, DeepSequentialWritersVerifyUnderEveryScheduler) {
  for (const char* s : {"none", "mq-deadline", "kyber", "bfq"}) deep_sequential_writes(s);
}

// Appends from many threads to one zone: each lands where it says,
// nothing overlaps, the data is there. Native (null's) and emulated (the
// core's, zone_append_max_sectors=0).
void concurrent_appends(const char* max_sectors) {
  SCOPED_TRACE(std::string("zone_append_max_sectors=") + max_sectors);
  auto dev = make(zoned_params({{"zone_append_max_sectors", max_sectors}, {"irqmode", "1"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  constexpr unsigned kThreads = 4, kEach = 64, kLen = 8192;
  const uint64_t zone = 7 * kZoneSectors;
  std::vector<std::vector<std::pair<uint64_t, unsigned>>> landed(kThreads);
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      for (unsigned i = 0; i < kEach; i++) {
        uint64_t at = 0;
        const unsigned seed = t * 1000 + i;
        if (append_sync(q, zone, kLen, seed, &at) == BlkStatus::ok) landed[t].emplace_back(at, seed);
      }
    });
  for (auto& t : ts) t.join();
  std::set<uint64_t> starts;
  for (auto& v : landed) {
    ASSERT_EQ(v.size(), kEach);
    for (auto [at, seed] : v) {
      EXPECT_TRUE(starts.insert(at).second) << "two appends at " << at;
      EXPECT_GE(at, zone);
      EXPECT_LT(at, zone + kZoneSectors);
      EXPECT_EQ((at - zone) % (kLen >> kSectorShift), 0u);
      std::vector<unsigned char> got(kLen);
      ASSERT_EQ(q.read_sync(got.data(), at << kSectorShift, kLen), BlkStatus::ok);
      EXPECT_EQ(got, pattern(kLen, seed)) << "append at " << at;
    }
  }
  EXPECT_EQ(zone_at(q, zone).wp, zone + kThreads * kEach * (kLen >> kSectorShift));
}

TEST(ZonedNull, ConcurrentAppendsLandWhereTheySayNative) { concurrent_appends("4294967295"); }
TEST(ZonedNull, ConcurrentAppendsLandWhereTheySayEmulated) { concurrent_appends("0"); }

// The plugs' lock-free paths under contention: 4 threads keep 8 emulated
// appends each in flight over 3 zones, completed from null's timer thread,
// so takers, waiters and completions race on the same plugs. Each append
// lands once, where it says, with its data, and the zones fill exactly.
TEST(ZonedNull, EmulatedAppendsFromManyThreadsAtDepth) {
  test::Watchdog wd("ZonedNull.EmulatedAppendsFromManyThreadsAtDepth", std::chrono::seconds(120));
  auto dev = make(zoned_params({{"zone_append_max_sectors", "0"}, {"irqmode", "2"}, {"completion_nsec", "20000"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  constexpr unsigned kThreads = 4, kDepth = 8, kLen = 16384;
  constexpr unsigned kPerThread = 3 * static_cast<unsigned>(kZoneBytes / kLen) / kThreads;  // fills the 3 zones
  std::vector<std::vector<std::pair<uint64_t, unsigned>>> landed(kThreads);
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      std::vector<IoSlot> slots(kDepth);
      for (unsigned done = 0; done < kPerThread; done += kDepth) {
        Waiter w;
        for (unsigned i = 0; i < kDepth; i++) {
          const unsigned seed = t * 100000 + done + i;
          slots[i].prep(ReqOp::zone_append, (20 + seed % 3) * kZoneBytes, kLen, &w);
          auto p = pattern(kLen, seed);
          std::memcpy(slots[i].buf.data(), p.data(), kLen);
          q.submit_bio(&slots[i].bio);
        }
        if (!w.wait(kDepth)) std::abort();
        for (unsigned i = 0; i < kDepth; i++) {
          const unsigned seed = t * 100000 + done + i;
          if (slots[i].bio.status == BlkStatus::ok) landed[t].emplace_back(slots[i].bio.sector, seed);
          EXPECT_EQ(slots[i].ends.exchange(0), 1);  // once per use of the slot
        }
      }
    });
  for (auto& t : ts) t.join();
  std::set<uint64_t> starts;
  size_t total = 0;
  for (auto& v : landed) {
    total += v.size();
    for (auto [at, seed] : v) {
      EXPECT_TRUE(starts.insert(at).second) << "two appends at " << at;
      EXPECT_EQ((at >> 13), 20 + seed % 3) << "append " << seed << " left its zone";
      std::vector<unsigned char> got(kLen);
      ASSERT_EQ(q.read_sync(got.data(), at << kSectorShift, kLen), BlkStatus::ok);
      ASSERT_EQ(got, pattern(kLen, seed)) << "append at " << at;
    }
  }
  // Each zone took what was sent to it, up to its size; the rest found it
  // full and failed.
  EXPECT_GT(total, kThreads * kPerThread * 9 / 10);
}

// The plugs' lock-free take and give-back while plugs are pooled and
// reused for other zones: 4 threads each fill 6 zones of their own with
// sequential writes 4 deep (3 of each 4 wait in the plug), completed from
// null's timer thread. A zone that fills gives its plug back to the pool,
// and the next zone takes it, while the other threads take and give back
// theirs without the lock. Every write lands once with its data, every
// zone ends full, and no plug is left.
TEST(ZonedNull, PlugsReusedAcrossZonesByManyWriters) {
  test::Watchdog wd("ZonedNull.PlugsReusedAcrossZonesByManyWriters", std::chrono::seconds(120));
  auto dev = make(zoned_params({{"irqmode", "2"}, {"completion_nsec", "20000"}, {"zone_max_open", "2"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  constexpr unsigned kThreads = 4, kZonesEach = 6, kDepth = 4, kLen = 128 << 10;
  constexpr unsigned kPerZone = static_cast<unsigned>(kZoneBytes / kLen);
  auto zone_of = [](unsigned t, unsigned k) { return 40 + k * kThreads + t; };
  auto seed_of = [](unsigned zone, unsigned i) { return zone * 1000 + i; };
  std::atomic<int> failed{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      std::vector<IoSlot> slots(kDepth);
      for (unsigned k = 0; k < kZonesEach; k++)
        for (unsigned i = 0; i < kPerZone; i += kDepth) {
          Waiter w;
          for (unsigned d = 0; d < kDepth; d++) {
            slots[d].prep(ReqOp::write, zone_of(t, k) * kZoneBytes + uint64_t{i + d} * kLen, kLen, &w);
            auto p = pattern(kLen, seed_of(zone_of(t, k), i + d));
            std::memcpy(slots[d].buf.data(), p.data(), kLen);
            q.submit_bio(&slots[d].bio);
          }
          if (!w.wait(kDepth)) std::abort();
          for (auto& s : slots) {
            if (s.bio.status != BlkStatus::ok) failed++;
            if (s.ends.exchange(0) != 1) failed++;
          }
        }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(failed.load(), 0);
  for (unsigned t = 0; t < kThreads; t++)
    for (unsigned k = 0; k < kZonesEach; k++) {
      const unsigned z = zone_of(t, k);
      EXPECT_EQ(zone_at(q, z * kZoneSectors).cond, ZoneCond::full) << "zone " << z;
      for (unsigned i = 0; i < kPerZone; i++) {
        std::vector<unsigned char> got(kLen);
        ASSERT_EQ(q.read_sync(got.data(), z * kZoneBytes + uint64_t{i} * kLen, kLen), BlkStatus::ok);
        ASSERT_EQ(got, pattern(kLen, seed_of(z, i))) << "zone " << z << " write " << i;
      }
    }
  EXPECT_EQ(attr(q, "zone_wplugs"), "");
}

TEST(ZonedNull, BadAppendsAreRefused) {
  auto dev = make(zoned_params({{"zone_nr_conv", "1"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  uint64_t at = 0;
  EXPECT_EQ(append_sync(q, 2 * kZoneSectors + 8, 4096, 1, &at), BlkStatus::ioerr);  // not a zone's start
  EXPECT_EQ(append_sync(q, 0, 4096, 1, &at), BlkStatus::ioerr);                     // conventional
  EXPECT_EQ(append_sync(q, 2 * kZoneSectors, 2u << 20, 1, &at), BlkStatus::ioerr);  // beyond one request
  EXPECT_EQ(zone_at(q, 2 * kZoneSectors).cond, ZoneCond::empty);
}

// The open and active limits end writes with the zone resource statuses.
TEST(ZonedNull, TheActiveLimitReturnsItsStatus) {
  auto dev = make(zoned_params({{"zone_max_open", "2"}, {"zone_max_active", "2"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_EQ(write_at(q, 1 * kZoneBytes, 4096, 1), BlkStatus::ok);
  ASSERT_EQ(write_at(q, 2 * kZoneBytes, 4096, 1), BlkStatus::ok);
  EXPECT_EQ(write_at(q, 3 * kZoneBytes, 4096, 1), BlkStatus::zone_active_resource);
  // Finishing one makes room. The failed write left zone 3's pointer
  // unknown to its plug, as the kernel's: writes fail until a report.
  ASSERT_EQ(q.zone_mgmt_sync(ZoneOp::finish, 1 * kZoneSectors), BlkStatus::ok);
  EXPECT_EQ(write_at(q, 3 * kZoneBytes, 4096, 1), BlkStatus::ioerr);
  EXPECT_EQ(zone_at(q, 3 * kZoneSectors).cond, ZoneCond::empty);
  EXPECT_EQ(write_at(q, 3 * kZoneBytes, 4096, 1), BlkStatus::ok);
}

TEST(ZonedNull, TheOpenLimitClosesAnImplicitlyOpenZone) {
  auto dev = make(zoned_params({{"zone_max_open", "2"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_EQ(write_at(q, 1 * kZoneBytes, 4096, 1), BlkStatus::ok);
  ASSERT_EQ(write_at(q, 2 * kZoneBytes, 4096, 1), BlkStatus::ok);
  ASSERT_EQ(write_at(q, 3 * kZoneBytes, 4096, 1), BlkStatus::ok);
  EXPECT_EQ(zone_at(q, 1 * kZoneSectors).cond, ZoneCond::closed);  // round-robin from the first
  EXPECT_EQ(zone_at(q, 3 * kZoneSectors).cond, ZoneCond::imp_open);
  // With two explicitly open, there is nothing to close: the open status.
  auto two = make(zoned_params({{"zone_max_open", "2"}}));
  ASSERT_TRUE(two);
  Queue& q2 = two->queue();
  ASSERT_EQ(q2.zone_mgmt_sync(ZoneOp::open, 1 * kZoneSectors), BlkStatus::ok);
  ASSERT_EQ(q2.zone_mgmt_sync(ZoneOp::open, 2 * kZoneSectors), BlkStatus::ok);
  EXPECT_EQ(write_at(q2, 3 * kZoneBytes, 4096, 1), BlkStatus::zone_open_resource);
}

// A write the device refuses marks its zone: what waits in the plug fails,
// and so does every later write until a report tells the pointer again.
TEST(ZonedNull, AFailedWriteAbortsThePlugUntilAReport) {
  auto dev = make(zoned_params({{"irqmode", "2"}, {"completion_nsec", "2000000"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  const uint64_t z = 6 * kZoneBytes;
  // A zone with no plug is taken at the first write's word: this one is
  // not at the pointer, so the device fails it, with three waiting behind.
  Waiter w;
  std::vector<IoSlot> slots(4);
  for (unsigned i = 0; i < slots.size(); i++) {
    slots[i].prep(ReqOp::write, z + 4096 * (i + 1), 4096, &w);
    q.submit_bio(&slots[i].bio);
  }
  ASSERT_TRUE(w.wait(4));
  EXPECT_EQ(w.errors(), 4);
  for (auto& s : slots) EXPECT_EQ(s.ends.load(), 1);
  EXPECT_EQ(attr(q, "zone_wplugs"), "6 0x2 1 16 0\n");  // the pointer needs an update; nothing waits
  EXPECT_EQ(write_at(q, z, 4096, 1), BlkStatus::ioerr);  // at the real pointer, still refused
  ASSERT_EQ(zone_at(q, 6 * kZoneSectors).wp, 6 * kZoneSectors);
  // The report told it: the plug is gone, the write goes.
  EXPECT_EQ(attr(q, "zone_wplugs"), "");
  EXPECT_EQ(write_at(q, z, 4096, 1), BlkStatus::ok);
}

// Writes waiting in a plug hold no tag: reads keep the device's depth.
TEST(ZonedNull, PluggedWritesHoldNoTag) {
  auto dev = make(zoned_params({{"irqmode", "2"}, {"completion_nsec", "50000000"}, {"hw_queue_depth", "4"},
                                {"attr:queue/scheduler", "none"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  Waiter w;
  std::vector<IoSlot> slots(32);
  for (unsigned i = 0; i < slots.size(); i++) {
    slots[i].prep(ReqOp::write, 9 * kZoneBytes + 4096 * i, 4096, &w);
    q.submit_bio(&slots[i].bio);
  }
  // One write is a request, the rest wait in the plug as bios: the plug
  // is held, and one write is in flight (each takes 50 ms at the device,
  // ample time to look on a loaded machine).
  const std::string l = attr(q, "zone_wplugs");
  EXPECT_EQ(l.substr(0, 6), "9 0x1 ") << l;
  unsigned long long in_reads = 0, in_writes = 0;
  ASSERT_EQ(std::sscanf(attr(q, "inflight").c_str(), "%llu %llu", &in_reads, &in_writes), 2);
  EXPECT_LE(in_writes, 1u);
  std::vector<unsigned char> buf(4096);
  EXPECT_EQ(q.read_sync(buf.data(), 0, 4096), BlkStatus::ok);
  ASSERT_TRUE(w.wait(32));
  EXPECT_EQ(w.errors(), 0);
}

// null_blk's configfs fault injection through the queue: a zone made
// read-only takes no writes and reads on; one made offline takes neither;
// asked again, each comes back empty.
TEST(ZonedNull, ReadOnlyAndOfflineZonesThroughTheDevice) {
  auto dev = make(zoned_params());
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_EQ(write_at(q, 3 * kZoneBytes, 4096, 1), BlkStatus::ok);
  ASSERT_TRUE(q.set_attr("device/zone_readonly", std::to_string(3 * kZoneSectors)));
  Zone z = zone_at(q, 3 * kZoneSectors);
  EXPECT_EQ(z.cond, ZoneCond::readonly);
  EXPECT_EQ(z.wp, kZoneInvalidWp);
  std::vector<unsigned char> buf(4096);
  EXPECT_EQ(q.read_sync(buf.data(), 3 * kZoneBytes, 4096), BlkStatus::ok);
  EXPECT_EQ(write_at(q, 3 * kZoneBytes, 4096, 2), BlkStatus::ioerr);
  ASSERT_TRUE(q.set_attr("device/zone_offline", std::to_string(4 * kZoneSectors)));
  EXPECT_EQ(zone_at(q, 4 * kZoneSectors).cond, ZoneCond::offline);
  EXPECT_EQ(q.read_sync(buf.data(), 4 * kZoneBytes, 4096), BlkStatus::ioerr);
  EXPECT_EQ(write_at(q, 4 * kZoneBytes, 4096, 3), BlkStatus::ioerr);
  // Asked again: empty, and writable from its start once reported.
  ASSERT_TRUE(q.set_attr("device/zone_offline", std::to_string(4 * kZoneSectors)));
  EXPECT_EQ(zone_at(q, 4 * kZoneSectors).cond, ZoneCond::empty);
  EXPECT_EQ(write_at(q, 4 * kZoneBytes, 4096, 4), BlkStatus::ok);
  // Refusals: a sector past the end, not a number.
  EXPECT_FALSE(q.set_attr("device/zone_readonly", std::to_string(256 * kZoneSectors)));
  EXPECT_FALSE(q.set_attr("device/zone_readonly", "zone three"));
}

// zone_capacity: a zone takes writes up to its capacity and is then full;
// zone_full: the sequential zones start full and take writes after a reset.
TEST(ZonedNull, CapacityAndZonesStartingFull) {
  auto dev = make(zoned_params({{"zone_capacity", "1"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_EQ(write_at(q, 2 * kZoneBytes, 1u << 20, 1), BlkStatus::ok);
  EXPECT_EQ(zone_at(q, 2 * kZoneSectors).cond, ZoneCond::full);
  EXPECT_EQ(write_at(q, 2 * kZoneBytes + (1u << 20), 4096, 2), BlkStatus::ioerr);
  auto full = make(zoned_params({{"zone_full", "1"}, {"zone_nr_conv", "1"}}));
  ASSERT_TRUE(full);
  Queue& f = full->queue();
  EXPECT_EQ(zone_at(f, 0).cond, ZoneCond::not_wp);
  EXPECT_EQ(zone_at(f, kZoneSectors).cond, ZoneCond::full);
  EXPECT_EQ(write_at(f, kZoneBytes, 4096, 1), BlkStatus::ioerr);
  EXPECT_EQ(f.zone_mgmt_sync(ZoneOp::reset, kZoneSectors), BlkStatus::ok);
  EXPECT_EQ(write_at(f, kZoneBytes, 4096, 1), BlkStatus::ok);
}

// zbd/012: writes plugged in their zones while requests are requeued, the
// queue is frozen and its scheduler switched under them (a hang in the
// kernel's 6.10..6.12 plugging). Bounded by a watchdog.
TEST(ZonedNull, RequeueFreezeAndSchedulerSwitchWithPluggedZonesDoNotHang) {
  test::Watchdog wd("ZonedNull.RequeueFreezeAndSchedulerSwitch", std::chrono::seconds(120));
  auto dev = make(zoned_params({{"irqmode", "2"}, {"completion_nsec", "20000"}, {"requeue", "1,10,0,-1"},
                                {"hw_queue_depth", "16"}}));
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  constexpr unsigned kWriters = 2, kZonesEach = 12, kLen = 256 << 10;
  constexpr unsigned kPerZone = static_cast<unsigned>(kZoneBytes / kLen);
  std::atomic<bool> done{false};
  std::atomic<int> errors{0}, twice{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < kWriters; t++)
    ts.emplace_back([&, t] {
      for (unsigned k = 0; k < kZonesEach; k++) {
        const uint64_t zone = (16 + t * kZonesEach + k) * kZoneBytes;
        Waiter w;
        std::vector<IoSlot> slots(kPerZone);
        for (unsigned i = 0; i < kPerZone; i++) {
          slots[i].prep(ReqOp::write, zone + uint64_t{i} * kLen, kLen, &w);
          q.submit_bio(&slots[i].bio);
        }
        if (!w.wait(kPerZone, std::chrono::seconds(60))) std::abort();
        errors += w.errors();
        for (auto& sl : slots) twice += sl.ends.load() != 1;
      }
    });
  std::thread switcher([&] {
    const char* scheds[] = {"mq-deadline", "kyber", "bfq", "none"};
    for (unsigned i = 0; !done.load(); i++) {
      EXPECT_TRUE(q.set_attr("queue/scheduler", scheds[i % 4]));
      q.freeze();
      q.unfreeze();
    }
  });
  for (auto& t : ts) t.join();
  done = true;
  switcher.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(twice.load(), 0);
  for (unsigned z = 16; z < 16 + kWriters * kZonesEach; z++)
    EXPECT_EQ(zone_at(q, z * kZoneSectors).cond, ZoneCond::full) << "zone " << z;
  EXPECT_EQ(attr(q, "zone_wplugs"), "");
}

}  // namespace
}  // namespace blkmq
