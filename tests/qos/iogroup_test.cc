// I/O groups (the blkcg stand-in): the tree's operations and errors,
// io.stat's arithmetic under every scheduler on the null driver, and the
// lifetime of groups removed while their bios are in flight.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/device_test_util.h"
#include "support/in_group.h"
#include "support/stub_driver.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

std::string iostat(const Queue& q, const std::string& group) {
  auto r = q.attr("cgroup" + group + "/io.stat");
  EXPECT_TRUE(r.ok()) << (r ? "" : r.status().message());
  // Without the device's MAJ:MIN, which the test does not care about.
  return r ? r->substr(r->find(' ') + 1) : "";
}

TEST(IoGroupTree, CreateFindListAndRemove) {
  auto g = io_group_create("/tree/a/b");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(io_group_path(*g), "/tree/a/b");
  EXPECT_EQ(io_group_find("tree/a/b"), *g) << "the leading slash is optional";
  EXPECT_EQ(*io_group_create("/tree/a/b/"), *g) << "creating an existing group finds it";
  EXPECT_EQ(io_group_path(io_group_find("/tree/a")), "/tree/a");
  EXPECT_EQ(io_group_find("/"), io_group_root());
  EXPECT_EQ(io_group_path(io_group_root()), "/");
  auto list = io_group_list();
  auto at = [&](const std::string& p) { return std::find(list.begin(), list.end(), p) - list.begin(); };
  ASSERT_LT(at("/tree/a/b"), static_cast<long>(list.size()));
  EXPECT_LT(at("/tree"), at("/tree/a"));
  EXPECT_LT(at("/tree/a"), at("/tree/a/b"));

  Status busy = io_group_remove("/tree/a");
  EXPECT_EQ(busy.code(), EBUSY);
  EXPECT_NE(busy.message().find("child"), std::string::npos) << busy.message();
  EXPECT_TRUE(io_group_remove("/tree/a/b").ok());
  EXPECT_EQ(io_group_find("/tree/a/b"), nullptr);
  EXPECT_EQ(io_group_remove("/tree/a/b").code(), ENOENT);
  EXPECT_TRUE(io_group_remove("/tree/a").ok());
  EXPECT_TRUE(io_group_remove("/tree").ok());
}

TEST(IoGroupTree, BadNamesAndTheRootAreRefused) {
  const std::vector<std::string> bads = {"/a//b", "/.", "/x/..", "/sp ace", "/tab\tx", "/" + std::string(256, 'n')};
  for (const std::string& bad : bads) {
    auto r = io_group_create(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), EINVAL);
    EXPECT_NE(r.status().message().find("name"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(io_group_find("/."), nullptr);
  EXPECT_EQ(io_group_remove("/").code(), EINVAL);
  EXPECT_EQ(io_group_remove("/a b").code(), EINVAL);
}

TEST(IoGroupTree, AGroupWithContextsIsBusyAndAContextMoves) {
  IoContext* ioc = acquire_io_context();
  auto g = io_group_create("/members");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(io_context_group(ioc), io_group_root());
  ASSERT_TRUE(io_context_set_group(ioc, *g).ok());
  EXPECT_EQ(io_context_group(ioc), *g);
  Status s = io_group_remove("/members");
  EXPECT_EQ(s.code(), EBUSY);
  EXPECT_NE(s.message().find("context"), std::string::npos) << s.message();
  ASSERT_TRUE(io_context_set_group(ioc, io_group_root()).ok());
  EXPECT_TRUE(io_group_remove("/members").ok());
  release_io_context(ioc);
}

// io.stat counts each bio once at submission (blk_cgroup_bio_start): bytes
// once, an I/O per split part; a parent shows its whole subtree; a sibling
// and the other queue see nothing; the root reads the device's statistics.
class IoStatUnderScheduler : public ::testing::TestWithParam<const char*> {};

TEST_P(IoStatUnderScheduler, CountsBytesAndIosHierarchically) {
  auto dev = devtest::make_device("null", {{"memory_backed", "1"}, {"discard", "1"}, {"size", "64"},
                                           {"max_sectors", "64"}, {"irqmode", "0"}});
  ASSERT_NE(dev, nullptr);
  Queue& q = dev->queue();
  ASSERT_TRUE(q.set_attr("queue/scheduler", GetParam()).ok());
  ASSERT_TRUE(io_group_create("/st/sibling").ok());
  std::vector<uint8_t> buf(128 << 10, 1);
  {
    InGroup in("/st/leaf");
    ASSERT_EQ(q.write_sync(buf.data(), 0, 4096), BlkStatus::ok);
    ASSERT_EQ(q.write_sync(buf.data(), 1 << 20, 8192), BlkStatus::ok);
    // 128 KiB over max_sectors=64 (32 KiB): four parts, one bio's bytes.
    ASSERT_EQ(q.read_sync(buf.data(), 0, 128 << 10), BlkStatus::ok);
    BioTracker t;
    auto d = t.make(ReqOp::discard, 2 << 20, 0);
    d->bio.size = 65536;  // a range, no data
    q.submit_bio(&d->bio);
    ASSERT_TRUE(t.wait_for(1));
    ASSERT_EQ(d->status, BlkStatus::ok);
  }
  const std::string want = "rbytes=131072 wbytes=12288 rios=4 wios=2 dbytes=65536 dios=";
  EXPECT_EQ(iostat(q, "/st/leaf").rfind(want, 0), 0u) << iostat(q, "/st/leaf");
  EXPECT_EQ(iostat(q, "/st"), iostat(q, "/st/leaf")) << "a parent counts its children";
  EXPECT_EQ(iostat(q, "/st/sibling"), "rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0");
  const std::string root = iostat(q, "");
  EXPECT_NE(root.find("rbytes=131072 wbytes=12288"), std::string::npos) << root;
  EXPECT_EQ(q.attr("cgroup/st/missing/io.stat").status().code(), ENOENT);
  EXPECT_FALSE(q.attr("cgroup/st/io.nothing").ok());
  EXPECT_FALSE(q.set_attr("cgroup/st/io.stat", "1").ok());
  auto names = q.attr_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "cgroup/st/leaf/io.stat"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "cgroup/io.stat"), names.end());
  dev.reset();  // the queue's blkgs go with it
  EXPECT_TRUE(io_group_remove("/st/leaf").ok());
  EXPECT_TRUE(io_group_remove("/st/sibling").ok());
  EXPECT_TRUE(io_group_remove("/st").ok());
}

