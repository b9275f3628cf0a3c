// io.cost (src/qos/iocost.cc): the files in the kernel's formats, the
// issue's figure (two saturating groups at weights 100 and 300 share the
// device's time 25:75), vrate moving up while groups wait on an idle
// device and down while completions miss the latency target, io.stat's
// keys, and groups removed while their bios wait, under TSan and ASan.
//
// The sharing runs on real threads and time: a group's submitters sleep in
// throttle until the device's vtime has room, and vtime is the queue's
// clock times vrate. With vrate pinned (min=max=100) and a model of 1000
// IOPS the split is arithmetic: each group's usage over any stretch is its
// share of the elapsed vtime, whatever the machine's speed, as long as
// both groups always wait (4 submitters each against 1000 IOPS).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "qos/iocost.h"
#include "qos/rq_qos.h"
#include "support/device_test_util.h"
#include "support/in_group.h"
#include "support/stub_driver.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

std::string attr(Queue& q, const std::string& name) {
  auto r = q.attr(name);
  EXPECT_TRUE(r.ok()) << name << ": " << r.status().message();
  return r.ok() ? *r : "";
}

Status set(Queue& q, const std::string& name, const std::string& v) { return q.set_attr(name, v); }

IocostInfo info(Queue& q, const std::string& path) {
  IocostInfo i;
  EXPECT_TRUE(iocost_info(&q, path, &i).ok());
  return i;
}

std::string dev(Queue& q) { return std::to_string(Queue::kDevMajor) + ":" + std::to_string(q.dev_minor()); }

std::unique_ptr<Device> null_device(const std::string& completion_nsec = "0") {
  ParamMap p{{"irqmode", completion_nsec == "0" ? "0" : "2"}, {"size", "1024"}};
  if (completion_nsec != "0") p["completion_nsec"] = completion_nsec;
  return devtest::make_device("null", p);
}

// Closed-loop random 4 KiB readers in a group, each one bio at a time.
class Readers {
 public:
  Readers(Queue& q, const std::string& group, int n) {
    for (int i = 0; i < n; i++)
      th_.emplace_back([this, &q, group, i] {
        InGroup in(group);
        BioTracker t;
        uint64_t seed = 0x9e3779b97f4a7c15ull * uint64_t(i + 1);
        for (int k = 0; !stop_.load(); k++) {
          seed = seed * 6364136223846793005ull + 1442695040888963407ull;
          auto s = t.make(ReqOp::read, ((seed >> 20) % (1u << 18)) << 12, 4096);
          q.submit_bio(&s->bio);
          if (!t.wait_for(k + 1)) {
            failed_.fetch_add(1);
            return;
          }
          done_.fetch_add(1);
        }
      });
  }
  ~Readers() { stop(); }
  void stop() {
    stop_.store(true);
    for (auto& t : th_)
      if (t.joinable()) t.join();
  }
  uint64_t done() const { return done_.load(); }
  int failed() const { return failed_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> done_{0};
  std::atomic<int> failed_{0};
  std::vector<std::thread> th_;
};

void remove_groups(std::initializer_list<const char*> paths) {
  for (const char* p : paths) (void)io_group_remove(p);
}

TEST(IocostFiles, DefaultsReadLikeTheKernelsForTheDeviceClass) {
  auto d = null_device();
  ASSERT_NE(d, nullptr);
  Queue& q = d->queue();
  // Not rotational, depth > 1: the kernel's AUTOP_SSD_DFL.
  EXPECT_EQ(attr(q, "cgroup/io.cost.qos"), dev(q) +
                                                " enable=0 ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000 "
                                                "min=1.00 max=10000.00");
  EXPECT_EQ(attr(q, "cgroup/io.cost.model"), dev(q) +
                                                  " ctrl=auto model=linear rbps=488636629 rseqiops=8932 "
                                                  "rrandiops=8518 wbps=427891549 wseqiops=28755 wrandiops=21940");
  const auto names = q.attr_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "cgroup/io.cost.qos"), names.end());
  const auto chain = rq_qos_list(&q);
  EXPECT_EQ(std::find(chain.begin(), chain.end(), "cost"), chain.end()) << "io.cost is added only when written";
}

