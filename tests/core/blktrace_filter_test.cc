// A trace's filters (the kernel's trace/act_mask, start_lba, end_lba and
// pid) and its drop count, read back by the real blkparse: each filter
// keeps exactly the events it should, so a filter that were ignored would
// show the events it must drop; a filter set before a trace, changed while
// it runs, or left from the last trace applies; a filtered-out event is
// neither recorded nor counted as dropped; a trace that lost events says
// so, and how to trace less.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "base/event.h"
#include "blkmq/blkmq.h"
#include "blkmq/plug.h"
#include "support/blkparse.h"
#include "support/verified_io.h"
#include "trace/blktrace_mask.h"

namespace blkmq::test {
namespace {

namespace bt = blkmq::blktrace;

std::string fresh_trace_dir(const char* name) {
  const std::string d = testing::TempDir() + "blkmq_filter_" + name;
  std::filesystem::remove_all(d);
  return d;
}

// One 4 KiB I/O at each block (4 KiB units), all in one plug, so the
// trace also holds a P and a U; waits for every I/O to end.
void plugged_io(Queue& q, ReqOp op, const std::vector<uint64_t>& blocks) {
  std::vector<Bio> bios(blocks.size());
  std::vector<iovec> vecs(blocks.size());
  std::vector<uint8_t> buf(blocks.size() * 4096);
  struct Ends {
    std::atomic<size_t> n{0};
    size_t expected = 0;
    base::Completion all;  // completed by the last end
  } done;
  done.expected = blocks.size();
  {
    Plug plug(static_cast<unsigned>(blocks.size()));
    for (size_t i = 0; i < blocks.size(); i++) {
      vecs[i] = iovec{buf.data() + i * 4096, 4096};
      bios[i].op = op;
      bios[i].sector = blocks[i] * 8;
      bios[i].size = 4096;
      bios[i].vec = &vecs[i];
      bios[i].nr_vecs = 1;
      bios[i].private_data = &done;
      bios[i].end_io = [](Bio* b) {
        auto* e = static_cast<Ends*>(b->private_data);
        if (e->n.fetch_add(1) + 1 == e->expected) e->all.complete();
      };
      q.submit_bio(&bios[i]);
    }
  }
  ASSERT_TRUE(done.all.wait_for(5ull * 1000 * 1000 * 1000)) << done.n.load() << " of " << blocks.size() << " ended";
  ASSERT_EQ(done.n.load(), blocks.size());
}

// Blocks 1, 17, 33, ...: never adjacent, so nothing merges. Fewer than a
// plug holds (BLK_MAX_REQUEST_COUNT, 32), so the plug is flushed once.
std::vector<uint64_t> spread_blocks(size_t n) {
  std::vector<uint64_t> b;
  for (size_t i = 0; i < n; i++) b.push_back(16 * i + 1);
  return b;
}

std::vector<long long> sectors(const std::vector<BlkparseLine>& lines, const char* action) {
  std::vector<long long> s;
  for (const auto& l : events(lines, action)) s.push_back(event_sector(l));
  std::sort(s.begin(), s.end());
  return s;
}

TEST(BlkTraceFilter, MaskTextFormsAreTheKernels) {
  EXPECT_EQ(bt::act_mask_to_string(bt::kAllCategories),
            "read,write,flush,sync,queue,requeue,issue,complete,fs,pc,notify,ahead,meta,discard,drv_data,fua");
  EXPECT_EQ(bt::act_mask_to_string(0), "");
  EXPECT_EQ(bt::act_mask_to_string(bt::kTcIssue | bt::kTcRead), "read,issue");
  const uint16_t ic = bt::kTcIssue | bt::kTcComplete;  // 0xc0
  for (const char* s : {"issue,complete", "ISSUE,,Complete,", "0xc0", "0XC0", "0300", "192", "+192"})
    EXPECT_EQ(bt::act_mask_from_string(s).value(), ic) << s;
  EXPECT_EQ(bt::act_mask_from_string("").value(), 0) << "the kernel's empty list: nothing is traced";
  for (const char* s : {"read, write", "bogus", "0x10000", "-1", "0x", "issue;complete"})
    EXPECT_FALSE(bt::act_mask_from_string(s).ok()) << s;
  EXPECT_NE(bt::act_mask_from_string("issue,bogus").status().message().find("'bogus'"), std::string::npos);
  uint64_t n = 0;
  EXPECT_TRUE(bt::parse_kernel_uint("18446744073709551615", &n));
  EXPECT_EQ(n, UINT64_MAX);
  for (const char* s : {"18446744073709551616", "08", "1.5", " 1", "", "0x1g"})
    EXPECT_FALSE(bt::parse_kernel_uint(s, &n)) << s;
}

TEST(BlkTraceFilter, AttributesShowTheKernelsDefaultsAndRefuseBadValues) {
  auto dev = make_null_device({{"size", "64"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  // blk_trace_setup_queue's defaults for a whole disk.
  EXPECT_EQ(*q.attr("trace/act_mask"), bt::act_mask_to_string(bt::kAllCategories));
  EXPECT_EQ(*q.attr("trace/start_lba"), "0");
  EXPECT_EQ(*q.attr("trace/end_lba"), std::to_string(64ull << 11)) << "the device's size in sectors";
  EXPECT_EQ(*q.attr("trace/pid"), "0");
  EXPECT_EQ(*q.attr("trace/dropped"), "0");
  ASSERT_TRUE(q.set_attr("trace/act_mask", "0x41"));
  EXPECT_EQ(*q.attr("trace/act_mask"), "read,issue");
  ASSERT_TRUE(q.set_attr("trace/start_lba", "0x100"));
  ASSERT_TRUE(q.set_attr("trace/end_lba", "01000"));
  ASSERT_TRUE(q.set_attr("trace/pid", "4242\n"));
  EXPECT_EQ(*q.attr("trace/start_lba"), "256");
  EXPECT_EQ(*q.attr("trace/end_lba"), "512");
  EXPECT_EQ(*q.attr("trace/pid"), "4242");
  const std::pair<const char*, const char*> bad[] = {
      {"trace/act_mask", "bogus"}, {"trace/act_mask", "0x10000"}, {"trace/start_lba", "-1"},
      {"trace/end_lba", "lots"},   {"trace/pid", "4294967296"},   {"trace/pid", ""},
  };
  for (const auto& [path, value] : bad) {
    const std::string before = *q.attr(path);
    Status st = q.set_attr(path, value);
    EXPECT_FALSE(st) << path << "=" << value;
    EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
    EXPECT_EQ(*q.attr(path), before) << "a refused value changes nothing";
  }
  EXPECT_FALSE(q.set_attr("trace/dropped", "0")) << "read-only";
}

// act_mask=issue,complete keeps D and C and drops the queue category (Q,
// G, P, U); act_mask=write keeps the writes and drops the reads.
TEST(BlkTraceFilter, ActMaskKeepsOnlyItsCategories) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  auto dev = make_null_device({{"size", "64"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  const auto blocks = spread_blocks(24);
  ASSERT_TRUE(q.set_attr("trace/act_mask", "issue,complete"));
  ASSERT_TRUE(q.start_blktrace(fresh_trace_dir("mask_ic")));
  plugged_io(q, ReqOp::write, blocks);
  auto lines = blkparse(q.stop_blktrace().path_prefix);
  EXPECT_EQ(events(lines, "D").size(), blocks.size());
  EXPECT_EQ(events(lines, "C").size(), blocks.size());
  EXPECT_EQ(lines.size(), 2 * blocks.size()) << "nothing but D and C: no Q, G, P or U";

  ASSERT_TRUE(q.set_attr("trace/act_mask", "write"));
  ASSERT_TRUE(q.start_blktrace(fresh_trace_dir("mask_w")));
  plugged_io(q, ReqOp::read, blocks);
  plugged_io(q, ReqOp::write, blocks);
  lines = blkparse(q.stop_blktrace().path_prefix);
  ASSERT_EQ(events(lines, "Q").size(), blocks.size()) << "the writes' Q only";
  for (const auto& l : lines) EXPECT_EQ(l[6], "W") << "no read event, and no plug (the kernel's P is a read)";
}

// start_lba..end_lba (both included, as act_log_check): an I/O is traced
// by its first sector; events without one (P, U) pass.
TEST(BlkTraceFilter, SectorRangeDropsEventsOutsideIt) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  auto dev = make_null_device({{"size", "64"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  const auto blocks = spread_blocks(24);  // sectors 8, 136, 264, ... 2952: one plug flush
  const uint64_t start = 1032, end = 2056;  // the 9th block's sector .. the 17th's
  ASSERT_TRUE(q.set_attr("trace/start_lba", std::to_string(start)));
  ASSERT_TRUE(q.set_attr("trace/end_lba", std::to_string(end)));
  std::vector<long long> inside;
  for (uint64_t b : blocks)
    if (b * 8 >= start && b * 8 <= end) inside.push_back(static_cast<long long>(b * 8));
  ASSERT_EQ(inside.size(), 9u);
  ASSERT_TRUE(q.start_blktrace(fresh_trace_dir("range")));
  plugged_io(q, ReqOp::write, blocks);
  const auto lines = blkparse(q.stop_blktrace().path_prefix);
  for (const char* a : {"Q", "G", "D", "C"}) EXPECT_EQ(sectors(lines, a), inside) << a;
  EXPECT_EQ(events(lines, "P").size(), 1u) << "no sector: not range-checked";
  EXPECT_EQ(events(lines, "U").size(), 1u);
}

// pid: only the events the given thread caused (the kernel compares the
// current task's pid, a thread id).
TEST(BlkTraceFilter, PidKeepsOnlyOneThreadsEvents) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  auto dev = make_null_device({{"size", "64"}, {"irqmode", "0"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  ASSERT_TRUE(q.start_blktrace(fresh_trace_dir("pid")));
  constexpr int kPerThread = 50;
  std::atomic<int> ready{0};
  std::atomic<long> traced_tid{0};
  auto worker = [&](int id) {
    if (id == 0) {
      traced_tid = syscall(SYS_gettid);
      ASSERT_TRUE(q.set_attr("trace/pid", std::to_string(traced_tid.load())));  // set while tracing
    }
    ready++;
    while (ready.load() < 2) std::this_thread::yield();
    std::vector<uint8_t> buf(4096);
    for (int i = 0; i < kPerThread; i++)
      ASSERT_EQ(q.write_sync(buf.data(), (uint64_t(id) * kPerThread + i) * 8192, 4096), BlkStatus::ok);
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  const auto lines = blkparse(q.stop_blktrace().path_prefix);
  // Q is always the submitter's own; a D or C of its request may be the
  // other thread's, when that thread's queue run dispatched it.
  EXPECT_EQ(events(lines, "Q").size(), size_t{kPerThread}) << "the other thread's bios are not traced";
  EXPECT_LE(events(lines, "C").size(), size_t{kPerThread});
  for (const auto& l : lines) EXPECT_EQ(l[4], std::to_string(traced_tid.load())) << "every event its own";
}

// A filter written while a trace runs applies from then on; the next
// trace starts with the filter the last one ended with.
TEST(BlkTraceFilter, AFilterAppliesWhileTracingAndToTheNextTrace) {
  if (!have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  auto dev = make_null_device({{"size", "64"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE(q.start_blktrace(fresh_trace_dir("live")));
  for (int i = 0; i < 10; i++) ASSERT_EQ(q.write_sync(buf.data(), i * 8192ull, 4096), BlkStatus::ok);
  ASSERT_TRUE(q.set_attr("trace/act_mask", "complete"));
  for (int i = 10; i < 30; i++) ASSERT_EQ(q.write_sync(buf.data(), i * 8192ull, 4096), BlkStatus::ok);
  auto lines = blkparse(q.stop_blktrace().path_prefix);
  EXPECT_EQ(events(lines, "Q").size(), 10u) << "queued before the change";
  EXPECT_EQ(events(lines, "C").size(), 30u);

  EXPECT_EQ(*q.attr("trace/act_mask"), "complete") << "kept after the trace stopped";
  ASSERT_TRUE(q.start_blktrace(fresh_trace_dir("next")));
  for (int i = 0; i < 5; i++) ASSERT_EQ(q.write_sync(buf.data(), i * 8192ull, 4096), BlkStatus::ok);
  lines = blkparse(q.stop_blktrace().path_prefix);
  EXPECT_EQ(events(lines, "C").size(), 5u);
  EXPECT_EQ(lines.size(), 5u) << "the new trace has the last one's filter";
}

// A buffer smaller than one record: every recorded event is dropped and
// counted, and the warning says how many and how to trace less. An event
// the filter drops never reaches the buffer: it is not counted.
TEST(BlkTraceFilter, DropsAreCountedAndWarnedAndFilteredEventsAreNot) {
  auto dev = make_null_device({{"size", "64"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE(q.start_blktrace(fresh_trace_dir("drops"), 1));
  for (int i = 0; i < 10; i++) ASSERT_EQ(q.write_sync(buf.data(), i * 8192ull, 4096), BlkStatus::ok);
  const uint64_t live = std::stoull(*q.attr("trace/dropped"));
  EXPECT_GE(live, 40u) << "Q G D C of each write, counted while the trace runs";
  BlktraceResult r = q.stop_blktrace();
  EXPECT_GE(r.dropped, live);
  EXPECT_EQ(*q.attr("trace/dropped"), std::to_string(r.dropped)) << "the last trace's, after it stopped";
  const std::string w = blktrace_drop_warning(r);
  EXPECT_NE(w.find(std::to_string(r.dropped) + " events dropped"), std::string::npos) << w;
  EXPECT_NE(w.find(r.path_prefix), std::string::npos) << w;
  for (const char* attr : {"trace/act_mask", "trace/start_lba", "trace/end_lba", "trace/pid"})
    EXPECT_NE(w.find(attr), std::string::npos) << w;
  EXPECT_NE(blktrace_drop_warning(r, "--less").find("--less"), std::string::npos);
  EXPECT_EQ(blktrace_drop_warning(BlktraceResult{}), "") << "nothing lost, nothing to say";

  ASSERT_TRUE(q.set_attr("trace/act_mask", ""));  // the empty mask
  ASSERT_TRUE(q.start_blktrace(fresh_trace_dir("drops_filtered"), 1));
  for (int i = 0; i < 10; i++) ASSERT_EQ(q.write_sync(buf.data(), i * 8192ull, 4096), BlkStatus::ok);
  r = q.stop_blktrace();
  EXPECT_EQ(r.dropped, 0u) << "filtered out before the buffer";
  EXPECT_EQ(blktrace_drop_warning(r), "");
}

}  // namespace
}  // namespace blkmq::test
