// The rbd driver against a real single-node Ceph cluster (memstore, on
// loopback; tests/support/ceph_cluster.sh): parameters and connection
// errors, verified random I/O through every scheduler, flush and FUA,
// discard and write-zeroes, the allocation map, a cluster that dies under
// I/O, and `blkmq nbd --driver=rbd` with nbdcopy. Everything that needs
// the cluster skips, with the script's reason, where Ceph cannot start.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>

#include "blkmq/blkmq.h"
#include "drivers/rbd/rbd_params.h"
#include "support/ceph_cluster.h"
#include "support/cli_process.h"
#include "support/device_test_util.h"
#include "support/random_verify.h"
#include "support/verified_io.h"
#include "support/watchdog.h"

namespace blkmq {
namespace {

using Clock = std::chrono::steady_clock;
using devtest::AlignedBuf;
using devtest::fill_pattern;
using test::CephCluster;

// One cluster for the whole binary (starting one takes ~10 s); the test
// that kills an OSD starts its own.
CephCluster* g_cluster = nullptr;

class ClusterEnv : public ::testing::Environment {
 public:
  void SetUp() override { g_cluster = new CephCluster(1024); }
  void TearDown() override {
    delete g_cluster;
    g_cluster = nullptr;
  }
};
[[maybe_unused]] const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new ClusterEnv);

#define NEED_CLUSTER()                                                 \
  do {                                                                 \
    if (!g_cluster || !g_cluster->up())                                \
      GTEST_SKIP() << (g_cluster ? g_cluster->reason() : "no cluster"); \
  } while (0)

ParamMap image_params(const std::string& conf, const std::string& image = "img") {
  return {{"conf", conf}, {"pool", "rbd"}, {"rbdname", image}};
}

// Zeroes [0, len) an object (4 MiB) at a time: random_verify's model
// starts as zeroes, and other rounds or tests wrote there.
void zero_front(Queue& q, uint64_t len) {
  for (uint64_t off = 0; off < len; off += 4u << 20)
    ASSERT_EQ(devtest::submit_wait(q, ReqOp::write_zeroes, off, 4u << 20, nullptr), BlkStatus::ok);
}

std::unique_ptr<Device> open_image(const std::string& image = "img", ParamMap extra = {}) {
  ParamMap p = image_params(g_cluster->conf(), image);
  for (auto& [k, v] : extra) p[k] = v;
  return devtest::make_device("rbd", p);
}

// ---- registration, parameters, connection errors (no cluster needed) ----

TEST(RbdDevice, IsRegisteredWithEveryParameter) {
  devtest::expect_registered("rbd", rbd::rbd_param_infos());
}

TEST(RbdDevice, BadParametersAreRefused) {
  using devtest::make_device_error;
  EXPECT_NE(make_device_error("rbd", {}).find("rbdname"), std::string::npos);
  EXPECT_NE(make_device_error("rbd", {{"rbdname", "x"}, {"nope", "1"}}).find("nope"), std::string::npos);
  EXPECT_NE(make_device_error("rbd", {{"rbdname", "x"}, {"osd_op_timeout", "-1"}}).find("osd_op_timeout"),
            std::string::npos);
  EXPECT_NE(make_device_error("rbd", {{"rbdname", "x"}, {"pool", ""}}).find("pool"), std::string::npos);
  EXPECT_NE(make_device_error("rbd", {{"rbdname", "x"}, {"conf", "/nonexistent/ceph.conf"}}).find("conf"),
            std::string::npos);
  auto p = devtest::parse_ok(rbd::parse_rbd_params, {{"rbdname", "x"}});
  EXPECT_EQ(rbd::rados_user(p), "client.admin");
  p.clientname = "client.blkmq";
  EXPECT_EQ(rbd::rados_user(p), "client.blkmq");
}

// A monitor address nobody listens on: create_device fails with a clear
// message once osd_op_timeout (here also the mount timeout) has passed,
// instead of librados's 300 s default.
TEST(RbdDevice, AClusterThatIsNotThereFailsCreateWithinTheTimeout) {
  devtest::TempDir dir("blkmq-rbd");
  const std::string conf = dir.file("ceph.conf");
  test::sh("printf '[global]\\nmon host = v2:127.0.0.1:9\\nauth client required = none\\n' > " + conf);
  const auto t0 = Clock::now();
  const std::string msg = devtest::make_device_error("rbd", {{"conf", conf}, {"rbdname", "img"}, {"osd_op_timeout", "2"}});
  EXPECT_NE(msg.find("cannot connect"), std::string::npos) << msg;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(20));
}

