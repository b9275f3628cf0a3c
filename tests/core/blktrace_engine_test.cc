// The engine's blktrace events, read back by the real blkparse and btt:
// every bio shows Q..C with the right counts, sectors and sizes; merges,
// splits, plugs and requeues show as M, X, P/U and R; a scheduler's
// reordering shows as a D order that differs from the Q order, and none's
// does not; the trace/ attributes start and stop a trace.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/event.h"
#include "blkmq/blkmq.h"
#include "blkmq/plug.h"
#include "support/blkparse.h"
#include "support/verified_io.h"

namespace blkmq::test {
namespace {

std::string fresh_dir(const char* name) {
  const std::string d = testing::TempDir() + "blkmq_trace_" + name;
  std::filesystem::remove_all(d);
  return d;
}

// `n` 4 KiB bios, submitted inside one plug (or without), at the given
// block numbers; waits for all to end.
struct Batch {
  explicit Batch(size_t n) : bios(n), vecs(n), buf(n * 4096) {}
  std::vector<Bio> bios;
  std::vector<iovec> vecs;
  std::vector<uint8_t> buf;
  std::atomic<size_t> done{0};
  std::atomic<size_t> errors{0};
  size_t expected = 0;
  base::Completion all_done;

  void run(Queue& q, ReqOp op, const std::vector<uint64_t>& blocks, bool plugged) {
    auto end = [](Bio* b) {
      auto* self = static_cast<Batch*>(b->private_data);
      if (b->status != BlkStatus::ok) self->errors++;
      if (self->done.fetch_add(1) + 1 == self->expected) self->all_done.complete();
    };
    expected = blocks.size();
    all_done.reinit();
    for (size_t i = 0; i < blocks.size(); i++) {
      vecs[i] = iovec{buf.data() + i * 4096, 4096};
      bios[i] = Bio{};
      bios[i].op = op;
      bios[i].sector = blocks[i] * 8;
      bios[i].size = 4096;
      bios[i].vec = &vecs[i];
      bios[i].nr_vecs = 1;
      bios[i].end_io = end;
      bios[i].private_data = this;
    }
    {
      std::unique_ptr<Plug> plug(plugged ? new Plug(static_cast<unsigned>(blocks.size())) : nullptr);
      for (size_t i = 0; i < blocks.size(); i++) q.submit_bio(&bios[i]);
    }
    ASSERT_TRUE(all_done.wait_for(5ull * 1000 * 1000 * 1000)) << done.load() << " of " << blocks.size();
    ASSERT_EQ(done.load(), blocks.size());
  }
};

std::vector<uint64_t> shuffled_blocks(size_t n, unsigned seed) {
  std::vector<uint64_t> b(n);
  for (size_t i = 0; i < n; i++) b[i] = 16 * i + 1;  // never adjacent: no merges
  std::shuffle(b.begin(), b.end(), std::mt19937(seed));
  return b;
}

std::vector<long long> sectors_of(const std::vector<BlkparseLine>& ev) {
  std::vector<long long> s;
  for (const auto& l : ev) s.push_back(event_sector(l));
  return s;
}

// A traced run of one batch under `sched`; blkparse's lines.
// *prefix (if given): the trace's blkparse -i argument.
std::vector<BlkparseLine> traced_batch(const char* name, const char* sched, const std::vector<uint64_t>& blocks,
                                       bool plugged, ParamMap extra = {}, std::string* prefix = nullptr) {
  ParamMap p{{"irqmode", "2"}, {"completion_nsec", "20000"}, {"hw_queue_depth", "64"}, {"size", "64"}};
  for (auto& kv : extra) p[kv.first] = kv.second;
  auto dev = make_null_device(p);
  if (!dev) return {};
  Queue& q = dev->queue();
  EXPECT_TRUE(q.set_attr("queue/scheduler", sched));
  const std::string dir = fresh_dir(name);
  EXPECT_TRUE(q.start_blktrace(dir));
  Batch b(blocks.size());
  b.run(q, ReqOp::write, blocks, plugged);
  BlktraceResult r = q.stop_blktrace();
  EXPECT_TRUE(r.was_running);
  EXPECT_EQ(r.dropped, 0u);
  EXPECT_EQ(r.write_errors, 0u);
  if (prefix) *prefix = r.path_prefix;
  return blkparse(r.path_prefix);
}

TEST(BlkTraceEngine, EveryBioShowsQueuedAllocatedIssuedAndCompletedOnce) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  const auto blocks = shuffled_blocks(48, 1);
  const auto lines = traced_batch("qgdc", "none", blocks, false);
  for (const char* a : {"Q", "G", "D", "C"}) EXPECT_EQ(events(lines, a).size(), blocks.size()) << a;
  EXPECT_TRUE(events(lines, "M").empty());
  for (const auto& l : events(lines, "C")) {
    EXPECT_EQ(l[6], "W") << "a plain write is W";
    EXPECT_EQ(l[9], "8") << "4 KiB = 8 sectors";
    EXPECT_EQ(l.back(), "[0]") << "completed without error";
  }
  // Every sector submitted comes back completed.
  auto q = sectors_of(events(lines, "Q")), c = sectors_of(events(lines, "C"));
  std::sort(q.begin(), q.end());
  std::sort(c.begin(), c.end());
  EXPECT_EQ(q, c);
}

TEST(BlkTraceEngine, NoneIssuesInQueueOrder) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  const auto blocks = shuffled_blocks(32, 2);
  const auto lines = traced_batch("none_order", "none", blocks, true);
  EXPECT_EQ(sectors_of(events(lines, "D")), sectors_of(events(lines, "Q")));
  // One plug: P, then one U carrying the whole batch.
  ASSERT_EQ(events(lines, "P").size(), 1u);
  const auto u = events(lines, "U");
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].back(), std::to_string(blocks.size())) << "the unplug depth";
}

