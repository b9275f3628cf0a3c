#include "bench/jobfile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/cycle.h"
#include "bench/options.h"

namespace bench {
namespace {

// A job file in the test's temporary directory, removed at the end.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    path_ = ::testing::TempDir() + "blkmq_job_" + std::to_string(getpid()) + "_" + std::to_string(counter_++) + ".fio";
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

ParseOutcome parse(std::vector<std::string> a, BenchConfig* cfg, const std::vector<blkmq::ParamInfo>& params = {}) {
  a.insert(a.begin(), "bench");
  std::vector<const char*> v;
  for (const auto& x : a) v.push_back(x.c_str());
  return parse_bench_args(static_cast<int>(v.size()), v.data(), params, cfg);
}

TEST(JobIni, SectionsEntriesAndComments) {
  auto r = parse_job_ini(
      "; a comment\n# another\n[global]\nbs=8k ; trailing comment\n  time_based  \n\n"
      "[a]\nrw = randread\nattr=queue/x=a#b\n[ b job ]\r\n",
      "t.fio");
  ASSERT_TRUE(r) << r.status().message();
  const auto& s = *r;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].name, "global");
  ASSERT_EQ(s[0].entries.size(), 2u);
  EXPECT_EQ(s[0].entries[0].key, "bs");
  EXPECT_EQ(s[0].entries[0].value, "8k");
  EXPECT_EQ(s[0].entries[0].line, 4u);
  EXPECT_TRUE(s[0].entries[1].bare);
  EXPECT_EQ(s[0].entries[1].key, "time_based");
  EXPECT_EQ(s[1].name, "a");
  EXPECT_EQ(s[1].entries[0].value, "randread");
  EXPECT_EQ(s[1].entries[1].value, "queue/x=a#b");  // '#' inside a value is no comment
  EXPECT_EQ(s[2].name, "b job");
  EXPECT_EQ(s[2].line, 10u);
}

TEST(JobIni, BadLinesNameTheLine) {
  struct Case {
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"[global]\nbs=4k\n[unclosed\n", "t.fio:3: section header"},
      {"bs=4k\n[job]\n", "t.fio:1: option 'bs' outside a section"},
      {"[job]\n\n=4k\n", "t.fio:3:"},
      {"[job]\nrw randread\n", "t.fio:2:"},
      {"[]\n", "t.fio:1: empty section name"},
  };
  for (const Case& c : cases) {
    auto r = parse_job_ini(c.text, "t.fio");
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
  }
}

TEST(JobFile, GlobalsSectionsAndOverrides) {
  TempFile f(
      "[global]\nbs=8k\nrw=randread\niodepth=4\n"
      "[one]\niodepth=16\n"
      "[global]\nbs=16k\n"  // a later [global] applies to the jobs after it
      "[two]\nnumjobs=2\ntime_based\nruntime=1\n");
  BenchConfig cfg;
  ParseOutcome po = parse({"--rw=write", f.path(), "--iodepth=2", "--output-format=json"}, &cfg);
  ASSERT_TRUE(po.proceed) << po.message;
  ASSERT_EQ(cfg.jobs.size(), 2u);
  const JobSpec& one = cfg.jobs[0];
  const JobSpec& two = cfg.jobs[1];
  EXPECT_EQ(one.name, "one");
  EXPECT_EQ(one.bs, 8192u);
  EXPECT_EQ(one.rw, RwMode::randread);  // the file's [global] beats the default before it
  EXPECT_EQ(one.iodepth, 2u);           // the command line after the file beats the section
  EXPECT_EQ(two.name, "two");
  EXPECT_EQ(two.bs, 16384u);
  EXPECT_EQ(two.numjobs, 2u);
  EXPECT_TRUE(two.time_based);
  EXPECT_EQ(two.iodepth, 2u);
  EXPECT_EQ(cfg.output_format, OutputFormat::json);
}

TEST(JobFile, StonewallStartsGroups) {
  TempFile f("[a]\n[b]\n[c]\nstonewall\n[d]\n[e]\nwait_for_previous=1\n");
  BenchConfig cfg;
  ASSERT_TRUE(parse({f.path()}, &cfg).proceed);
  std::vector<unsigned> gids;
  for (const JobSpec& j : cfg.jobs) gids.push_back(j.groupid);
  EXPECT_EQ(gids, (std::vector<unsigned>{0, 0, 1, 1, 2}));
}

TEST(JobFile, DeviceOptionsOnlyInGlobal) {
  std::vector<blkmq::ParamInfo> params = {{"irqmode", "1", "irq mode"}};
  TempFile ok("[global]\nscheduler=none\nirqmode=0\nattr=queue/nomerges=2\ncycle=queue/nomerges=0,2@50\n[j]\n");
  BenchConfig cfg;
  ParseOutcome po = parse({ok.path()}, &cfg, params);
  ASSERT_TRUE(po.proceed) << po.message;
  EXPECT_EQ(cfg.device_params.at("irqmode"), "0");
  EXPECT_EQ(cfg.device_params.at("attr:queue/scheduler"), "none");
  ASSERT_EQ(cfg.cycles.size(), 1u);
  for (const char* text : {"[j]\nscheduler=none\n", "[j]\nirqmode=2\n", "[j]\ncycle=queue/nomerges=0@5\n"}) {
    TempFile bad(text);
    po = parse({bad.path()}, &cfg, params);
    EXPECT_FALSE(po.proceed) << text;
    EXPECT_NE(po.message.find(":2: "), std::string::npos) << po.message;
    EXPECT_NE(po.message.find("device option"), std::string::npos) << po.message;
  }
}