TEST(IocostFiles, QosWritesAreTheUsersAndBadOnesChangeNothing) {
  auto d = null_device();
  ASSERT_NE(d, nullptr);
  Queue& q = d->queue();
  ASSERT_TRUE(set(q, "cgroup/io.cost.qos", dev(q) + " enable=1 rpct=95.00 rlat=5000 min=50 max=150.5").ok());
  const auto chain = rq_qos_list(&q);
  EXPECT_NE(std::find(chain.begin(), chain.end(), "cost"), chain.end());
  const std::string want = dev(q) +
                           " enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=0.00 wlat=25000 min=50.00 max=150.50";
  EXPECT_EQ(attr(q, "cgroup/io.cost.qos"), want);
  for (const char* bad : {"enable=2", "rpct=101", "rlat=0", "min=200 max=100", "bogus=1", "rpct=9.999", "ctrl=x", ""})
    EXPECT_EQ(set(q, "cgroup/io.cost.qos", bad).code(), EINVAL) << bad;
  EXPECT_EQ(attr(q, "cgroup/io.cost.qos"), want);
  // The period follows the looser target: 10x... 2x at the 95th percentile.
  EXPECT_EQ(info(q, "/").period_ns, 2 * 25000 * 1000ull);
  ASSERT_TRUE(set(q, "cgroup/io.cost.qos", "ctrl=auto").ok());
  EXPECT_EQ(attr(q, "cgroup/io.cost.qos"), dev(q) +
                                                " enable=1 ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000 "
                                                "min=1.00 max=10000.00");
  ASSERT_TRUE(set(q, "cgroup/io.cost.model", "rrandiops=1000 wbps=1000000").ok());
  EXPECT_EQ(attr(q, "cgroup/io.cost.model"), dev(q) +
                                                  " ctrl=user model=linear rbps=488636629 rseqiops=8932 "
                                                  "rrandiops=1000 wbps=1000000 wseqiops=28755 wrandiops=21940");
  EXPECT_EQ(set(q, "cgroup/io.cost.model", "model=quadratic").code(), EINVAL);
  ASSERT_TRUE(set(q, "cgroup/io.cost.qos", "enable=0").ok());
  EXPECT_FALSE(info(q, "/").enabled);
}

TEST(IocostFiles, WeightIsPerGroupWithAPerDeviceOverride) {
  auto d = null_device();
  ASSERT_NE(d, nullptr);
  Queue& q = d->queue();
  EXPECT_EQ(set(q, "cgroup/io.weight", "200").code(), EINVAL) << "the root has no io.weight";
  ASSERT_TRUE(set(q, "cgroup/w/io.weight", "default 300").ok());
  EXPECT_EQ(attr(q, "cgroup/w/io.weight"), "default 300");
  EXPECT_EQ(set(q, "cgroup/w/io.weight", dev(q) + " 50").code(), EOPNOTSUPP) << "needs io.cost on the device";
  ASSERT_TRUE(set(q, "cgroup/io.cost.qos", "enable=1").ok());
  ASSERT_TRUE(set(q, "cgroup/w/io.weight", dev(q) + " 50").ok());
  EXPECT_EQ(attr(q, "cgroup/w/io.weight"), "default 300\n" + dev(q) + " 50");
  ASSERT_TRUE(set(q, "cgroup/w/io.weight", dev(q) + " default").ok());
  EXPECT_EQ(attr(q, "cgroup/w/io.weight"), "default 300");
  for (const char* bad : {"0", "10001", "default", "x 5", "default -1"})
    EXPECT_EQ(set(q, "cgroup/w/io.weight", bad).code(), EINVAL) << bad;
  EXPECT_EQ(attr(q, "cgroup/w/io.weight"), "default 300");
  d.reset();
  remove_groups({"/w"});
}