// ---- against the cluster ----

TEST(RbdDevice, OpensTheImageWithItsSizeAndKrbdLimits) {
  NEED_CLUSTER();
  auto dev = open_image();
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->driver_name(), "rbd");
  EXPECT_EQ(dev->size_bytes(), 1024ull << 20);
  Queue& q = dev->queue();
  const QueueLimits& lim = q.limits();
  EXPECT_EQ(lim.capacity_sectors, (1024ull << 20) >> kSectorShift);
  EXPECT_EQ(lim.max_hw_sectors, (4u << 20) >> kSectorShift);  // one 4 MiB object
  EXPECT_EQ(lim.max_sectors, 2560u);
  EXPECT_TRUE(lim.write_cache);  // librbd's writeback cache
  EXPECT_FALSE(lim.fua);
  EXPECT_GT(lim.max_discard_sectors, 0u);
  EXPECT_GT(lim.max_write_zeroes_sectors, 0u);
  auto sched = q.attr("queue/scheduler");
  ASSERT_TRUE(sched);
  EXPECT_NE(sched->find("[none]"), std::string::npos) << *sched;
}

TEST(RbdDevice, MissingPoolOrImageIsAClearError) {
  NEED_CLUSTER();
  std::string msg = devtest::make_device_error("rbd", image_params(g_cluster->conf(), "no-such-image"));
  EXPECT_NE(msg.find("cannot open image 'rbd/no-such-image'"), std::string::npos) << msg;
  ParamMap p = image_params(g_cluster->conf());
  p["pool"] = "no-such-pool";
  msg = devtest::make_device_error("rbd", p);
  EXPECT_NE(msg.find("cannot open pool 'no-such-pool'"), std::string::npos) << msg;
}

// 512 B .. 1 MiB extents, some in several segments, written at depth 16
// and read back against a model, with each scheduler in turn.
TEST(RbdDevice, RandomIoReadsBackThroughEveryScheduler) {
  NEED_CLUSTER();
  auto dev = open_image();
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  constexpr uint64_t kSpan = 32u << 20;
  unsigned seed = 1;
  for (const char* sched : {"none", "mq-deadline", "kyber", "bfq"}) {
    SCOPED_TRACE(sched);
    ASSERT_TRUE(q.set_attr("queue/scheduler", sched));
    zero_front(q, kSpan);
    devtest::random_verify(q, kSpan, 512, 96, seed++);
    test::expect_queue_idle(q, sched);
  }
}

