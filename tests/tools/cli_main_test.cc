// The `blkmq` command itself: its version, and names a user of the kernel
// types (the legacy "deadline" scheduler name) that the subcommands take.
#include <gtest/gtest.h>

#include <string>

#include "support/cli_process.h"

namespace blkmq::test {
namespace {

const std::string kCli = BLKMQ_CLI_PATH;

// `blkmq --version` was missing (issue 27): the project's version, exit 0.
TEST(CliMain, VersionPrintsTheProjectsVersion) {
  for (const char* flag : {"--version", "-V"}) {
    const Shell r = sh(kCli + " " + flag + " 2>&1", 10);
    EXPECT_EQ(r.status, 0) << flag;
    EXPECT_EQ(r.output, std::string("blkmq ") + BLKMQ_PROJECT_VERSION + "\n") << flag;
  }
  const Shell h = sh(kCli + " --help", 10);
  EXPECT_NE(h.output.find("--version"), std::string::npos) << h.output;
}

// Runs `blkmq ARGS` and checks its exit status, that its output holds
// `has` and, when given, not `lacks`.
void expect_cli(const std::string& args, int status, const std::string& has, const std::string& lacks = "") {
  const Shell r = sh(kCli + " " + args + " 2>&1", 60);
  EXPECT_EQ(r.status, status) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(has), std::string::npos) << args << "\n" << r.output;
  if (!lacks.empty()) {
    EXPECT_EQ(r.output.find(lacks), std::string::npos) << args << "\n" << r.output;
  }
}

// --scheduler=deadline was refused (issue 27); the kernel takes it as
// mq-deadline's alias, and so does every tool that sets queue/scheduler.
TEST(CliMain, DeadlineSchedulerNameRunsMqDeadline) {
  expect_cli("bench --driver=null --scheduler=deadline --name=x --rw=randread --bs=4k --size=4m"
             " --show_attr=queue/scheduler", 0, "[mq-deadline]");
}

// --show_attr with a path no device has printed nothing and exited 0
// (issue 27); it now names the path and fails the run, as --attr does.
TEST(CliMain, ShowAttrOfAMissingAttributeIsAnError) {
  expect_cli("bench --driver=null --name=x --rw=randread --bs=4k --size=1m --show_attr=queue/no_such_attr", 1,
             "--show_attr nullb0: queue/no_such_attr: ");
}

// fio's cgroup=NAME (issue 28): the job's I/O is charged to /NAME, which
// --show_attr reads after the run when cgroup_nodelete keeps it; without
// it the group is gone, and a bad name is refused with the options.
// io.max at device creation (issue 28): --attr makes the group and sets
// the limit, the job joins the group and is paced, and a bad value stops
// the run before it starts.
TEST(CliMain, IoMaxAttrLimitsTheJobsGroup) {
  expect_cli("bench --driver=null --name=x --rw=read --bs=4k --size=64k --attr=cgroup/lim/io.max=riops=100"
             " --cgroup=lim --cgroup_nodelete --show_attr=cgroup/lim/io.max --show_attr=cgroup/lim/io.stat",
             0, "rbps=max wbps=max riops=100 wiops=max");
  expect_cli("bench --driver=null --name=x --rw=read --bs=4k --size=64k --attr=cgroup/lim/io.max=riops=0"
             " --cgroup=lim", 1, "io.max: riops: '0' is out of range");
}

TEST(CliMain, CgroupChargesTheJobsGroup) {
  expect_cli("bench --driver=null --name=x --rw=read --bs=4k --size=1m --cgroup=tenant --cgroup_nodelete"
             " --show_attr=cgroup/tenant/io.stat", 0, "rbytes=1048576 wbytes=0 rios=256 wios=0");
  expect_cli("bench --driver=null --name=x --rw=read --bs=4k --size=1m --cgroup=tenant"
             " --show_attr=cgroup/tenant/io.stat", 1, "no such I/O group");
  expect_cli("bench --driver=null --name=x --rw=read --bs=4k --size=1m --cgroup=..", 1, "cgroup");
}

// With cgroup=, cgroup_weight is the group's io.bfq.weight, as fio writes
// the cgroup's weight file (issue 28).
TEST(CliMain, CgroupWeightIsTheGroupsBfqWeight) {
  expect_cli("bench --driver=null --scheduler=bfq --name=x --rw=read --bs=4k --size=1m --cgroup=tenant"
             " --cgroup_weight=300 --cgroup_nodelete --show_attr=cgroup/tenant/io.bfq.weight", 0, "default 300");
}

// And io.weight, io.cost's: a job's weight holds under either policy
// (issue 28). The device's io.cost is on, so its stat keys show too.
TEST(CliMain, CgroupWeightIsTheGroupsIoWeightToo) {
  const std::string job = "bench --driver=null --name=x --rw=read --bs=4k --size=1m --cgroup=costly --cgroup_weight=250"
                          " --attr=cgroup/io.cost.qos=enable=1 --cgroup_nodelete --show_attr=cgroup/costly/";
  expect_cli(job + "io.weight", 0, "default 250");
  expect_cli(job + "io.stat", 0, "rios=256 wios=0 dbytes=0 dios=0 cost.usage=");
}

// A mistyped option said only "not expected", and reproduce exited with
// CLI11's own code (109 here) where every other command exits 1 (issue 27).
TEST(CliMain, AMistypedOptionGetsTheNearestNameAndExitOne) {
  expect_cli("bench --irqmod=1", 1, "--irqmod=1 (did you mean --irqmode?)");
  expect_cli("reproduce --quik", 1, "--quik (did you mean --quick?)");
  expect_cli("bench --zzzzzz=1", 1, "not expected", "did you mean");  // nothing near: no guess
}

// --compare A,B with a B the device refuses ran every round of A first
// (issue 27); both values are now tried before any run.
TEST(CliMain, CompareRefusesABadSecondValueBeforeRunning) {
  expect_cli("bench --compare queue/scheduler=mq-deadline,bogus --driver=null --rw=randread --size=64m --name=x"
             " --runtime=1", 1, "queue/scheduler=bogus: ", "round 1");
}

// bench --help showed "--time_based{1}", "(default 250 GiB) (default
// 256000)" and "(default )" (issue 27), and did not say how to list a
// driver's parameters.
TEST(CliMain, BenchHelpShowsEachNameAndDefaultOnce) {
  for (const char* driver : {"null", "uring", "ublk"}) {
    const Shell r = sh(kCli + " bench --driver=" + driver + " --help", 10);
    EXPECT_EQ(r.status, 0) << driver;
    EXPECT_EQ(r.output.find("{1}"), std::string::npos) << driver;
    EXPECT_EQ(r.output.find("(default )"), std::string::npos) << driver;
    size_t line = 0;
    for (size_t nl; (nl = r.output.find('\n', line)) != std::string::npos; line = nl + 1) {
      const std::string l = r.output.substr(line, nl - line);
      const size_t first = l.find("(default");
      EXPECT_TRUE(first == std::string::npos || l.find("(default", first + 1) == std::string::npos) << l;
    }
    EXPECT_NE(r.output.find("--driver=NAME --help"), std::string::npos) << driver;
  }
}

}  // namespace
}  // namespace blkmq::test
