// blkmq bench --read_iolog: a blktrace capture is replayed in its order,
// at its pace (or scaled, or as fast as the depth allows), from either
// byte order; the trace a bench recorded replays to the same queued I/O,
// and fio replays that file too; bad traces fail with a clear error.
#include <byteswap.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/blktrace_format.h"
#include "bench/replay.h"
#include "support/bench_run.h"
#include "support/blkparse.h"
#include "support/cli_process.h"

namespace bench {
namespace {

namespace bt = blkmq::blktrace;

// One queued event: what a replay reads.
bt::Record queued(uint64_t time_ns, uint64_t sector, uint32_t bytes, bool write, uint32_t extra_cats = 0) {
  bt::Record r{};
  r.magic = bt::kMagic | bt::kVersion;
  r.time = time_ns;
  r.sector = sector;
  r.bytes = bytes;
  r.action = bt::kQueue | bt::tc_act((write ? bt::kTcWrite : bt::kTcRead) | extra_cats);
  return r;
}

void swap(bt::Record* r) {
  r->magic = bswap_32(r->magic);
  r->time = bswap_64(r->time);
  r->sector = bswap_64(r->sector);
  r->bytes = bswap_32(r->bytes);
  r->action = bswap_32(r->action);
}

std::string write_trace(const std::string& stem, std::vector<bt::Record> recs, bool swapped = false) {
  const std::string path = temp_path("replay", stem + ".bin");
  FILE* f = std::fopen(path.c_str(), "wb");
  for (bt::Record& r : recs) {
    if (swapped) swap(&r);
    std::fwrite(&r, sizeof r, 1, f);
  }
  std::fclose(f);
  return path;
}

// Ten 4 KiB reads 10 ms apart, with a completion, a discard and a flush
// between them that the replay skips.
std::vector<bt::Record> paced_reads() {
  std::vector<bt::Record> v;
  for (uint64_t i = 0; i < 10; i++) {
    v.push_back(queued(1000000 + i * 10000000, i * 64, 4096, false));
    bt::Record c = v.back();
    c.action = bt::kComplete | bt::tc_act(bt::kTcRead);
    v.push_back(c);
  }
  v.push_back(queued(1000000, 0, 4096, true, bt::kTcDiscard));
  v.push_back(queued(1000000, 0, 0, true, bt::kTcFlush));
  return v;
}

// seconds: the job's own runtime as the bench reports it (job_runtime),
// not the process's wall time, whose start-up (long under the sanitizers)
// would swamp the 10 ms gaps.
struct Replayed {
  int rc;
  double seconds;
  nlohmann::json job;
};

Replayed replay(const std::string& trace, std::vector<std::string> extra) {
  const std::string out = temp_path("replay", "out.json");
  std::vector<std::string> args = {"--name=replay", "--read_iolog=" + trace, "--output-format=json", "--output=" + out};
  args.insert(args.end(), extra.begin(), extra.end());
  Replayed r{run_bench(args), 0, {}};
  if (r.rc == 0) {
    r.job = read_json(out)["jobs"][0];
    r.seconds = r.job["job_runtime"].get<double>() / 1000;
  }
  return r;
}

TEST(BenchReplay, KeepsTheRecordedPaceOrScalesIt) {
  const std::string trace = write_trace("paced", paced_reads());
  Replayed at_pace = replay(trace, {});
  ASSERT_EQ(at_pace.rc, 0);
  EXPECT_EQ(at_pace.job["read"]["total_ios"], 10) << "the discard, the flush and the completions are not replayed";
  EXPECT_EQ(at_pace.job["write"]["total_ios"], 0);
  EXPECT_GE(at_pace.seconds, 0.090) << "nine 10 ms gaps";
  Replayed half = replay(trace, {"--replay_time_scale=50"});
  ASSERT_EQ(half.rc, 0);
  EXPECT_GE(half.seconds, 0.045);
  EXPECT_LT(half.seconds, at_pace.seconds);
  Replayed fast = replay(trace, {"--replay_no_stall=1"});
  ASSERT_EQ(fast.rc, 0);
  EXPECT_EQ(fast.job["read"]["total_ios"], 10);
  EXPECT_LT(fast.seconds, half.seconds);
}

TEST(BenchReplay, ReadsATraceOfTheOtherByteOrder) {
  Replayed r = replay(write_trace("swapped", paced_reads(), true), {"--replay_no_stall=1"});
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.job["read"]["total_ios"], 10);
  EXPECT_EQ(r.job["read"]["io_bytes"], 10 * 4096);
}

TEST(BenchReplay, BadTracesFailBeforeAnyIo) {
  const std::string not_trace = temp_path("replay", "text.bin");
  FILE* f = std::fopen(not_trace.c_str(), "w");
  std::fputs("this is not a blktrace file, but it is longer than one record of 48 bytes\n", f);
  std::fclose(f);
  EXPECT_NE(replay(not_trace, {}).rc, 0);
  EXPECT_NE(replay(temp_path("replay", "missing.bin"), {}).rc, 0);
  // At 1 TiB, beyond the null device's 250 GiB default; and misaligned.
  EXPECT_NE(replay(write_trace("far", {queued(0, (1ull << 40) >> 9, 4096, false)}), {}).rc, 0);
  EXPECT_NE(replay(write_trace("odd", {queued(0, 8, 1000, false)}), {}).rc, 0);
  // Cut inside a record.
  const std::string cut = write_trace("cut", paced_reads());
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 10);
  EXPECT_NE(replay(cut, {}).rc, 0);
  // Only skipped events: nothing to replay.
  EXPECT_NE(replay(write_trace("empty", {queued(0, 0, 4096, true, bt::kTcDiscard)}), {}).rc, 0);
  // replay_scale and replay_align bring the far and odd ones in.
  EXPECT_EQ(replay(write_trace("scaled", {queued(0, (1ull << 40) >> 9, 4096, false)}), {"--replay_scale=8"}).rc, 0);
}