// completion=eventfd: librbd signals the eventfd and the driver's reaper
// thread ends the requests; the data path is the same.
TEST(RbdDevice, EventfdCompletionsEndOnTheReaperThreadAndReadBack) {
  NEED_CLUSTER();
  auto dev = open_image("img", {{"completion", "eventfd"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  AlignedBuf buf(4096);
  fill_pattern(buf.data, 4096, 5);
  devtest::Waiter w;
  devtest::SegSlot s;
  s.prep(ReqOp::write, 96ull << 20, 4096, buf.data, &w);
  q.submit_bio(&s.bio);
  ASSERT_TRUE(w.wait(1));
  EXPECT_EQ(s.bio.status, BlkStatus::ok);
  EXPECT_EQ(w.thread(), "rbd-reaper");
  zero_front(q, 8u << 20);
  devtest::random_verify(q, 8u << 20, 512, 48, 99);
  test::expect_queue_idle(q, "eventfd");
}

// With librbd's cache in write-back mode from the start (CEPH_ARGS, which
// the driver reads as the ceph tools do), a write stays in the client
// until a flush. A FUA write still reaches the OSDs before it completes
// (the core adds the flush librbd needs), so another client sees it.
// (With a flush that does nothing this fails: B reads the old data.)
TEST(RbdDevice, AFuaWriteIsVisibleToAnotherClientAtOnce) {
  NEED_CLUSTER();
  setenv("CEPH_ARGS", "--rbd_cache_writethrough_until_flush=false", 1);
  auto a = open_image();
  unsetenv("CEPH_ARGS");
  auto b = open_image();
  ASSERT_TRUE(a && b);
  AlignedBuf buf(65536), back(65536);
  for (int round = 0; round < 4; round++) {
    const uint64_t off = (64ull << 20) + round * 65536ull;
    fill_pattern(buf.data, buf.size, 40 + round);
    const uint32_t flags = round % 2 ? kBioFua : kBioPreflush | kBioFua;
    ASSERT_EQ(a->queue().write_sync(buf.data, off, 65536, flags), BlkStatus::ok);
    ASSERT_EQ(b->queue().read_sync(back.data, off, 65536), BlkStatus::ok);
    EXPECT_EQ(std::memcmp(back.data, buf.data, 65536), 0) << "round " << round;
  }
}

TEST(RbdDevice, DiscardAndWriteZeroesReadBackZerosAndShowAsHoles) {
  NEED_CLUSTER();
  auto dev = open_image();
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  constexpr uint32_t kObj = 4u << 20;
  const uint64_t base = 128ull << 20;  // objects 32..34, untouched by the other tests
  AlignedBuf buf(3 * kObj), back(3 * kObj), zeros(3 * kObj);
  std::memset(zeros.data, 0, zeros.size);
  fill_pattern(buf.data, buf.size, 77);
  ASSERT_EQ(q.write_sync(buf.data, base, 3 * kObj), BlkStatus::ok);
  // Discard the middle object whole; zero 3 KiB inside the last one.
  ASSERT_EQ(devtest::submit_wait(q, ReqOp::discard, base + kObj, kObj, nullptr), BlkStatus::ok);
  ASSERT_EQ(devtest::submit_wait(q, ReqOp::write_zeroes, base + 2 * kObj + 1024, 3072, nullptr), BlkStatus::ok);
  ASSERT_EQ(q.read_sync(back.data, base, 3 * kObj), BlkStatus::ok);
  EXPECT_EQ(std::memcmp(back.data, buf.data, kObj), 0);
  EXPECT_EQ(std::memcmp(back.data + kObj, zeros.data, kObj), 0);
  EXPECT_EQ(std::memcmp(back.data + 2 * kObj, buf.data + 2 * kObj, 1024), 0);
  EXPECT_EQ(std::memcmp(back.data + 2 * kObj + 1024, zeros.data, 3072), 0);
  EXPECT_EQ(std::memcmp(back.data + 2 * kObj + 4096, buf.data + 2 * kObj + 4096, kObj - 4096), 0);
  // The discarded object is a hole between two of data.
  ASSERT_TRUE(dev->reports_allocation());
  ASSERT_EQ(q.flush_sync(), BlkStatus::ok);
  auto map = dev->allocation(base, 3 * kObj, 16);
  ASSERT_TRUE(map) << map.status().message();
  ASSERT_EQ(map->size(), 3u);
  EXPECT_EQ((*map)[0].flags, 0u);
  EXPECT_EQ((*map)[0].length, kObj);
  EXPECT_EQ((*map)[1].flags, kExtentHole | kExtentZero);
  EXPECT_EQ((*map)[1].length, kObj);
  EXPECT_EQ((*map)[2].flags, 0u);
}

TEST(RbdDevice, OutOfRangeFailsCleanly) {
  NEED_CLUSTER();
  auto dev = open_image();
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  AlignedBuf buf(8192);
  EXPECT_EQ(q.read_sync(buf.data, 1024ull << 20, 4096), BlkStatus::inval);
  EXPECT_EQ(q.write_sync(buf.data, (1024ull << 20) - 4096, 8192), BlkStatus::inval);
  EXPECT_EQ(q.write_sync(buf.data, 100, 512), BlkStatus::inval);
  EXPECT_EQ(q.write_sync(buf.data, 0, 4096), BlkStatus::ok);
}

// The OSD dies under 2 x 16 verified writers and readers: every bio still
// ends exactly once, those the cluster no longer answers with `timeout`
// after osd_op_timeout, nothing is left in the queue, and the device's
// teardown (which closes the image on the dead cluster) finishes.
TEST(RbdCluster, StoppedUnderIoFailsTheOutstandingRequestsAndTeardownDrains) {
  CephCluster own(256);
  if (!own.up()) GTEST_SKIP() << own.reason();
  test::Watchdog dog("rbd cluster-stop test", std::chrono::seconds(120));
  auto dev = devtest::make_device("rbd", {{"conf", own.conf()}, {"rbdname", "img"}, {"osd_op_timeout", "3"}});
  ASSERT_TRUE(dev);
  test::IoTotals t;
  const auto t0 = Clock::now();
  bool killed = false;
  test::run_verified_workers(*dev, 2, 4.0, t, /*verify=*/true, [&] {
    if (!killed && Clock::now() - t0 > std::chrono::seconds(1)) {
      own.kill_osd();
      killed = true;
    }
  });
  EXPECT_TRUE(killed);
  EXPECT_EQ(t.ended.load(), t.submitted.load());
  EXPECT_EQ(t.doubles.load(), 0u);
  EXPECT_EQ(t.mismatches.load(), 0u);
  EXPECT_EQ(t.errors.load(), 0u) << "a failure other than the timeout";
  EXPECT_GT(t.timeouts.load(), 0u);
  test::expect_queue_idle(dev->queue(), "after the OSD died");
  const auto t1 = Clock::now();
  dev.reset();
  EXPECT_LT(Clock::now() - t1, std::chrono::seconds(30));
}

// ---- the NBD export ----

TEST(RbdNbd, NbdcopyRoundTripThroughBlkmqNbd) {
  NEED_CLUSTER();
  if (!test::have("nbdcopy")) GTEST_SKIP() << "nbdcopy is not installed (libnbd-bin)";
  ASSERT_EQ(g_cluster->rbd("create --size 64 rbd/nbd").status, 0);
  devtest::TempDir dir("blkmq-rbd-nbd");
  const std::string in = dir.file("in"), out = dir.file("out");
  ASSERT_EQ(test::sh("head -c 67108864 /dev/urandom > " + in).status, 0);
  test::CliServer srv({"--driver=rbd", "--conf=" + g_cluster->conf(), "--rbdname=nbd", "--scheduler=mq-deadline"});
  ASSERT_TRUE(srv.up());
  test::Shell r = test::sh("nbdcopy " + in + " '" + srv.uri() + "'", 120);
  ASSERT_EQ(r.status, 0) << r.output;
  r = test::sh("nbdcopy '" + srv.uri() + "' " + out + " && cmp " + in + " " + out, 120);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(srv.stop(SIGTERM), 0);
}

bool have_python_libnbd() { return std::system("/usr/bin/python3 -c 'import nbd' 2>/dev/null") == 0; }

// Runs `body` (Python, with `h` a libnbd handle connected to `uri`) from a
// script in `dir`; its output ends with "ok" when the body got through.
test::Shell run_libnbd(const devtest::TempDir& dir, const std::string& uri, const std::string& body) {
  const std::string script = dir.file("client.py");
  std::ofstream(script) << "import nbd, sys\nh = nbd.NBD()\nh.connect_uri(sys.argv[1])\n" << body << "print('ok')\n";
  return test::sh("/usr/bin/python3 " + script + " '" + uri + "'", 60);
}

// Issue 26: WRITE_ZEROES and TRIM with FUA failed with EINVAL on an rbd
// export (FUA is emulated there, and the flush machinery turned the op into
// a data-less WRITE), so a client in write-through mode (qemu
// cache=writethrough, nbdsh with CMD_FLAG_FUA) could not zero at all. The
// server now sends the op without FUA and a FLUSH after it.
TEST(RbdNbd, ZeroAndTrimWithFuaWorkAndReadBackZeros) {
  NEED_CLUSTER();
  if (!have_python_libnbd()) GTEST_SKIP() << "python3-libnbd is not installed";
  ASSERT_EQ(g_cluster->rbd("create --size 16 rbd/nbdfua").status, 0);
  devtest::TempDir dir("blkmq-rbd-fua");
  test::CliServer srv({"--driver=rbd", "--conf=" + g_cluster->conf(), "--rbdname=nbdfua"});
  ASSERT_TRUE(srv.up());
  const test::Shell r = run_libnbd(dir, srv.uri(),
                                   "h.pwrite(b'\\x5a' * 131072, 0)\n"
                                   "h.zero(65536, 0, nbd.CMD_FLAG_FUA)\n"
                                   "h.trim(65536, 65536, nbd.CMD_FLAG_FUA)\n"
                                   "assert h.pread(131072, 0) == bytes(131072), 'not zero after FUA zero/trim'\n"
                                   "h.shutdown()\n");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ok"), std::string::npos) << r.output;
  EXPECT_EQ(srv.stop(SIGTERM), 0);
}

// Issue 26's power cut on rbd: librbd's write-back cache lives in the
// server's process, so SIGKILL of `blkmq nbd` loses what it holds, as a
// power cut loses a disk's cache. What was flushed, or written with FUA
// (emulated: a write, then a flush), is in the image afterwards; a write
// after the last flush may be lost, but only whole (every 4 KiB page old
// or new). The image is read back with `rbd export`, past every cache.
TEST(RbdNbd, SigkillLosesOnlyUnflushedWritesAndThoseWhole) {
  NEED_CLUSTER();
  if (!have_python_libnbd()) GTEST_SKIP() << "python3-libnbd is not installed";
  ASSERT_EQ(g_cluster->rbd("create --size 16 rbd/nbdcut").status, 0);
  devtest::TempDir dir("blkmq-rbd-cut");
  // librbd's default policy (writearound) sends every write on at once,
  // and its write-back flushes dirty data within a second: either way the
  // kill would find nothing to lose. Write-back with a long age keeps it
  // in the cache, as a disk's cache holds writes until told to flush (the
  // unflushed pages are then lost; checked by hand: all 16 came back old;
  // and with the server's FUA left off, the FUA write is lost).
  const char* old_args = std::getenv("CEPH_ARGS");
  const std::string saved = old_args ? old_args : "";
  ::setenv("CEPH_ARGS", (saved + " --rbd_cache_policy=writeback --rbd_cache_max_dirty_age=30").c_str(), 1);
  test::CliServer srv({"--driver=rbd", "--conf=" + g_cluster->conf(), "--rbdname=nbdcut"});
  if (old_args) ::setenv("CEPH_ARGS", saved.c_str(), 1);
  else ::unsetenv("CEPH_ARGS");
  ASSERT_TRUE(srv.up());
  // 64 KiB of 0xa5 flushed (the flush also turns librbd's cache from
  // write-through to write-back); 4 KiB of 0x5a with FUA; 64 KiB of 0x11
  // after them, never flushed; then the server dies mid-connection.
  const test::Shell w = run_libnbd(dir, srv.uri(),
                                   "h.pwrite(b'\\xa5' * 65536, 0); h.flush()\n"
                                   "h.pwrite(b'\\x5a' * 4096, 65536, nbd.CMD_FLAG_FUA)\n"
                                   "h.pwrite(b'\\x11' * 65536, 131072)\n");
  ASSERT_EQ(w.status, 0) << w.output;
  srv.stop(SIGKILL);
  const std::string out = dir.file("image");
  ASSERT_EQ(g_cluster->rbd("export rbd/nbdcut " + out).status, 0);
  std::ifstream f(out, std::ios::binary);
  std::string img((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GE(img.size(), 196608u);
  EXPECT_EQ(img.substr(0, 65536), std::string(65536, '\xa5')) << "flushed data lost";
  EXPECT_EQ(img.substr(65536, 4096), std::string(4096, '\x5a')) << "FUA write lost";
  for (size_t page = 131072; page < 196608; page += 4096) {
    const std::string p = img.substr(page, 4096);
    EXPECT_TRUE(p == std::string(4096, '\x11') || p == std::string(4096, '\0')) << "torn page at " << page;
  }
}

}  // namespace
}  // namespace blkmq