TEST(BlkTraceEngine, MqDeadlineReordersDispatchBySector) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  const auto blocks = shuffled_blocks(32, 3);
  const auto lines = traced_batch("dl_order", "mq-deadline", blocks, true);
  const auto q = sectors_of(events(lines, "Q")), d = sectors_of(events(lines, "D"));
  ASSERT_EQ(d.size(), q.size());
  EXPECT_NE(d, q) << "the scheduler's D order is not the submission order";
  EXPECT_TRUE(std::is_sorted(d.begin(), d.end())) << "one sorted sweep from the lowest sector";
  EXPECT_EQ(events(lines, "I").size(), blocks.size()) << "each request inserted into the scheduler";
}

TEST(BlkTraceEngine, AdjacentBiosShowAsMergesAndOneCompletion) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  std::vector<uint64_t> blocks;
  for (uint64_t i = 0; i < 16; i++) blocks.push_back(100 + i);
  std::string prefix;
  const auto lines = traced_batch("merge", "mq-deadline", blocks, true, {}, &prefix);
  EXPECT_EQ(events(lines, "Q").size(), 16u);
  EXPECT_EQ(events(lines, "M").size() + events(lines, "F").size() + events(lines, "G").size(), 16u)
      << "each bio either got a request or merged into one";
  EXPECT_GE(events(lines, "M").size(), 8u);
  size_t completed = 0;
  for (const auto& l : events(lines, "C")) completed += std::stoul(l[9]);
  EXPECT_EQ(completed, 16u * 8) << "the merged requests complete every sector";
  // btt's merge ratio: bios queued per request issued.
  const std::string report = btt_report(prefix);
  long long nq = 0, nd = 0;
  double ratio = 0;
  ASSERT_TRUE(btt_merges(report, &nq, &nd, &ratio)) << report;
  EXPECT_EQ(nq, 16);
  EXPECT_EQ(nd, static_cast<long long>(events(lines, "D").size()));
  EXPECT_NEAR(ratio, 16.0 / nd, 0.05);
}

