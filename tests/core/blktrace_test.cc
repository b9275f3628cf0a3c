// The blktrace writer's files, read by the real blkparse (Debian's
// blktrace package): every action blkmq records comes out with the
// action letter, the RWBS flags, sector, size, thread name, the unplug
// depth and the split sector the kernel's tools expect.
#include <gtest/gtest.h>

#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "trace/blktrace_format.h"
#include "core/blktrace_writer.h"
#include "support/blkparse.h"

namespace blkmq::test {
namespace {

using namespace blkmq::blktrace;

std::string dir_for(const char* name) { return testing::TempDir() + "blkmq_blktrace_" + name; }

TEST(BlkTrace, BlkparseReadsEveryActionWithItsFlags) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blkparse (blktrace package) not installed";
  const std::string dir = dir_for("actions");
  std::string prefix;
  std::thread t([&] {
    pthread_setname_np(pthread_self(), "trace-test");
    auto w = Writer::open(dir, "nullb7", make_dev(252, 7));
    ASSERT_TRUE(w) << w.status().message();
    Writer& wr = **w;
    prefix = wr.path_prefix();
    uint64_t now = 1000000;
    auto at = [&] { return now += 1000; };
    const uint32_t ws = io_categories(ReqOp::write, kBioSync);
    const uint32_t r = io_categories(ReqOp::read, 0);
    wr.add(kQueue | ws, at(), 2048, 4096);
    wr.add(kGetRq | ws, at(), 2048, 4096);
    wr.add(kPlug, at(), 0, 0);
    wr.add(kQueue | r, at(), 4096, 4096);
    wr.add(kBackMerge | r, at(), 4096, 4096);
    wr.add_u64(kUnplugIo, at(), 0, 0, 3);
    wr.add(kInsert | ws | tc_act(kTcFs), at(), 2048, 4096);
    wr.add(kIssue | ws | tc_act(kTcFs), at(), 2048, 4096);
    wr.add(kComplete | ws | tc_act(kTcFs), at(), 2048, 4096, 0);
    wr.add_u64(kSplit | r, at(), 8192, 8192, 8200);
    wr.add(kRequeue | r | tc_act(kTcFs), at(), 8192, 4096);
    wr.add(kSleepRq | r, at(), 8192, 4096);
    wr.add(kComplete | r | tc_act(kTcFs), at(), 8192, 4096, 5);  // EIO
    wr.add(kQueue | io_categories(ReqOp::flush, kBioPreflush), at(), 0, 0);
    wr.add(kQueue | io_categories(ReqOp::write, kBioSync | kBioFua), at(), 64, 512);
    wr.add(kQueue | io_categories(ReqOp::discard, 0), at(), 128, 1 << 20);
    EXPECT_EQ(wr.dropped(), 0u);
  });
  t.join();  // the writer is closed: its files are complete
  const auto lines = blkparse(prefix);
  ASSERT_EQ(lines.size(), 16u);
  struct Want {
    const char* action;
    const char* rwbs;
    const char* rest;  // what follows, joined by spaces
  };
  const Want want[] = {
      {"Q", "WS", "2048 + 8 [trace-test]"}, {"G", "WS", "2048 + 8 [trace-test]"},
      {"P", "N", "[trace-test]"},           {"Q", "R", "4096 + 8 [trace-test]"},
      {"M", "R", "4096 + 8 [trace-test]"},  {"U", "N", "[trace-test] 3"},
      {"I", "WS", "2048 + 8 [trace-test]"}, {"D", "WS", "2048 + 8 [trace-test]"},
      {"C", "WS", "2048 + 8 [0]"},          {"X", "R", "8192 / 8200 [trace-test]"},
      {"R", "R", "8192 + 8 [0]"},           {"S", "R", "8192 + 8 [trace-test]"},
      {"C", "R", "8192 + 8 [5]"},           {"Q", "FN", "[trace-test]"},
      {"Q", "WFS", "64 + 1 [trace-test]"},  {"Q", "D", "128 + 2048 [trace-test]"},
  };
  for (size_t i = 0; i < lines.size(); i++) {
    const auto& f = lines[i];
    std::string rest;
    for (size_t k = 7; k < f.size(); k++) rest += (rest.empty() ? "" : " ") + f[k];
    EXPECT_EQ(f[0], "252,7") << i;
    EXPECT_EQ(f[5], want[i].action) << i;
    EXPECT_EQ(f[6], want[i].rwbs) << i;
    EXPECT_EQ(rest, want[i].rest) << i;
  }
}

// Several threads on every CPU: each CPU's file holds its records with
// sequence numbers from 1 and no gaps, so blkparse sees every event and
// reports no skips.
TEST(BlkTrace, ManyThreadsLoseNothing) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blkparse (blktrace package) not installed";
  const std::string dir = dir_for("threads");
  std::string prefix;
  {
    auto w = Writer::open(dir, "nullb8", make_dev(252, 8));
    ASSERT_TRUE(w) << w.status().message();
    prefix = (*w)->path_prefix();
    std::vector<std::thread> th;
    std::atomic<uint64_t> clock{1};
    for (int i = 0; i < 4; i++)
      th.emplace_back([&, i] {
        for (int n = 0; n < 2000; n++)
          (*w)->add(kQueue | io_categories(ReqOp::read, 0), clock.fetch_add(1), uint64_t(i) << 20 | n, 512);
      });
    for (auto& x : th) x.join();
    EXPECT_EQ((*w)->dropped(), 0u);
  }
  const auto lines = blkparse(prefix);
  EXPECT_EQ(lines.size(), 8000u);
  // blkparse's summary: the totals and the sequence-gap count.
  FILE* p = popen(("blkparse -i " + prefix + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string summary;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) summary += buf;
  pclose(p);
  EXPECT_NE(summary.find("Skips: 0 forward"), std::string::npos) << summary.substr(summary.size() > 600 ? summary.size() - 600 : 0);
  EXPECT_NE(summary.find("Events (nullb8): 8000 entries"), std::string::npos);
}

// A full buffer drops events and counts them. The buffer holds less than
// one record, so every event is dropped: with a buffer of ten records the
// writer thread (woken at half full) could drain it between adds, and the
// test failed under TSan when it did (regression: FullBufferTestRacedTheWriter).
TEST(BlkTrace, AFullBufferDropsAndCounts) {
  auto w = Writer::open(dir_for("drop"), "nullb9", make_dev(252, 9), sizeof(Record) / 2);
  ASSERT_TRUE(w);
  for (int n = 0; n < 100; n++) (*w)->add(kQueue, 1 + n, n, 512);
  (*w)->flush();
  EXPECT_GE((*w)->dropped(), 100u);
}

TEST(BlkTrace, AnUnwritableDirectoryIsAnError) {
  auto w = Writer::open("/proc/blkmq-no-such-dir", "x", 0);
  ASSERT_FALSE(w);
  EXPECT_NE(w.status().message().find("blktrace"), std::string::npos) << w.status().message();
}

}  // namespace
}  // namespace blkmq::test