INSTANTIATE_TEST_SUITE_P(Schedulers, IoStatUnderScheduler,
                         ::testing::Values("none", "mq-deadline", "kyber", "bfq"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The kernel's lifetime rule: a group whose context moved out may be
// removed while its bios are in flight; they still end exactly once, its
// counts move into its parent, and its memory goes with the last bio
// (ASan's leak check and TSan see the rest).
TEST(IoGroupLifetime, RemovedWhileItsBiosAreHeldInTheDriver) {
  StubDriver::Options o;
  o.mode = CompleteMode::never;
  StubDriver d(o);
  Queue& q = d.q();
  BioTracker t;
  std::vector<std::unique_ptr<BioTracker::Slot>> s;
  {
    InGroup in("/life/gone");
    for (int i = 0; i < 4; i++) {
      s.push_back(t.make(ReqOp::write, uint64_t(i) << 20, 4096));
      q.submit_bio(&s.back()->bio);
    }
  }
  ASSERT_EQ(d.nr_seen(), 4u);
  ASSERT_TRUE(io_group_remove("/life/gone").ok()) << "its bios hold the data, not the group's name";
  EXPECT_EQ(iostat(q, "/life"), "rbytes=0 wbytes=16384 rios=0 wios=4 dbytes=0 dios=0");
  ASSERT_TRUE(io_group_create("/life/gone").ok()) << "the name is free again";
  EXPECT_EQ(iostat(q, "/life/gone"), "rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0");
  for (Request* rq : d.take_held()) end_request(rq, BlkStatus::ok);
  ASSERT_TRUE(t.wait_for(4));
  EXPECT_EQ(t.doubles.load(), 0);
  EXPECT_EQ(t.errors.load(), 0);
  EXPECT_TRUE(io_group_remove("/life/gone").ok());
  EXPECT_TRUE(io_group_remove("/life").ok());
}

// Threads that each create a group, submit into it, move out and remove it
// while the null driver's timer still holds their bios, again and again;
// readers list and read io.stat meanwhile. Bounded, under a watchdog.
TEST(IoGroupLifetime, GroupsCreatedAndRemovedWithBiosInFlight) {
  Watchdog w("IoGroupLifetime.GroupsCreatedAndRemovedWithBiosInFlight", std::chrono::seconds(120));
  auto dev = devtest::make_device("null", {{"irqmode", "2"}, {"completion_nsec", "20000"}, {"submit_queues", "2"}});
  ASSERT_NE(dev, nullptr);
  Queue& q = dev->queue();
  constexpr int kThreads = 3, kRounds = 40, kBios = 8;
  std::atomic<int> ended{0}, doubles{0}, failed{0};
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      for (const std::string& n : q.attr_names())
        if (n.rfind("cgroup/", 0) == 0) (void)q.attr(n);
    }
  });
  std::vector<std::thread> th;
  for (int i = 0; i < kThreads; i++) {
    th.emplace_back([&, i] {
      BioTracker t;
      for (int r = 0; r < kRounds; r++) {
        const std::string path = "/churn/t" + std::to_string(i) + "/r" + std::to_string(r % 3);
        std::vector<std::unique_ptr<BioTracker::Slot>> s;
        {
          InGroup in(path);
          for (int b = 0; b < kBios; b++) {
            s.push_back(t.make(b % 2 ? ReqOp::read : ReqOp::write, uint64_t(b) << 16, 4096));
            q.submit_bio(&s.back()->bio);
          }
        }
        if (!io_group_remove(path).ok()) failed.fetch_add(1);
        if (!t.wait_for((r + 1) * kBios)) failed.fetch_add(1);
      }
      ended.fetch_add(t.ended.load());
      doubles.fetch_add(t.doubles.load());
    });
  }
  for (auto& x : th) x.join();
  stop.store(true);
  reader.join();
  EXPECT_EQ(ended.load(), kThreads * kRounds * kBios);
  EXPECT_EQ(doubles.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  for (int i = 0; i < kThreads; i++) EXPECT_TRUE(io_group_remove("/churn/t" + std::to_string(i)).ok());
  EXPECT_TRUE(io_group_remove("/churn").ok());
}

}  // namespace
}  // namespace blkmq::test
