// The sysfs-like tree (blkmq/sysfs_tree.h): every attribute of a device is
// a file with the attribute's text, owner-only; stat follows the I/O; a
// scheduler switch retires the old scheduler's files; removing a device
// removes its files; and the real iostat (sysstat) reads the tree of a
// running bench, its r/s within 10 % of the bench's IOPS.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "blkmq/sysfs_tree.h"
#include "support/cli_process.h"
#include "support/verified_io.h"

namespace blkmq::test {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string fresh(const char* stem) {
  const std::string d = testing::TempDir() + "blkmq_sysfs_" + std::to_string(getpid()) + "_" + stem;
  fs::remove_all(d);
  return d;
}

TEST(SysfsTree, EveryAttributeIsAnOwnerOnlyFile) {
  auto dev = make_null_device({{"size", "16"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  const std::string dir = fresh("attrs");
  auto t = SysfsTree::open(dir);
  ASSERT_TRUE(t) << t.status().message();
  ASSERT_TRUE((*t)->add(q));
  const std::string base = dir + "/block/" + q.name() + "/";
  for (const std::string& name : q.attr_names()) {
    if (name == "stat" || name == "inflight" || name.find("busy") != std::string::npos) continue;  // they move
    // An empty value (io.max with no limit) is a file with one newline.
    const std::string v = *q.attr(name);
    EXPECT_EQ(slurp(base + name), v + (!v.empty() && v.back() == '\n' ? "" : "\n")) << name;
  }
  struct stat st {};
  ASSERT_EQ(::stat((base + "queue/scheduler").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (const std::string& d : {dir, base, base + "queue", base + "mq/0"}) {
    ASSERT_EQ(::stat(d.c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << d;
  }
  EXPECT_EQ(fs::read_symlink(dir + "/dev/block/240:" + std::to_string(q.dev_minor())), "../../block/" + q.name());
  EXPECT_FALSE((*t)->add(q)) << "a device is in the tree once";
  (*t)->remove(q);
  EXPECT_FALSE(fs::exists(base));
  EXPECT_FALSE(fs::exists(dir + "/dev/block/240:" + std::to_string(q.dev_minor())));
  EXPECT_FALSE(SysfsTree::open("/proc/no/such/dir")) << "a directory that cannot be made is an error";
}

TEST(SysfsTree, StatFollowsTheIoAndASwitchRetiresTheOldSchedulersFiles) {
  auto dev = make_null_device({{"size", "16"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_TRUE(q.set_attr("queue/scheduler", "mq-deadline"));
  const std::string dir = fresh("live");
  auto t = SysfsTree::open(dir, 100);
  ASSERT_TRUE(t);
  ASSERT_TRUE((*t)->add(q));
  const std::string base = dir + "/block/" + q.name() + "/";
  EXPECT_TRUE(fs::exists(base + "queue/iosched/fifo_batch"));
  std::vector<uint8_t> buf(4096);
  for (int i = 0; i < 10; i++) ASSERT_EQ(q.read_sync(buf.data(), uint64_t(i) * 4096, 4096), BlkStatus::ok);
  ASSERT_TRUE(q.set_attr("queue/scheduler", "kyber"));
  // The tree is rewritten every 100 ms; nothing says when: look until it shows the switch.
  auto reads = [&] {
    std::istringstream stat(slurp(base + "stat"));
    uint64_t n = 0;
    stat >> n;
    return n;
  };
  EXPECT_TRUE(eventually([&] {
    return slurp(base + "queue/scheduler").find("[kyber]") != std::string::npos &&
           !fs::exists(base + "queue/iosched/fifo_batch") && reads() == 10;
  })) << "the tree never showed the switch";
  EXPECT_EQ(reads(), 10u);
  EXPECT_NE(slurp(base + "queue/scheduler").find("[kyber]"), std::string::npos);
  EXPECT_FALSE(fs::exists(base + "queue/iosched/fifo_batch")) << "mq-deadline's tunable went with it";
  EXPECT_TRUE(fs::exists(base + "queue/iosched/read_lat_nsec"));
}

// The acceptance: iostat -f on the tree of a running bench.
TEST(SysfsTree, IostatReadsARunningBenchWithinTenPercent) {
  if (!have("iostat")) GTEST_SKIP() << "sysstat not installed";
  const std::string dir = fresh("iostat");
  const std::string out = dir + ".json";
  const pid_t pid = spawn_cli({"bench", "--name=r", "--rw=randread", "--bs=4k", "--iodepth=4", "--runtime=5",
                               "--time_based", "--irqmode=2", "--completion_nsec=200000", "--sysfs=" + dir,
                               "--output-format=json", "--output=" + out});
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_path(dir + "/block/nullb0/stat"));
  // -y: no since-boot report; three one-second reports inside the run.
  Shell io = sh("iostat -x -d -y -f " + dir + " 1 3", 30);
  ASSERT_EQ(wait_exit(pid), 0);
  ASSERT_EQ(io.status, 0) << io.output;
  const std::vector<double> rps = first_column_of(io.output, "nullb0");
  ASSERT_EQ(rps.size(), 3u) << io.output;
  const double iops = nlohmann::json::parse(slurp(out))["jobs"][0]["read"]["iops"].get<double>();
  EXPECT_NEAR(rps[1], iops, 0.1 * iops) << io.output;
  EXPECT_FALSE(fs::exists(dir + "/block/nullb0")) << "the device's files went with it";
}

}  // namespace
}  // namespace blkmq::test