// The figure: weights 100 and 300, both saturating, share device
// time 25:75 (+-5 %). vrate is pinned at 100 % so the model's 1000 IOPS is
// the device; each group's usage over the measured stretch is compared.
TEST(IocostShares, WeightsOf100And300ShareDeviceTime25To75) {
  Watchdog w("IocostShares.WeightsOf100And300ShareDeviceTime25To75", std::chrono::seconds(120));
  auto d = null_device();
  ASSERT_NE(d, nullptr);
  Queue& q = d->queue();
  ASSERT_TRUE(set(q, "cgroup/io.cost.model", "rbps=100000000000 rseqiops=1000 rrandiops=1000").ok());
  ASSERT_TRUE(set(q, "cgroup/io.cost.qos", "enable=1 min=100 max=100").ok());
  ASSERT_TRUE(set(q, "cgroup/a/io.weight", "100").ok());
  ASSERT_TRUE(set(q, "cgroup/b/io.weight", "300").ok());
  {
    Readers a(q, "/a", 4), b(q, "/b", 4);
    ASSERT_TRUE(eventually([&] { return info(q, "/a").active && info(q, "/b").active; }, 10000));
    ASSERT_TRUE(eventually([&] { return info(q, "/").periods >= 3; }, 10000));  // past the start's margin
    const uint64_t ua = info(q, "/a").usage_ns, ub = info(q, "/b").usage_ns;
    const uint64_t da = a.done(), db = b.done();
    const uint64_t p0 = info(q, "/").periods;
    ASSERT_TRUE(eventually([&] { return info(q, "/").periods >= p0 + 16; }, 20000));  // 16 x 50 ms
    const double sa = double(info(q, "/a").usage_ns - ua), sb = double(info(q, "/b").usage_ns - ub);
    const double ios_a = double(a.done() - da), ios_b = double(b.done() - db);
    EXPECT_EQ(info(q, "/a").hweight, 65536u / 4);
    EXPECT_EQ(info(q, "/b").hweight, 65536u * 3 / 4);
    EXPECT_NEAR(sb / (sa + sb), 0.75, 0.05) << "usage a " << sa << " b " << sb;
    std::printf("io.cost 100:300: usage share of b %.4f, I/O share %.4f (%.0f + %.0f I/Os)\n", sb / (sa + sb),
                ios_b / (ios_a + ios_b), ios_a, ios_b);
    EXPECT_NEAR(ios_b / (ios_a + ios_b), 0.75, 0.05) << "I/Os a " << ios_a << " b " << ios_b;
    // 1000 IOPS at 100 %: a group waits, and the pair does not exceed it.
    EXPECT_GT(info(q, "/a").wait_ns, 0u);
    a.stop();
    b.stop();
    EXPECT_EQ(a.failed() + b.failed(), 0);
  }
  const std::string st = attr(q, "cgroup/a/io.stat");
  EXPECT_NE(st.find(" cost.usage="), std::string::npos) << st;
  EXPECT_NE(attr(q, "cgroup/io.stat").find(" cost.vrate=100.00"), std::string::npos) << attr(q, "cgroup/io.stat");
  d.reset();
  remove_groups({"/a", "/b"});
}

