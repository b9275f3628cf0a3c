// `blkmq bench JOBFILE` end to end against the null device: groups run in
// order, JSON carries the groupids, --cycle switches and refusals count.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/bench_run.h"

namespace bench {
namespace {

std::string temp_path(const std::string& stem) { return bench::temp_path("blkmq_e2e", stem); }

// --scheduler is applied before the scheduler's own attributes, whatever
// the order on the command line.
TEST(BenchEndToEnd, SchedulerAttributesFollowTheScheduler) {
  EXPECT_EQ(run_bench({"--attr", "queue/iosched/insert_lists=locked", "--scheduler=mq-deadline",
                       "--attr", "queue/nr_requests=8", "--name=x", "--rw=write", "--size=64k"}),
            0);
  EXPECT_NE(run_bench({"--scheduler=kyber", "--attr", "queue/iosched/insert_lists=locked", "--name=x",
                       "--rw=write", "--size=64k"}),
            0);
}

// offset_increment gives each clone its own region: two clones writing
// 64 KiB each at 0 and 1 MiB, then a verify pass reading both back.
// As fio does, a job whose file does not exist lays it out at the jobs'
// extent first (here for the ublk loop target, which cannot create one).
TEST(BenchEndToEnd, MissingFileIsLaidOutAtTheJobSize) {
  const std::string f = temp_path("laid_out.img");
  std::remove(f.c_str());
  ASSERT_EQ(run_bench({"--driver=ublk", "--target=loop", "--filename=" + f, "--name=x", "--rw=write", "--bs=64k",
                       "--size=8m"}),
            0);
  std::ifstream in(f, std::ios::binary | std::ios::ate);
  EXPECT_EQ(static_cast<long>(in.tellg()), 8L << 20);
  std::remove(f.c_str());
  // Without a size there is nothing to lay out: the driver's own error stands.
  EXPECT_EQ(run_bench({"--driver=ublk", "--target=loop", "--filename=" + f, "--name=x", "--rw=read"}), 1);
}

TEST(BenchEndToEnd, OffsetIncrementSeparatesClones) {
  const std::string out = temp_path("offset_inc.json");
  ASSERT_EQ(run_bench({"--memory_backed=1", "--name=x", "--rw=write", "--bs=4k", "--size=64k", "--numjobs=2",
                       "--offset_increment=1m", "--verify=crc32c", "--output-format=json", "--output=" + out}),
            0);
  nlohmann::json j = read_json(out);
  ASSERT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(j["jobs"][0]["write"]["io_bytes"], 64u << 10);
  EXPECT_EQ(j["jobs"][1]["write"]["io_bytes"], 64u << 10);
  // Past the end of the device for the second clone: refused.
  EXPECT_NE(run_bench({"--null.size=1", "--name=x", "--rw=write", "--size=512k", "--numjobs=2",
                       "--offset_increment=768k"}),
            0);
}

// --ndevices: clone N of a job runs on device N % ndevices; every device
// is reported, and a cycled attribute is switched on each.
TEST(BenchEndToEnd, SeveralDevicesOneJobCloneEach) {
  const std::string out = temp_path("ndevices.json");
  ASSERT_EQ(run_bench({"--ndevices=3", "--memory_backed=1", "--name=x", "--rw=write", "--bs=4k", "--size=64k",
                       "--numjobs=3", "--cycle=queue/nomerges=0,1@1", "--output-format=json", "--output=" + out}),
            0);
  nlohmann::json j = read_json(out);
  ASSERT_EQ(j["jobs"].size(), 3u);
  const auto& disks = j["disk_util"];
  ASSERT_EQ(disks.size(), 3u);
  std::set<std::string> names;
  for (const auto& d : disks) {
    EXPECT_EQ(d["write_ios"], 16u) << d["name"];  // one clone's 64 KiB each
    names.insert(d["name"].get<std::string>());
  }
  EXPECT_EQ(names.size(), 3u);
  EXPECT_EQ(j["blkmq"]["devices"].size(), 3u);
  EXPECT_NE(run_bench({"--ndevices=0", "--name=x", "--size=64k"}), 0);
  EXPECT_NE(run_bench({"--ndevices=65", "--name=x", "--size=64k"}), 0);
}

TEST(BenchEndToEnd, JobFileGroupsRunInOrder) {
  const std::string job = temp_path("two_groups.fio");
  const std::string out = temp_path("two_groups.json");
  std::ofstream(job) << "; two groups on the null device\n"
                        "[global]\nbs=4k\nsize=1m\nioengine=psync\nmemory_backed=1\n\n"
                        "[writer]\nrw=write\n"
                        "[writer2]\nrw=randwrite\noffset=1m\n"
                        "[reader]\nstonewall\nrw=read\nsize=2m\n";
  int rc = run_bench({job, "--output-format=json", "--output=" + out, "--cycle=queue/nomerges=0,1@1"});
  ASSERT_EQ(rc, 0);
  nlohmann::json j = read_json(out);
  ASSERT_EQ(j["jobs"].size(), 3u);
  EXPECT_EQ(j["jobs"][0]["jobname"], "writer");
  EXPECT_EQ(j["jobs"][0]["groupid"], 0);
  EXPECT_EQ(j["jobs"][1]["groupid"], 0);
  EXPECT_EQ(j["jobs"][2]["jobname"], "reader");
  EXPECT_EQ(j["jobs"][2]["groupid"], 1);
  EXPECT_EQ(j["jobs"][0]["write"]["io_bytes"], 1u << 20);
  EXPECT_EQ(j["jobs"][2]["read"]["io_bytes"], 2u << 20);
  const auto& groups = j["blkmq"]["groups"];
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0]["groupid"], 0);
  EXPECT_EQ(groups[1]["groupid"], 1);
  EXPECT_GE(groups[1]["start_ns"].get<uint64_t>(), groups[0]["end_ns"].get<uint64_t>());
  ASSERT_EQ(j["blkmq"]["cycles"].size(), 1u);
  EXPECT_EQ(j["blkmq"]["cycles"][0]["path"], "queue/nomerges");
  EXPECT_EQ(j["blkmq"]["cycles"][0]["refused"], 0);
  std::remove(job.c_str());
  std::remove(out.c_str());
}