TEST(BlkTraceEngine, ASplitShowsTheFrontPartAndWhereTheRestStarts) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  auto dev = make_null_device({{"max_sectors", "64"}, {"size", "64"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  const std::string dir = fresh_dir("split");
  ASSERT_TRUE(q.start_blktrace(dir));
  std::vector<uint8_t> buf(128 * 1024);
  ASSERT_EQ(q.write_sync(buf.data(), 1 << 20, static_cast<uint32_t>(buf.size())), BlkStatus::ok);
  const auto lines = blkparse(q.stop_blktrace().path_prefix);
  const auto x = events(lines, "X");
  ASSERT_EQ(x.size(), 3u) << "128 KiB in 32 KiB parts: three splits";
  // blkparse: "<sector> / <new sector>".
  EXPECT_EQ(x[0][7], "2048");
  EXPECT_EQ(x[0][9], "2112");
  EXPECT_EQ(events(lines, "Q").size(), 1u) << "the bio is queued once, before it is split";
  EXPECT_EQ(events(lines, "C").size(), 4u);
}

TEST(BlkTraceEngine, RequeuedRequestsShowAsRequeues) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  const auto blocks = shuffled_blocks(40, 4);
  const auto lines = traced_batch("requeue", "none", blocks, false, {{"requeue", "1,50,0,-1"}});
  const size_t r = events(lines, "R").size();
  EXPECT_GT(r, 0u);
  // null, as null_blk, refuses a request before starting it: no D for
  // the refused tries, and every request is started once in the end.
  EXPECT_EQ(events(lines, "D").size(), blocks.size());
  EXPECT_EQ(events(lines, "C").size(), blocks.size());
}

TEST(BlkTraceEngine, BttReportsEveryIoAndTheDeviceTime) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  auto dev = make_null_device({{"irqmode", "2"}, {"completion_nsec", "200000"}, {"size", "64"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_TRUE(q.start_blktrace(fresh_dir("btt")));
  Batch b(20);
  b.run(q, ReqOp::read, shuffled_blocks(20, 5), false);
  const std::string report = btt_report(q.stop_blktrace().path_prefix);
  ASSERT_FALSE(report.empty());
  double q2c = 0, d2c = 0;
  long long nq = 0, nd = 0;
  ASSERT_TRUE(btt_row(report, "Q2C", &q2c, &nq)) << report;
  ASSERT_TRUE(btt_row(report, "D2C", &d2c, &nd)) << report;
  EXPECT_EQ(nq, 20);
  EXPECT_EQ(nd, 20);
  // The device takes 200 us; the timer thread may add some, never less.
  EXPECT_GE(d2c, 190e-6);
  EXPECT_LT(d2c, 20e-3);
  EXPECT_GE(q2c, d2c);
}

TEST(BlkTraceEngine, TraceAttributesStartAndStopATrace) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  auto dev = make_null_device({{"size", "64"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  EXPECT_EQ(*q.attr("trace/enable"), "0");
  Status s = q.set_attr("trace/enable", "1");
  EXPECT_FALSE(s) << "no directory yet";
  EXPECT_NE(s.message().find("trace/dir"), std::string::npos) << s.message();
  const std::string dir = fresh_dir("attrs");
  ASSERT_TRUE(q.set_attr("trace/dir", dir));
  ASSERT_TRUE(q.set_attr("trace/enable", "1"));
  EXPECT_EQ(*q.attr("trace/enable"), "1");
  EXPECT_FALSE(q.set_attr("trace/dir", "/tmp/elsewhere")) << "not while tracing";
  EXPECT_FALSE(q.start_blktrace(dir)) << "one trace at a time";
  EXPECT_FALSE(q.set_attr("trace/enable", "2"));
  std::vector<uint8_t> buf(4096);
  ASSERT_EQ(q.read_sync(buf.data(), 0, 4096), BlkStatus::ok);
  ASSERT_TRUE(q.set_attr("trace/enable", "0"));
  EXPECT_EQ(*q.attr("trace/enable"), "0");
  ASSERT_EQ(q.read_sync(buf.data(), 4096, 4096), BlkStatus::ok);  // not traced
  const auto lines = blkparse(dir + "/" + q.name());
  EXPECT_EQ(events(lines, "Q").size(), 1u);
  EXPECT_EQ(events(lines, "C").size(), 1u);
  EXPECT_EQ(lines.front()[0], "240," + std::to_string(q.dev_minor())) << "the dev attribute's number";
}

// Tracing starts and stops while several threads submit: nothing is lost
// or doubled, nothing touches a stopped writer.
TEST(BlkTraceEngine, StartAndStopUnderLoad) {
  auto dev = make_null_device({{"irqmode", "1"}, {"size", "64"}, {"memory_backed", "1"}});
  ASSERT_TRUE(dev);
  const std::string dir = fresh_dir("load");
  IoTotals t;
  run_verified_workers(*dev, 2, 0.6, t, true, [&] {
    Queue& q = dev->queue();
    if (q.attr("trace/enable").value() == "1") q.stop_blktrace();
    else EXPECT_TRUE(q.start_blktrace(dir));
  });
  EXPECT_GT(t.submitted.load(), 0u);
  t.expect_clean();
  expect_queue_idle(dev->queue(), "after tracing under load");
}

}  // namespace
}  // namespace blkmq::test