TEST(BenchReplay, AlignAndScaleMoveTheOffsets) {
  const std::string t = write_trace("align", {queued(0, 9, 4096, false), queued(5, 64, 8192, true)});
  ReplayOptions o;
  o.align = 4096;
  auto a = load_blktrace(t, o);
  ASSERT_TRUE(a) << a.status().message();
  ASSERT_EQ(a->ios.size(), 2u);
  EXPECT_EQ(a->ios[0].offset, 4096u) << "sector 9 (4608) aligned down";
  EXPECT_EQ(a->ios[1].offset, 32768u);
  EXPECT_TRUE(a->ios[1].write);
  EXPECT_EQ(a->max_len, 8192u);
  o = ReplayOptions{};
  o.scale = 2;
  o.time_scale = 200;
  auto s = load_blktrace(t, o);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ios[1].offset, 16384u);
  EXPECT_EQ(s->ios[1].time_ns, 10u);
}

// The acceptance loop: record a bench run, merge its per-CPU files as fio
// wants them, replay it with blkmq and with fio.
TEST(BenchReplay, ARecordedRunReplaysToTheSameQueuedIo) {
  if (!blkmq::test::have_blktrace_tools()) GTEST_SKIP() << "blktrace package not installed";
  const std::string rec = temp_path("replay", "rec"), rep = temp_path("replay", "rep");
  std::filesystem::remove_all(rec);
  std::filesystem::remove_all(rep);
  ASSERT_EQ(run_bench({"--name=rec", "--rw=randrw", "--bs=8k", "--size=1m", "--blktrace=" + rec}), 0);
  const std::string bin = rec + "/merged.bin";
  ASSERT_EQ(std::system(("blkparse -q -i " + rec + "/nullb0 -d " + bin + " -O >/dev/null 2>&1").c_str()), 0);
  Replayed r = replay(bin, {"--replay_no_stall=1", "--blktrace=" + rep, "--scheduler=mq-deadline"});
  ASSERT_EQ(r.rc, 0);
  auto queued_io = [](const std::string& prefix) {
    std::vector<std::string> q;
    for (const auto& l : blkmq::test::events(blkmq::test::blkparse(prefix), "Q")) q.push_back(l[6] + l[7] + l[9]);
    return q;
  };
  const auto a = queued_io(rec + "/nullb0"), b = queued_io(rep + "/nullb0");
  ASSERT_EQ(a.size(), 128u) << "1 MiB in 8 KiB I/Os";
  EXPECT_EQ(a, b) << "the same directions, sectors and sizes, in the same order";
  EXPECT_EQ(r.job["read"]["total_ios"].get<int>() + r.job["write"]["total_ios"].get<int>(), 128);
  if (!blkmq::test::have("fio")) return;
  const std::string img = temp_path("replay", "fio.img");
  blkmq::test::Shell f = blkmq::test::sh("truncate -s 16m " + img + " && fio --name=x --read_iolog=" + bin +
                                         " --replay_redirect=" + img + " --ioengine=psync --minimal");
  EXPECT_EQ(f.status, 0) << f.output;
}

}  // namespace
}  // namespace bench
