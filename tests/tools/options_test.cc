#include "bench/options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bench {
namespace {

struct Args {
  std::vector<std::string> s;
  std::vector<const char*> argv() const {
    std::vector<const char*> v;
    for (const auto& x : s) v.push_back(x.c_str());
    return v;
  }
};

ParseOutcome parse(std::vector<std::string> a, BenchConfig* cfg,
                   const std::vector<blkmq::ParamInfo>& params = {}) {
  a.insert(a.begin(), "bench");
  Args args{a};
  auto v = args.argv();
  return parse_bench_args(static_cast<int>(v.size()), v.data(), params, cfg);
}

// Sizes and times are base/parse.h's (tests/base/parse_test.cc); here, that
// the bench's options read them with fio's units and their own bounds.
TEST(Options, SizesAndTimesUseFiosUnits) {
  BenchConfig cfg;
  ASSERT_TRUE(parse({"--bs=4KiB", "--size=2G", "--offset=1m", "--offset_increment=512", "--runtime=250ms",
                     "--ramp_time=1", "--replay_align=4k", "--rwmixread=70%"},
                    &cfg)
                  .proceed);
  const JobSpec& j = cfg.jobs[0];
  EXPECT_EQ(j.bs, 4096u);
  EXPECT_EQ(j.size, 2ull << 30);
  EXPECT_EQ(j.offset, 1u << 20);
  EXPECT_EQ(j.offset_increment, 512u);
  EXPECT_EQ(j.runtime_ns, 250000000ull);
  EXPECT_EQ(j.ramp_ns, 1000000000ull);
  EXPECT_EQ(j.replay.align, 4096u);
  EXPECT_EQ(j.rwmixread, 70u);
}

// Every size error states that a bare number is bytes, and the bounds.
TEST(Options, SizeErrorsStateTheUnitAndBounds) {
  BenchConfig cfg;
  ParseOutcome po = parse({"--bs=1000"}, &cfg);
  EXPECT_EQ(po.message,
            "blkmq bench: --bs: '1000' is not a multiple of 512 bytes; expected a number of bytes, or one with a "
            "suffix k, m, g, t, p or e (powers of 1024: 64m, 2g; b or ib may follow), from 512 bytes to 256 MiB, "
            "a multiple of 512 bytes");
  po = parse({"--size=0"}, &cfg);
  EXPECT_NE(po.message.find("--size: '0' is out of range; expected a number of bytes"), std::string::npos)
      << po.message;
  po = parse({"--replay_align=3k"}, &cfg);
  EXPECT_NE(po.message.find("--replay_align: '3k' is not a power of two"), std::string::npos) << po.message;
}

TEST(Options, Defaults) {
  BenchConfig cfg;
  ParseOutcome po = parse({}, &cfg);
  ASSERT_TRUE(po.proceed) << po.message;
  ASSERT_EQ(cfg.jobs.size(), 1u);
  const JobSpec& j = cfg.jobs[0];
  EXPECT_EQ(j.rw, RwMode::read);
  EXPECT_EQ(j.bs, 4096u);
  EXPECT_EQ(j.iodepth, 1u);
  EXPECT_EQ(j.rwmixread, 50u);
  EXPECT_EQ(j.ioengine, IoEngine::io_uring);
  EXPECT_EQ(cfg.driver, "null");
  EXPECT_EQ(cfg.output_format, OutputFormat::normal);
}

TEST(Options, FioSyntax) {
  BenchConfig cfg;
  ParseOutcome po = parse({"--name=null-randread", "--rw=randrw", "--rwmixread=70", "--bs=64k", "--size=1g",
                           "--offset=1m", "--offset_increment=64m", "--iodepth=32", "--iodepth_batch=8", "--iodepth_batch_complete=4",
                           "--numjobs=2", "--runtime=3s", "--time_based", "--ramp_time", "1", "--hipri",
                           "--prio=3", "--prioclass=1", "--cgroup_weight=250", "--gtod_reduce", "--norandommap", "--randseed=7",
                           "--group_reporting", "--output-format=json", "--output=/tmp/x.json", "--thread"},
                          &cfg);
  ASSERT_TRUE(po.proceed) << po.message;
  const JobSpec& j = cfg.jobs[0];
  EXPECT_EQ(j.name, "null-randread");
  EXPECT_EQ(j.rw, RwMode::randrw);
  EXPECT_EQ(j.rwmixread, 70u);
  EXPECT_EQ(j.bs, 65536u);
  EXPECT_EQ(j.size, 1ull << 30);
  EXPECT_EQ(j.offset, 1u << 20);
  EXPECT_EQ(j.offset_increment, 64u << 20);
  EXPECT_EQ(j.iodepth, 32u);
  EXPECT_EQ(j.iodepth_batch_submit, 8u);
  EXPECT_EQ(j.iodepth_batch_complete, 4u);
  EXPECT_EQ(j.numjobs, 2u);
  EXPECT_EQ(j.runtime_ns, 3000000000ull);
  EXPECT_TRUE(j.time_based);
  EXPECT_EQ(j.ramp_ns, 1000000000ull);
  EXPECT_TRUE(j.hipri);
  EXPECT_EQ(j.prio, 3);
  EXPECT_EQ(j.prioclass, 1);
  EXPECT_EQ(j.cgroup_weight, 250);
  EXPECT_TRUE(j.gtod_reduce);
  EXPECT_TRUE(j.norandommap);
  EXPECT_TRUE(j.randseed_given);
  EXPECT_EQ(j.randseed, 7u);
  EXPECT_TRUE(cfg.group_reporting);
  EXPECT_EQ(cfg.output_format, OutputFormat::json);
  EXPECT_EQ(cfg.output_file, "/tmp/x.json");
  // "job options" keeps the canonical names of what was given.
  bool saw_batch = false;
  for (auto& [k, v] : j.given) saw_batch |= (k == "iodepth_batch_submit" && v == "8");
  EXPECT_TRUE(saw_batch);
}

TEST(Options, FlagWithValue) {
  BenchConfig cfg;
  ParseOutcome po = parse({"--time_based=0", "--randrepeat=0", "--runtime=1"}, &cfg);
  ASSERT_TRUE(po.proceed) << po.message;
  EXPECT_FALSE(cfg.jobs[0].time_based);
  EXPECT_FALSE(cfg.jobs[0].randrepeat);
}

TEST(Options, SyncEnginesForceDepthOne) {
  BenchConfig cfg;
  ParseOutcome po = parse({"--ioengine=psync", "--iodepth=32", "--iodepth_batch_submit=8"}, &cfg);
  ASSERT_TRUE(po.proceed) << po.message;
  EXPECT_EQ(cfg.jobs[0].iodepth, 1u);
  EXPECT_EQ(cfg.jobs[0].iodepth_batch_submit, 1u);
}

TEST(Options, BatchCappedAtDepth) {
  BenchConfig cfg;
  ASSERT_TRUE(parse({"--iodepth=4", "--iodepth_batch_submit=16", "--iodepth_batch_complete=16"}, &cfg).proceed);
  EXPECT_EQ(cfg.jobs[0].iodepth_batch_submit, 4u);
  EXPECT_EQ(cfg.jobs[0].iodepth_batch_complete, 4u);
}

TEST(Options, PrioDefaults) {
  BenchConfig cfg;
  ASSERT_TRUE(parse({"--prio=1"}, &cfg).proceed);
  EXPECT_EQ(cfg.jobs[0].prioclass, 2);
  ASSERT_TRUE(parse({"--prioclass=3"}, &cfg).proceed);
  EXPECT_EQ(cfg.jobs[0].prio, 4);
}

TEST(Options, CgroupAndNodelete) {
  BenchConfig cfg;
  ASSERT_TRUE(parse({"--cgroup=a/b", "--cgroup_nodelete"}, &cfg).proceed);
  EXPECT_EQ(cfg.jobs[0].cgroup, "a/b");
  EXPECT_TRUE(cfg.jobs[0].cgroup_nodelete);
  ASSERT_TRUE(parse({"--cgroup=t"}, &cfg).proceed);
  EXPECT_FALSE(cfg.jobs[0].cgroup_nodelete);
}

TEST(Options, RwmixwriteSetsRead) {
  BenchConfig cfg;
  ASSERT_TRUE(parse({"--rw=rw", "--rwmixwrite=30"}, &cfg).proceed);
  EXPECT_EQ(cfg.jobs[0].rwmixread, 70u);
  ASSERT_TRUE(parse({"--readwrite=randrw"}, &cfg).proceed);
  EXPECT_EQ(cfg.jobs[0].rw, RwMode::randrw);
}

TEST(Options, BadValuesExitOne) {
  const std::vector<std::vector<std::string>> bad = {
      {"--bogus=1"},          {"--bs=4x"},           {"--bs=1000"},          {"--rwmixread=101"},
      {"--iodepth=0"},        {"--rw=sideways"},     {"--ioengine=posixaio"}, {"--prio=8"},
      {"--prioclass=0"},      {"--runtime=5q"},      {"--time_based"},       {"--output-format=terse"},
      {"--verify=md5"},       {"--numjobs=0"},       {"--attr=novalue"},     {"--size=512", "--bs=4k"},
      {"--offset=100"},       {"--time_based=maybe"}, {"positional"},      {"--cgroup_weight=0"},
      {"--cgroup_weight=1001"}, {"--offset_increment=1000"}, {"--cgroup=a b"}, {"--cgroup="},
  };
  for (const auto& a : bad) {
    BenchConfig cfg;
    ParseOutcome po = parse(a, &cfg);
    EXPECT_FALSE(po.proceed) << a[0];
    EXPECT_EQ(po.exit_code, 1) << a[0];
    EXPECT_FALSE(po.message.empty()) << a[0];
  }
}

TEST(Options, ErrorNamesTheOption) {
  BenchConfig cfg;
  ParseOutcome po = parse({"--rwmixread=150"}, &cfg);
  EXPECT_EQ(po.message, "blkmq bench: --rwmixread: '150' is out of range; expected a percentage from 0 to 100");
  po = parse({"--bs=4y"}, &cfg);
  EXPECT_NE(po.message.find("--bs: '4y' is not a size"), std::string::npos) << po.message;
  po = parse({"--iodepth=0"}, &cfg);
  EXPECT_EQ(po.message, "blkmq bench: --iodepth: '0' is out of range; expected an integer from 1 to 65536");
  po = parse({"--runtime=5q"}, &cfg);
  EXPECT_NE(po.message.find("--runtime: '5q' is not a time; expected a number of seconds"), std::string::npos)
      << po.message;
  po = parse({"--rw=sideways"}, &cfg);
  EXPECT_EQ(po.message,
            "blkmq bench: --rw: 'sideways' is not accepted; expected read, write, randread, randwrite, "
            "rw/readwrite or randrw");
}

TEST(Options, UnknownOptionFailsWithItsName) {
  BenchConfig cfg;
  ParseOutcome po = parse({"--name=x", "--no_such_option=3"}, &cfg);
  EXPECT_FALSE(po.proceed);
  EXPECT_EQ(po.exit_code, 1);
  EXPECT_NE(po.message.find("--no_such_option"), std::string::npos) << po.message;
}

// fio options with no meaning here are accepted, each reported once; where
// the driver has the parameter (filename, direct) it is set instead, and
// buffered=B sets direct=!B.
TEST(Options, IgnoredFioOptionsAreAcceptedAndListedOnce) {
  BenchConfig cfg;
  ParseOutcome po = parse({"--invalidate=1", "--fixedbufs=1", "--name=x", "--invalidate=1", "--filename=/dev/nvme0n1",
                           "--buffered=0", "--registerfiles"},
                          &cfg);
  ASSERT_TRUE(po.proceed) << po.message;
  EXPECT_EQ(cfg.ignored_options,
            (std::vector<std::string>{"invalidate", "filename", "buffered", "registerfiles"}));
  EXPECT_TRUE(cfg.jobs.back().fixedbufs) << "fixedbufs is the job's: its buffers are registered";
  EXPECT_TRUE(cfg.device_params.empty());
  BenchConfig ucfg;
  std::vector<blkmq::ParamInfo> uring = {{"filename", "", "file"}, {"direct", "0", "O_DIRECT"}};
  po = parse({"--driver=uring", "--filename=/tmp/f", "--buffered=0", "--invalidate=1", "--name=x"}, &ucfg, uring);
  ASSERT_TRUE(po.proceed) << po.message;
  EXPECT_EQ(ucfg.device_params.at("filename"), "/tmp/f");
  EXPECT_EQ(ucfg.device_params.at("direct"), "1");
  EXPECT_EQ(ucfg.ignored_options, (std::vector<std::string>{"invalidate"}));
}

TEST(Options, Help) {
  BenchConfig cfg;
  std::vector<blkmq::ParamInfo> params = {{"irqmode", "1", "0 none, 1 softirq, 2 timer"}};
  ParseOutcome po = parse({"--help"}, &cfg, params);
  EXPECT_FALSE(po.proceed);
  EXPECT_EQ(po.exit_code, 0);
  EXPECT_NE(po.message.find("--iodepth_batch_submit"), std::string::npos);
  EXPECT_NE(po.message.find("--irqmode"), std::string::npos);
}

TEST(Options, DriverParamsAndAttrs) {
  BenchConfig cfg;
  std::vector<blkmq::ParamInfo> params = {{"irqmode", "1", "irq mode"}, {"bs", "512", "block size"}};
  ParseOutcome po = parse({"--driver=null", "--irqmode=0", "--null.bs=4096", "--bs=8k", "--scheduler=mq-deadline",
                           "--attr", "queue/nomerges=2", "--attr=queue/rq_affinity=2"},
                          &cfg, params);
  ASSERT_TRUE(po.proceed) << po.message;
  EXPECT_EQ(cfg.device_params.at("irqmode"), "0");
  EXPECT_EQ(cfg.device_params.at("bs"), "4096");  // the driver's bs, reached as --null.bs
  EXPECT_EQ(cfg.jobs[0].bs, 8192u);                // the job's bs
  EXPECT_EQ(cfg.device_params.at("attr:queue/scheduler"), "mq-deadline");
  EXPECT_EQ(cfg.device_params.at("attr:queue/nomerges"), "2");
  EXPECT_EQ(cfg.device_params.at("attr:queue/rq_affinity"), "2");
}

TEST(Options, PrescanDriver) {
  const char* a1[] = {"bench", "--rw=read", "--driver=uring"};
  EXPECT_EQ(prescan_driver(3, a1), "uring");
  const char* a2[] = {"bench", "--driver", "scsi"};
  EXPECT_EQ(prescan_driver(3, a2), "scsi");
  const char* a3[] = {"bench"};
  EXPECT_EQ(prescan_driver(1, a3), "null");
}

// A fio line with a filename and no --driver ran on null, the filename
// ignored (issue 27); it opens the file, as fio would. An explicit driver
// still wins, wherever it is.
TEST(Options, AFilenameWithoutADriverIsTheFileDriver) {
  const char* a1[] = {"bench", "--name=x", "--filename=/dev/sda", "--rw=read"};
  EXPECT_EQ(prescan_driver(4, a1), "uring");
  const char* a2[] = {"bench", "--filename", "/tmp/f"};
  EXPECT_EQ(prescan_driver(3, a2), "uring");
  const char* a3[] = {"bench", "--filename=/tmp/f", "--driver=ublk"};
  EXPECT_EQ(prescan_driver(3, a3), "ublk");
}

TEST(Options, ApplyOptionIsKeyValue) {
  // The job-file path: one (key, value) at a time.
  BenchConfig cfg;
  JobSpec job;
  EXPECT_TRUE(apply_option(cfg, job, "rw", "randwrite").ok());
  EXPECT_TRUE(apply_option(cfg, job, "blocksize", "16k").ok());
  EXPECT_EQ(job.rw, RwMode::randwrite);
  EXPECT_EQ(job.bs, 16384u);
  Status st = apply_option(cfg, job, "nosuch", "1");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nosuch"), std::string::npos);
  // A refused value changes nothing.
  EXPECT_FALSE(apply_option(cfg, job, "bs", "3k1").ok());
  EXPECT_EQ(job.bs, 16384u);
}

}  // namespace
}  // namespace bench
