// The control socket (--control) and its clients: requests are answered
// or refused with the attribute's own message; the socket is owner-only;
// `blkmq attr` switches the scheduler of a running `blkmq nbd` (and
// changes nr_requests and an iosched tunable) while a real client does
// verified I/O, with no error; `blkmq stat` reports the reads a running
// bench does.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/control.h"
#include "support/cli_process.h"
#include "support/verified_io.h"

namespace blkmq::test {
namespace {

using nlohmann::json;

TEST(Control, AnswersAndRefusesWithTheAttributesMessages) {
  auto dev = make_null_device({{"size", "16"}});
  ASSERT_TRUE(dev);
  const std::string path = temp_socket("ctl_unit");
  auto s = control::Server::start(path, {&dev->queue()});
  ASSERT_TRUE(s) << s.status().message();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "owner-only";

  const control::Server& srv = **s;
  auto ask = [&](const std::string& line) { return json::parse(srv.handle(line)); };
  const std::string d = dev->queue().name();
  EXPECT_EQ(ask(R"({"op":"list"})")["devices"], json::array({d}));
  EXPECT_EQ(ask(R"({"op":"get","dev":")" + d + R"(","attr":"queue/scheduler"})")["value"],
            *dev->queue().attr("queue/scheduler"));
  EXPECT_TRUE(ask(R"({"op":"set","dev":")" + d + R"(","attr":"queue/scheduler","value":"kyber"})")["ok"]);
  EXPECT_EQ(*dev->queue().attr("queue/scheduler"), "none mq-deadline [kyber] bfq");
  // The refusal is set_attr's own message.
  json bad = ask(R"({"op":"set","dev":")" + d + R"(","attr":"queue/nr_requests","value":"lots"})");
  EXPECT_FALSE(bad["ok"]);
  EXPECT_EQ(bad["error"], dev->queue().set_attr("queue/nr_requests", "lots").message());
  for (const char* line : {"", "not json", "[1,2]", R"({"op":1})", R"({"op":"reboot"})",
                           R"({"op":"get","dev":"sda","attr":"stat"})", R"({"op":"get","dev":"x"})",
                           R"({"op":"set","dev":"nullb0","attr":"queue/nomerges"})"}) {
    json a = ask(line);
    EXPECT_FALSE(a["ok"]) << line;
    EXPECT_FALSE(a["error"].get<std::string>().empty()) << line;
  }
  s->reset();
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "the socket is removed when the server stops";
}

TEST(Control, ClientsRoundTripOverTheSocket) {
  auto dev = make_null_device({{"size", "16"}});
  ASSERT_TRUE(dev);
  const std::string path = temp_socket("ctl_client");
  auto s = control::Server::start(path, {&dev->queue()});
  ASSERT_TRUE(s);
  auto c = control::Client::connect(path);
  ASSERT_TRUE(c) << c.status().message();
  for (int i = 0; i < 3; i++) {
    auto a = (*c)->call(R"({"op":"get","dev":")" + dev->queue().name() + R"(","attr":"ro"})");
    ASSERT_TRUE(a);
    EXPECT_EQ(json::parse(*a)["value"], "0");
  }
  EXPECT_FALSE(control::Client::connect(path + ".none")) << "no server there";
}

// trace/enable=0 through the socket ends a trace: one that lost events is
// answered with the warning (its drops, how to trace less), which the
// serving process prints as well; a lossless one, or a write that stopped
// nothing, has none.
TEST(Control, StoppingALossyTraceAnswersWithItsDrops) {
  auto dev = make_null_device({{"size", "16"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  auto s = control::Server::start(temp_socket("ctl_drops"), {&q});
  ASSERT_TRUE(s);
  const std::string stop = R"({"op":"set","dev":")" + q.name() + R"(","attr":"trace/enable","value":"0"})";
  const std::string dir = testing::TempDir() + "blkmq_ctl_drops";
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE(q.start_blktrace(dir, 1));  // less than a record: every event is dropped
  ASSERT_EQ(q.write_sync(buf.data(), 0, 4096), BlkStatus::ok);
  testing::internal::CaptureStderr();
  json a = json::parse((*s)->handle(stop));
  const std::string printed = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(a["ok"]);
  ASSERT_TRUE(a.contains("warning")) << a.dump();
  const std::string w = a["warning"].get<std::string>();
  EXPECT_NE(w.find(*q.attr("trace/dropped") + " events dropped"), std::string::npos) << w;
  EXPECT_NE(w.find("trace/act_mask"), std::string::npos) << w;
  EXPECT_NE(printed.find(w), std::string::npos) << "the process says it too: " << printed;
  EXPECT_FALSE(json::parse((*s)->handle(stop)).contains("warning")) << "nothing was stopped";

  ASSERT_TRUE(q.start_blktrace(dir));
  ASSERT_EQ(q.write_sync(buf.data(), 0, 4096), BlkStatus::ok);
  a = json::parse((*s)->handle(stop));
  EXPECT_TRUE(a["ok"]);
  EXPECT_FALSE(a.contains("warning")) << "nothing lost: " << a.dump();
}

// The issue's acceptance: a scheduler switch of a running blkmq nbd while
// qemu-io writes patterns and reads them back through it.
TEST(Control, AttrSwitchesTheSchedulerOfARunningNbdUnderVerifiedIo) {
  if (!have("qemu-io")) GTEST_SKIP() << "qemu-io not installed";
  const std::string ctl = temp_socket("ctl_nbd");
  CliServer srv({"--driver=null", "--memory_backed=1", "--size=64", "--control=" + ctl});
  ASSERT_TRUE(srv.up());
  ASSERT_TRUE(wait_for_path(ctl));
  const std::string attr = std::string(BLKMQ_CLI_PATH) + " attr --control " + ctl + " nullb0 ";
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0}, bad{0};
  std::string failure;
  std::thread client([&] {
    // Each round: 32 patterned 64 KiB writes, then each read back and checked.
    for (int round = 1; !stop.load() || rounds.load() < 2; round++) {
      std::string cmd = "qemu-io -f raw '" + srv.uri() + "'";
      for (int i = 0; i < 32; i++)
        cmd += " -c 'write -P " + std::to_string((round + i) % 250 + 1) + " " + std::to_string(i * 128) + "k 64k'";
      for (int i = 0; i < 32; i++)
        cmd += " -c 'read -P " + std::to_string((round + i) % 250 + 1) + " " + std::to_string(i * 128) + "k 64k'";
      Shell r = sh(cmd);
      if (r.status != 0 || r.output.find("failed") != std::string::npos ||
          r.output.find("Pattern verification") != std::string::npos) {
        bad++;
        failure = r.output;
        return;
      }
      rounds++;
    }
  });
  const char* scheds[] = {"mq-deadline", "kyber", "bfq", "none"};
  for (int i = 0; i < 12 && !bad.load(); i++) {
    Shell r = sh(attr + "queue/scheduler=" + scheds[i % 4], 30);
    EXPECT_EQ(r.status, 0) << r.output;
    if (i % 4 == 0) {
      EXPECT_EQ(sh(attr + "queue/iosched/fifo_batch=4", 30).status, 0);
      EXPECT_EQ(sh(attr + "queue/nr_requests=32", 30).status, 0);
      EXPECT_EQ(sh(attr + "queue/nr_requests", 30).output, "32\n");
    }
    // The switches' pace against the client's rounds: time is the point.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop = true;
  client.join();
  EXPECT_EQ(bad.load(), 0) << failure;
  EXPECT_GE(rounds.load(), 2);
  EXPECT_EQ(sh(attr + "queue/scheduler", 30).output, "[none] mq-deadline kyber bfq\n");
  Shell refused = sh(attr + "queue/scheduler=cfq", 30);
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("unknown scheduler 'cfq'"), std::string::npos) << refused.output;
  EXPECT_EQ(srv.stop(SIGTERM), 0);
}

// blkmq stat during a bench run: its r/s agrees with the bench's IOPS.
TEST(Control, StatShowsARunningBenchsReads) {
  const std::string ctl = temp_socket("ctl_stat");
  const std::string out = testing::TempDir() + "ctl_stat_" + std::to_string(getpid()) + ".json";
  const pid_t pid = spawn_cli({"bench", "--name=r", "--rw=randread", "--bs=4k", "--iodepth=4", "--runtime=5",
                               "--time_based", "--irqmode=2", "--completion_nsec=200000", "--control=" + ctl,
                               "--output-format=json", "--output=" + out});
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_path(ctl));
  Shell st = sh(std::string(BLKMQ_CLI_PATH) + " stat --control " + ctl + " 1 3", 30);
  ASSERT_EQ(wait_exit(pid), 0);
  ASSERT_EQ(st.status, 0) << st.output;
  // The middle of three one-second reports inside the run.
  const std::vector<double> rps = first_column_of(st.output, "nullb0");
  ASSERT_EQ(rps.size(), 3u) << st.output;
  std::ifstream j(out);
  const double iops = json::parse(j)["jobs"][0]["read"]["iops"].get<double>();
  EXPECT_NEAR(rps[1], iops, 0.1 * iops) << st.output;
}

// blkmq zone: blkzone's report lines and its zone commands, over the
// socket of a process serving a zoned null device.
TEST(Control, ZoneReportsAndManagesZonesAsBlkzone) {
  auto dev = make_null_device({{"size", "64"}, {"zoned", "1"}, {"zone_size", "16"}, {"zone_nr_conv", "1"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  std::vector<unsigned char> buf(8192, 1);
  ASSERT_EQ(q.write_sync(buf.data(), 16 << 20, 8192), BlkStatus::ok);  // zone 1: 16 sectors
  const std::string path = temp_socket("ctl_zone");
  auto s = control::Server::start(path, {&q});
  ASSERT_TRUE(s);
  const std::string zone = std::string(BLKMQ_CLI_PATH) + " zone --control " + path + " ";
  Shell r = sh(zone + "report " + q.name(), 30);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output,
            "  start: 0x000000000, len 0x008000, cap 0x008000, wptr 0x000000 reset:0 non-seq:0, zcond: 0(nw) "
            "[type: 1(CONVENTIONAL)]\n"
            "  start: 0x000008000, len 0x008000, cap 0x008000, wptr 0x000010 reset:0 non-seq:0, zcond: 2(oi) "
            "[type: 2(SEQ_WRITE_REQUIRED)]\n"
            "  start: 0x000010000, len 0x008000, cap 0x008000, wptr 0x000000 reset:0 non-seq:0, zcond: 1(em) "
            "[type: 2(SEQ_WRITE_REQUIRED)]\n"
            "  start: 0x000018000, len 0x008000, cap 0x008000, wptr 0x000000 reset:0 non-seq:0, zcond: 1(em) "
            "[type: 2(SEQ_WRITE_REQUIRED)]\n");
  ASSERT_EQ(sh(zone + "finish -o 0x10000 -c 2 " + q.name(), 30).status, 0);
  ASSERT_EQ(sh(zone + "reset -o 32768 -l 32768 " + q.name(), 30).status, 0);
  Shell two = sh(zone + "report -o 0x8000 -c 3 " + q.name(), 30);
  EXPECT_NE(two.output.find("start: 0x000008000, len 0x008000, cap 0x008000, wptr 0x000000 reset:0 non-seq:0, "
                            "zcond: 1(em)"),
            std::string::npos)
      << two.output;
  EXPECT_NE(two.output.find("start: 0x000018000, len 0x008000, cap 0x008000, wptr 0x008000 reset:0 non-seq:0, "
                            "zcond:14(fu)"),
            std::string::npos)
      << two.output;
  // Refusals name what is wrong: a misaligned zone, a conventional zone.
  Shell mis = sh(zone + "reset -o 8 " + q.name(), 30);
  EXPECT_NE(mis.status, 0);
  EXPECT_NE(mis.output.find("not aligned to the zone size 32768"), std::string::npos) << mis.output;
  Shell conv = sh(zone + "open -c 1 " + q.name(), 30);
  EXPECT_NE(conv.status, 0);
  EXPECT_NE(conv.output.find("ioerr"), std::string::npos) << conv.output;
  // A device without zones.
  auto plain = make_null_device({{"size", "16"}});
  ASSERT_TRUE(plain);
  auto s2 = control::Server::start(path + "2", {&plain->queue()});
  ASSERT_TRUE(s2);
  json a = json::parse((*s2)->handle(R"({"op":"report","dev":")" + plain->queue().name() + R"("})"));
  EXPECT_FALSE(a["ok"]);
  Shell none = sh(std::string(BLKMQ_CLI_PATH) + " zone report --control " + path + "2 " + plain->queue().name(), 30);
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.output.find("not a zoned device"), std::string::npos) << none.output;
}

}  // namespace
}  // namespace blkmq::test
