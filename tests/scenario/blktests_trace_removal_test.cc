// blktests block/002 ("remove a device while running blktrace"): blktrace
// runs on a device that is removed under it, and the test checks that
// nothing of the trace is left behind (the debugfs directory). Here the
// trace records while threads submit; the device is marked dead (new bios
// end with ioerr), then destroyed with the trace still running, which
// stops it. Then: the files are complete and well-formed (blkparse reads
// every CPU's file to the end, no sequence gap, a C for every bio that
// ended ok and none lost), and the writer thread is gone with the device.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/blkparse.h"
#include "support/proc_usage.h"
#include "support/stress.h"
#include "support/verified_io.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

struct Counts {
  std::atomic<uint64_t> submitted{0}, ok{0}, ioerr{0}, other{0}, doubles{0};
};

void count_end(VerifiedIo& io, Counts& c) {
  if (io.ends.load() != 1) c.doubles++;
  const BlkStatus st = io.bio.status;
  if (st == BlkStatus::ok) c.ok++;
  else if (st == BlkStatus::ioerr) c.ioerr++;
  else c.other++;
  io.ends.store(0);
}

// Keeps 4 reads and writes on its own blocks of q until `stop`, then waits
// for its own; every end counted.
void submitter(Queue& q, unsigned id, std::atomic<bool>& stop, Counts& c) {
  std::vector<VerifiedIo> ios(4);
  uint64_t n = 0;
  for (auto& io : ios) io.done.store(1);
  while (!stop.load(std::memory_order_relaxed)) {
    for (VerifiedIo& io : ios) {
      if (!io.done.load(std::memory_order_acquire)) continue;
      if (io.ends.load()) count_end(io, c);
      n++;
      start_verified_io(io, id * 64 + (n * 7) % 64, n % 2 ? ReqOp::write : ReqOp::read);
      c.submitted++;
      q.submit_bio(&io.bio);
    }
    std::this_thread::yield();
  }
  for (VerifiedIo& io : ios) {
    wait_verified_io(io);
    if (io.ends.load()) count_end(io, c);
  }
}

// blkparse's whole output (events and summary) for the trace at `prefix`.
std::string blkparse_all(const std::string& prefix) {
  std::string out;
  FILE* p = popen(("blkparse -i " + prefix + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out;
}

// Creates a device, runs submitters on it for a while with a trace
// recording, marks it dead under them, and destroys it with the trace
// still on. Returns the trace's path prefix.
std::string traced_removal(const char* sched, const std::string& dir, Counts& c) {
  // 1 ms a request, 8 in flight: a few thousand events, which blkparse
  // reads in a blink (20 us gave 400000 and took it 1.5 s).
  auto dev = make_null_device({{"irqmode", "2"}, {"completion_nsec", "1000000"}, {"submit_queues", "2"},
                               {"poll_queues", "0"}, {"hw_queue_depth", "16"},
                               // One request per bio: a C for each bio that ended ok.
                               {"attr:queue/nomerges", "2"}, {"attr:queue/scheduler", sched}});
  if (!dev) return "";
  Queue& q = dev->queue();
  EXPECT_TRUE(q.start_blktrace(dir));
  // The writer names itself once it runs.
  eventually([] { return threads_named("blktrace") != 0; }, 1000);
  EXPECT_EQ(threads_named("blktrace"), 1u) << "the writer runs while the trace does";
  const std::string prefix = dir + "/" + q.name();
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (unsigned i = 0; i < 2; i++) th.emplace_back([&, i] { submitter(q, i, stop, c); });
  // The trace records a while before the removal (time is the point), and
  // has 100 good I/Os in it.
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(200 * stress_scale())));
  EXPECT_TRUE(eventually([&] { return c.ok.load() >= 100; }, 60000)) << c.ok.load() << " I/Os ended ok";
  q.mark_dead();
  // The submitters go on against the dead device (every new bio ends with
  // ioerr at once) until a few such ends are counted.
  EXPECT_TRUE(eventually([&] { return c.ioerr.load() >= 8; }, 60000));
  stop = true;
  for (auto& t : th) t.join();
  dev.reset();  // the trace is still on: teardown stops it
  return prefix;
}

TEST(BlktestsTraceRemoval, DeviceRemovedWhileTracedUnderIoLeavesCompleteFiles) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blkparse (blktrace package) not installed";
  Watchdog wd("block/002 removal while traced", std::chrono::seconds(90));
  for (const char* sched : {"none", "mq-deadline"}) {
    const std::string dir = testing::TempDir() + "blkmq_blktests_002_" + sched;
    std::filesystem::remove_all(dir);
    Counts c;
    const std::string prefix = traced_removal(sched, dir, c);
    ASSERT_FALSE(prefix.empty()) << sched;
    EXPECT_EQ(threads_named("blktrace"), 0u) << sched << ": the trace writer outlived the device";
    EXPECT_EQ(c.ok + c.ioerr + c.other, c.submitted.load()) << sched;
    EXPECT_EQ(c.doubles.load(), 0u) << sched;
    EXPECT_EQ(c.other.load(), 0u) << sched;
    EXPECT_GT(c.ioerr.load(), 0u) << sched << ": no bio reached the dead device";
    const auto lines = blkparse(prefix);
    EXPECT_EQ(events(lines, "C").size(), c.ok.load()) << sched << ": every bio that ended ok has its C";
    EXPECT_EQ(events(lines, "D").size(), c.ok.load()) << sched;
    EXPECT_GE(events(lines, "Q").size(), c.ok.load()) << sched;
    const std::string summary = blkparse_all(prefix);
    EXPECT_NE(summary.find("Skips: 0 forward"), std::string::npos)
        << sched << ": " << summary.substr(summary.size() > 600 ? summary.size() - 600 : 0);
  }
}

}  // namespace
}  // namespace blkmq::test