// Groups wait while the device (null, instant) keeps every target: a
// shortage with nothing missed, so busy_level goes below 0 and vrate up.
TEST(IocostVrate, RisesWhileGroupsWaitOnADeviceWithRoom) {
  Watchdog w("IocostVrate.RisesWhileGroupsWaitOnADeviceWithRoom", std::chrono::seconds(120));
  auto d = null_device();
  ASSERT_NE(d, nullptr);
  Queue& q = d->queue();
  ASSERT_TRUE(set(q, "cgroup/io.cost.model", "rbps=100000000000 rseqiops=500 rrandiops=500").ok());
  ASSERT_TRUE(set(q, "cgroup/io.cost.qos", "enable=1").ok());
  Readers a(q, "/up", 2);
  ASSERT_TRUE(eventually([&] { return info(q, "/").vrate_ppm > 1'100'000; }, 30000))
      << "vrate " << info(q, "/").vrate_ppm << " busy " << info(q, "/").busy_level;
  EXPECT_LT(info(q, "/").busy_level, 0);
  a.stop();
  EXPECT_EQ(a.failed(), 0);
  d.reset();
  remove_groups({"/up"});
}

// Every read takes 3 ms against a 1 ms target at the 50th percentile:
// each period misses, busy_level climbs and vrate falls.
TEST(IocostVrate, FallsWhileCompletionsMissTheLatencyTarget) {
  Watchdog w("IocostVrate.FallsWhileCompletionsMissTheLatencyTarget", std::chrono::seconds(120));
  auto d = null_device("3000000");
  ASSERT_NE(d, nullptr);
  Queue& q = d->queue();
  ASSERT_TRUE(set(q, "cgroup/io.cost.qos", "enable=1 rpct=50 rlat=1000 wpct=50 wlat=1000").ok());
  Readers a(q, "/down", 4);
  ASSERT_TRUE(eventually([&] { return info(q, "/").vrate_ppm < 950'000; }, 30000))
      << "vrate " << info(q, "/").vrate_ppm << " busy " << info(q, "/").busy_level;
  EXPECT_GT(info(q, "/").busy_level, 0);
  a.stop();
  EXPECT_EQ(a.failed(), 0);
  d.reset();
  remove_groups({"/down"});
}

// A group idle for a period leaves the tree: the other's share becomes
// the whole device.
TEST(IocostShares, AnIdleGroupsShareGoesToTheOthers) {
  Watchdog w("IocostShares.AnIdleGroupsShareGoesToTheOthers", std::chrono::seconds(120));
  auto d = null_device();
  ASSERT_NE(d, nullptr);
  Queue& q = d->queue();
  ASSERT_TRUE(set(q, "cgroup/io.cost.model", "rbps=100000000000 rseqiops=1000 rrandiops=1000").ok());
  ASSERT_TRUE(set(q, "cgroup/io.cost.qos", "enable=1 min=100 max=100").ok());
  // The groups exist before their readers do, so info() finds them.
  ASSERT_TRUE(set(q, "cgroup/idle-a/io.weight", "100").ok());
  ASSERT_TRUE(set(q, "cgroup/idle-b/io.weight", "100").ok());
  {
    Readers a(q, "/idle-a", 2), b(q, "/idle-b", 2);
    ASSERT_TRUE(eventually([&] { return info(q, "/idle-a").hweight == 65536u / 2; }, 10000));
    a.stop();
    ASSERT_TRUE(eventually([&] { return !info(q, "/idle-a").active; }, 10000));
    EXPECT_EQ(info(q, "/idle-b").hweight, 65536u);
    b.stop();
  }
  d.reset();
  remove_groups({"/idle-a", "/idle-b"});
}

// Submitters asleep in throttle while their groups are removed, io.cost is
// switched off and on and weights change; then the device goes. Every bio
// ends once. Real threads, for TSan and ASan.
TEST(IocostThreads, GroupsRemovedAndControlToggledWhileBiosWait) {
  Watchdog w("IocostThreads.GroupsRemovedAndControlToggledWhileBiosWait", std::chrono::seconds(120));
  auto d = null_device("20000");
  ASSERT_NE(d, nullptr);
  Queue& q = d->queue();
  ASSERT_TRUE(set(q, "cgroup/io.cost.model", "rbps=100000000000 rseqiops=400 rrandiops=400").ok());
  ASSERT_TRUE(set(q, "cgroup/io.cost.qos", "enable=1").ok());
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0};
  std::vector<std::thread> th;
  for (int i = 0; i < 3; i++)
    th.emplace_back([&, i] {
      BioTracker t;
      int n = 0;
      for (int r = 0; !stop.load(); r++) {
        const std::string path = "/toggle/t" + std::to_string(i) + "/r" + std::to_string(r % 2);
        std::vector<std::unique_ptr<BioTracker::Slot>> s;
        {
          InGroup in(path);
          for (int b = 0; b < 4; b++) {
            s.push_back(t.make(ReqOp::read, uint64_t(b + 8 * i) << 24, 4096));
            q.submit_bio(&s.back()->bio);
            n++;
          }
        }
        (void)io_group_remove(path);  // EBUSY is fine: another round is in it
        if (!t.wait_for(n)) failed.fetch_add(1);
      }
      if (t.doubles.load()) failed.fetch_add(1);
    });
  for (int k = 0; k < 20; k++) {
    (void)set(q, "cgroup/io.cost.qos", k % 2 ? "enable=1" : "enable=0");
    (void)set(q, "cgroup/toggle/io.weight", std::to_string(50 + 40 * k));
    (void)attr(q, "cgroup/toggle/io.stat");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the pace of the toggles against the I/O
  }
  stop.store(true);
  for (auto& t : th) t.join();
  EXPECT_EQ(failed.load(), 0);
  d.reset();
  for (int i = 0; i < 3; i++)
    remove_groups({("/toggle/t" + std::to_string(i) + "/r0").c_str(), ("/toggle/t" + std::to_string(i) + "/r1").c_str(),
                   ("/toggle/t" + std::to_string(i)).c_str()});
  remove_groups({"/toggle"});
}

// Regression: a blkg's last put freed its group before io.cost forgot the
// blkg, and the period timer, which reads the group of every blkg it
// lists, read freed memory (TSan in CI). Groups here live for one bio each
// while the timer runs every millisecond.
TEST(IocostThreads, PeriodTimerNeverReadsTheGroupOfAFreedBlkg) {
  Watchdog w("IocostThreads.PeriodTimerNeverReadsTheGroupOfAFreedBlkg", std::chrono::seconds(120));
  auto d = null_device("50000");
  ASSERT_NE(d, nullptr);
  Queue& q = d->queue();
  ASSERT_TRUE(set(q, "cgroup/io.cost.qos", "enable=1 rlat=500 wlat=500").ok());
  ASSERT_EQ(info(q, "/").period_ns, 1'000'000u);
  // Many idle groups known to io.cost make each period's walk long, and
  // with it the time a freeing thread used to wait for it after the free.
  constexpr int kPads = 300;
  for (int i = 0; i < kPads; i++)
    ASSERT_TRUE(set(q, "cgroup/pad" + std::to_string(i) + "/io.weight", dev(q) + " 100").ok());
  Readers keep(q, "/pad0", 1);  // the timer runs while a group is active
  std::atomic<int> failed{0};
  std::vector<std::thread> th;
  for (int i = 0; i < 2; i++)
    th.emplace_back([&, i] {
      BioTracker t;
      for (int r = 0; r < 300; r++) {
        const std::string path = "/brief" + std::to_string(i) + "-" + std::to_string(r);
        auto s = t.make(ReqOp::read, uint64_t(r) << 12, 4096);
        {
          InGroup in(path);
          q.submit_bio(&s->bio);
        }
        if (!io_group_remove(path).ok() || !t.wait_for(r + 1)) failed.fetch_add(1);
      }
    });
  for (auto& x : th) x.join();
  keep.stop();
  EXPECT_EQ(failed.load(), 0);
  d.reset();
  for (int i = 0; i < kPads; i++) remove_groups({("/pad" + std::to_string(i)).c_str()});
}

}  // namespace
}  // namespace blkmq::test