TEST(BenchEndToEnd, GroupReportingPerGroup) {
  const std::string out = temp_path("gr.json");
  int rc = run_bench({"--bs=4k", "--size=256k", "--ioengine=sync", "--group_reporting", "--name=a", "--rw=write",
                      "--numjobs=2", "--name=b", "--stonewall", "--rw=read", "--numjobs=2", "--output-format=json",
                      "--output=" + out});
  ASSERT_EQ(rc, 0);
  nlohmann::json j = read_json(out);
  ASSERT_EQ(j["jobs"].size(), 2u);  // one merged entry per group
  EXPECT_EQ(j["jobs"][0]["groupid"], 0);
  EXPECT_EQ(j["jobs"][0]["write"]["io_bytes"], 512u << 10);
  EXPECT_EQ(j["jobs"][1]["groupid"], 1);
  EXPECT_EQ(j["jobs"][1]["read"]["io_bytes"], 512u << 10);
  std::remove(out.c_str());
}

TEST(BenchEndToEnd, RefusedCycleValueFailsTheRun) {
  const std::string out = temp_path("refused.json");
  // Without a scheduler nr_requests is at most the queue depth (64 here).
  int rc = run_bench({"--rw=randread", "--bs=4k", "--size=1m", "--runtime=200ms", "--time_based",
                      "--hw_queue_depth=64", "--cycle=queue/nr_requests=4,100000@20", "--output-format=json",
                      "--output=" + out});
  EXPECT_EQ(rc, 1);
  nlohmann::json j = read_json(out);
  const auto& c = j["blkmq"]["cycles"][0];
  EXPECT_GT(c["switches"].get<uint64_t>(), 0u);
  EXPECT_GT(c["refused"].get<uint64_t>(), 0u);
  EXPECT_NE(c["first_error"].get<std::string>().find("100000"), std::string::npos);
  std::remove(out.c_str());
}

// Regression (issue 13): a hipri job deeper than the poll queue's tags
// slept for a tag that only its own polling could free, and its I/O timed
// out. Polled bios now go nowait and are polled for and retried, as
// io_uring's IOPOLL does; the run ends in time and without errors.
TEST(BenchEndToEnd, PolledJobDeeperThanItsQueueDoesNotSleepForATag) {
  EXPECT_EQ(run_bench({"--driver=null", "--memory_backed=1", "--poll_queues=1", "--hipri=1", "--hw_queue_depth=4",
                       "--name=x", "--rw=randwrite", "--bs=4k", "--iodepth=32", "--size=16m", "--verify=crc32c"}),
            0);
}

}  // namespace
}  // namespace bench
