#include "bench/report.h"

#include <gtest/gtest.h>

#include <string>

namespace bench {
namespace {

RunReport sample_report() {
  RunReport r;
  r.run_ns = 2000000000ull;
  r.timestamp_ms = 1700000000123;
  r.pid = 42;
  r.driver = "null";
  DiskReport disk{"nullb0", {}};
  disk.stat.read_ios = 1000;
  disk.stat.io_ticks_ms = 1000;  // busy half of the 2 s run
  disk.stat.time_in_queue_ms = 1200;
  r.disks.push_back(disk);
  r.threads["kblockd"] = {5000000, 4, 10, 2};
  r.threads["ksoftirqd"] = {1000000, 4, 7, 0};
  JobResult j;
  j.name = "randread";
  j.runtime_ns = 2000000000ull;
  j.cpu_runtime_ns = j.runtime_ns;
  j.cpu.usr_ns = 500000000;
  j.cpu.sys_ns = 1000000000;
  j.cpu.ctx = 3;
  j.options = {{"rw", "randread"}, {"bs", "4k"}};
  DirStats& d = j.dir[kRead];
  for (uint64_t i = 1; i <= 2000; ++i) {
    d.ios++;
    d.bytes += 4096;
    d.slat.add(50);
    d.clat.add(100 + i);
    d.clat_hist.add(100 + i);
    d.lat.add(150 + i);
  }
  r.jobs = {j, j};
  r.jobs[1].name = "randread";
  return r;
}

TEST(Num2str, FioStyle) {
  EXPECT_EQ(num2str(1234, 1000), "1234");
  EXPECT_EQ(num2str(2410123, 1000), "2410k");
  EXPECT_EQ(num2str(10234567, 1000), "10.2M");
  EXPECT_EQ(num2str(98700, 1000), "98.7k");
  EXPECT_EQ(num2str(123456, 1000), "123k");
  EXPECT_EQ(num2str(9.87e9, 1024), "9413Mi");
  EXPECT_EQ(num2str(29.6e9, 1024), "27.6Gi");
  EXPECT_EQ(num2str(0, 1024), "0");
  EXPECT_EQ(num2str(4096, 1024), "4096");
  EXPECT_EQ(num2str(40960, 1024), "40.0Ki");
}

TEST(Report, JsonUsesFioFieldNames) {
  RunReport r = sample_report();
  auto j = to_json(r);
  EXPECT_EQ(j["fio version"], "blkmq-0.1");
  EXPECT_EQ(j["timestamp"], 1700000000);
  ASSERT_EQ(j["jobs"].size(), 2u);
  const auto& job = j["jobs"][0];
  for (const char* k : {"jobname", "groupid", "error", "job options", "read", "write", "trim", "usr_cpu", "sys_cpu",
                        "ctx", "majf", "minf"})
    EXPECT_TRUE(job.contains(k)) << k;
  EXPECT_EQ(job["job options"]["rw"], "randread");
  const auto& rd = job["read"];
  for (const char* k : {"io_bytes", "io_kbytes", "bw_bytes", "bw", "iops", "runtime", "total_ios", "short_ios",
                        "drop_ios", "slat_ns", "clat_ns", "lat_ns"})
    EXPECT_TRUE(rd.contains(k)) << k;
  EXPECT_EQ(rd["io_bytes"], 2000u * 4096);
  EXPECT_EQ(rd["io_kbytes"], 2000u * 4);
  EXPECT_EQ(rd["total_ios"], 2000u);
  EXPECT_EQ(rd["runtime"], 2000u);
  EXPECT_DOUBLE_EQ(rd["iops"].get<double>(), 1000.0);
  EXPECT_EQ(rd["bw_bytes"], 4096000u);
  EXPECT_EQ(rd["bw"], 4000u);  // KiB/s
  for (const char* k : {"min", "max", "mean", "stddev", "N"}) {
    EXPECT_TRUE(rd["slat_ns"].contains(k)) << k;
    EXPECT_TRUE(rd["clat_ns"].contains(k)) << k;
    EXPECT_TRUE(rd["lat_ns"].contains(k)) << k;
  }
  EXPECT_EQ(rd["clat_ns"]["min"], 101u);
  EXPECT_EQ(rd["clat_ns"]["N"], 2000u);
  const auto& pct = rd["clat_ns"]["percentile"];
  EXPECT_EQ(pct.size(), 17u);
  for (const char* k : {"1.000000", "50.000000", "99.500000", "99.990000"}) EXPECT_TRUE(pct.contains(k)) << k;
  EXPECT_NEAR(pct["50.000000"].get<double>(), 1100.0, 1100.0 / 64);
  // No samples: no percentile object, as fio.
  EXPECT_FALSE(job["write"]["clat_ns"].contains("percentile"));
  EXPECT_EQ(job["write"]["total_ios"], 0u);
  EXPECT_NEAR(job["usr_cpu"].get<double>(), 25.0, 1e-9);
  EXPECT_NEAR(job["sys_cpu"].get<double>(), 50.0, 1e-9);

  const auto& du = j["disk_util"][0];
  for (const char* k : {"name", "read_ios", "write_ios", "read_merges", "write_merges", "read_ticks", "write_ticks",
                        "in_queue", "util"})
    EXPECT_TRUE(du.contains(k)) << k;
  EXPECT_EQ(du["name"], "nullb0");
  EXPECT_NEAR(du["util"].get<double>(), 50.0, 1e-9);
  EXPECT_EQ(j["blkmq"]["threads"]["kblockd"]["cpu_ns"], 5000000u);
  EXPECT_EQ(j["blkmq"]["threads"]["kblockd"]["nr_threads"], 4u);
  EXPECT_EQ(j["blkmq"]["threads"]["ksoftirqd"]["nvcsw"], 7u);
  EXPECT_EQ(j["blkmq"]["threads"]["ksoftirqd"]["nivcsw"], 0u);
  // It round-trips through text.
  auto parsed = nlohmann::json::parse(format_json(r));
  EXPECT_EQ(parsed["jobs"][1]["jobname"], "randread");
}

TEST(Report, GroupReportingMerges) {
  RunReport r = sample_report();
  r.group_reporting = true;
  auto j = to_json(r);
  ASSERT_EQ(j["jobs"].size(), 1u);
  EXPECT_EQ(j["jobs"][0]["read"]["total_ios"], 4000u);
  EXPECT_NE(format_normal(r).find("(groupid=0, jobs=2): err= 0"), std::string::npos);
}

// --show_attr's values print under their device, a value of several lines
// indented; without any, no block.
TEST(Report, ShownAttributesPrintUnderTheirDevice) {
  RunReport r = sample_report();
  EXPECT_EQ(format_normal(r).find("Attributes at the end"), std::string::npos);
  r.attrs.push_back({{"mq/0/dispatch_lock_stat", "acquired=3 waited=0"}, {"mq/0/dispatched", "0\t1\n1\t2"}});
  const std::string t = format_normal(r);
  EXPECT_NE(t.find("\nAttributes at the end of the run:\n  nullb0: mq/0/dispatch_lock_stat: acquired=3 waited=0\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("  nullb0: mq/0/dispatched: 0\t1\n    1\t2\n"), std::string::npos) << t;
}

TEST(Report, GtodReduceHasNoLatency) {
  RunReport r = sample_report();
  for (JobResult& j : r.jobs) {
    j.gtod_reduce = true;
    for (DirStats& d : j.dir) {
      d.slat = d.clat = d.lat = LatStat();
      d.clat_hist.clear();
    }
  }
  std::string text = format_normal(r);
  EXPECT_EQ(text.find("clat"), std::string::npos) << text;
  auto j = to_json(r);
  EXPECT_EQ(j["jobs"][0]["read"]["clat_ns"]["N"], 0u);
  EXPECT_FALSE(j["jobs"][0]["read"]["clat_ns"].contains("percentile"));
}

TEST(Report, NormalLooksLikeFio) {
  RunReport r = sample_report();
  std::string t = format_normal(r);
  for (const char* s : {"randread: (groupid=0, jobs=1): err= 0: pid=42", "\n  read: IOPS=1000, BW=4000KiB/s (4096kB/s)(8000KiB/2000msec)",
                        "    slat (nsec): min=50, max=50", "    clat (nsec): min=101, max=2100",
                        "     lat (nsec): min=151", "    clat percentiles (nsec):", "     |  1.00th=[",
                        "99.99th=[", "  cpu          : usr=25.00%, sys=50.00%, ctx=3",
                        "Run status group 0 (all jobs):", "   READ: bw=8000KiB/s (8192kB/s), 4000KiB/s-4000KiB/s (4096kB/s-4096kB/s), io=15.6MiB (16.4MB)", "run=2000-2000msec",
                        "blkmq threads", "kblockd", "Disk stats (read/write):",
                        "  nullb0: ios=1000/0, merge=0/0, ticks=0/0, in_queue=1200, util=50.00%"})
    EXPECT_NE(t.find(s), std::string::npos) << "missing: " << s << "\n" << t;
}

TEST(Report, ErrorsAreShown) {
  RunReport r = sample_report();
  r.jobs[0].error = 84;
  r.jobs[0].error_msg = "verify: crc32c mismatch at offset 4096";
  std::string t = format_normal(r);
  EXPECT_NE(t.find("err=84"), std::string::npos);
  EXPECT_NE(t.find("crc32c mismatch at offset 4096"), std::string::npos);
  EXPECT_EQ(to_json(r)["jobs"][0]["error"], 84);
}

TEST(Report, Deltas) {
  ThreadUsageMap before{{"kblockd", {100, 2, 5, 1}}};
  ThreadUsageMap after{{"kblockd", {350, 3, 9, 0}}, {"null-timer", {10, 1, 0, 0}}};
  ThreadUsageMap d = thread_usage_delta(before, after);
  EXPECT_EQ(d["kblockd"].cpu_ns, 250u);
  EXPECT_EQ(d["kblockd"].nr_threads, 3u);
  EXPECT_EQ(d["kblockd"].nvcsw, 4u);
  EXPECT_EQ(d["kblockd"].nivcsw, 0u);  // a thread exited: never negative
  EXPECT_EQ(d["null-timer"].cpu_ns, 10u);
  blkmq::DiskStat a{}, b{};
  a.read_ios = 10;
  b.read_ios = 25;
  b.in_flight = 3;
  blkmq::DiskStat dd = disk_stat_delta(a, b);
  EXPECT_EQ(dd.read_ios, 15u);
  EXPECT_EQ(dd.in_flight, 3u);
}

}  // namespace
}  // namespace bench