// fio's direct= is per job: in a job section it marks that job's writes
// (wbt's writeback) and leaves the device's own direct= alone, so a reader
// and a buffered writer share one device (bench/fidelity's wbt case).
TEST(JobFile, DirectInAJobSectionMarksItsWritesNotTheDevice) {
  std::vector<blkmq::ParamInfo> params = {{"direct", "1", "O_DIRECT"}};
  TempFile f("[global]\ndirect=1\n[reader]\nrw=randread\n[writer]\nrw=write\ndirect=0\n");
  BenchConfig cfg;
  ParseOutcome po = parse({f.path()}, &cfg, params);
  ASSERT_TRUE(po.proceed) << po.message;
  ASSERT_EQ(cfg.jobs.size(), 2u);
  EXPECT_FALSE(cfg.jobs[0].writeback);
  EXPECT_TRUE(cfg.jobs[1].writeback);
  EXPECT_EQ(cfg.device_params.at("direct"), "1");
  TempFile bad("[j]\ndirect=maybe\n");
  po = parse({bad.path()}, &cfg, params);
  EXPECT_FALSE(po.proceed);
  EXPECT_NE(po.message.find(":2: "), std::string::npos) << po.message;
}

TEST(JobFile, BadOptionsNameFileAndLine) {
  struct Case {
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"[j]\nbs=4x\n", ":2: --bs: '4x' is not a size"},
      {"[j]\n\nnosuch=1\n", ":3: unknown option"},
      {"[j]\nbs\n", ":2: option 'bs' needs a value"},
      {"[global]\nbs=4k\n", "no job sections"},
      {"[j]\nsize=512\n", "job 'j': "},  // finalize: smaller than bs, names the job
  };
  for (const Case& c : cases) {
    TempFile f(c.text);
    BenchConfig cfg;
    ParseOutcome po = parse({f.path()}, &cfg);
    EXPECT_FALSE(po.proceed) << c.text;
    EXPECT_EQ(po.exit_code, 1);
    EXPECT_NE(po.message.find(c.want), std::string::npos) << po.message;
    EXPECT_NE(po.message.find(f.path()), std::string::npos) << po.message;
  }
}

TEST(JobFile, MissingFileIsAnError) {
  BenchConfig cfg;
  ParseOutcome po = parse({"/nonexistent/job.fio"}, &cfg);
  EXPECT_FALSE(po.proceed);
  EXPECT_NE(po.message.find("cannot open job file"), std::string::npos) << po.message;
}

TEST(CommandLine, SeveralNamesStartJobs) {
  BenchConfig cfg;
  ParseOutcome po = parse({"--bs=8k", "--name=w", "--rw=write", "--name=r", "--stonewall", "--rw=read", "--bs=16k"},
                          &cfg);
  ASSERT_TRUE(po.proceed) << po.message;
  ASSERT_EQ(cfg.jobs.size(), 2u);
  EXPECT_EQ(cfg.jobs[0].name, "w");
  EXPECT_EQ(cfg.jobs[0].rw, RwMode::write);
  EXPECT_EQ(cfg.jobs[0].bs, 8192u);
  EXPECT_EQ(cfg.jobs[0].groupid, 0u);
  EXPECT_EQ(cfg.jobs[1].name, "r");
  EXPECT_EQ(cfg.jobs[1].rw, RwMode::read);
  EXPECT_EQ(cfg.jobs[1].bs, 16384u);
  EXPECT_EQ(cfg.jobs[1].groupid, 1u);
}

TEST(CommandLine, NameWithJobFileIsRefused) {
  TempFile f("[j]\n");
  BenchConfig cfg;
  EXPECT_FALSE(parse({f.path(), "--name=x"}, &cfg).proceed);
  EXPECT_FALSE(parse({"--name=x", f.path()}, &cfg).proceed);
}

TEST(CommandLine, LaterOptionWins) {
  BenchConfig cfg;
  ASSERT_TRUE(parse({"--bs=8k", "--bs=16k"}, &cfg).proceed);
  EXPECT_EQ(cfg.jobs[0].bs, 16384u);
}

TEST(Cycle, Parses) {
  auto c = parse_cycle("queue/scheduler=none,mq-deadline,kyber@100");
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(c->path, "queue/scheduler");
  EXPECT_EQ(c->values, (std::vector<std::string>{"none", "mq-deadline", "kyber"}));
  EXPECT_EQ(c->period_ms, 100u);
  c = parse_cycle("queue/nr_requests=4@25ms");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->values.size(), 1u);
  EXPECT_EQ(c->period_ms, 25u);
}

TEST(Cycle, RefusesBadSyntax) {
  for (const char* bad : {"queue/scheduler", "=a@5", "queue/x=a,b", "queue/x=a,,b@5", "queue/x=@5", "queue/x=a@0",
                          "queue/x=a@1.5", "queue/x=a@"}) {
    auto c = parse_cycle(bad);
    ASSERT_FALSE(c) << bad;
    EXPECT_NE(c.status().message().find("--cycle"), std::string::npos);
  }
}

TEST(Cycle, RepeatableOnCommandLine) {
  BenchConfig cfg;
  ParseOutcome po = parse({"--cycle", "queue/scheduler=none@100", "--cycle=queue/nr_requests=4,64@50"}, &cfg);
  ASSERT_TRUE(po.proceed) << po.message;
  ASSERT_EQ(cfg.cycles.size(), 2u);
  EXPECT_EQ(cfg.cycles[1].path, "queue/nr_requests");
  EXPECT_FALSE(parse({"--cycle=bogus"}, &cfg).proceed);
}

}  // namespace
}  // namespace bench
