// `blkmq nbd` as a process: SIGTERM stops it cleanly (exit 0, socket
// removed) and --run returns the command's status.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>

#include "tools/cli_process.h"

namespace blkmq::test {
namespace {

// Regression: SIGTERM was left open in the device's threads (started before
// the mask), so it killed the process (exit 143) and left the socket behind.
TEST(NbdCli, SigtermStopsCleanly) {
  CliServer s({"--driver=null", "--memory_backed=1", "--size=16"});
  ASSERT_TRUE(s.up()) << "the server never listened";
  EXPECT_EQ(s.stop(SIGTERM), 0);
  EXPECT_NE(access(s.socket().c_str(), F_OK), 0) << "the socket was left behind";
}

TEST(NbdCli, RunReturnsTheCommandsStatus) {
  const std::string sock = temp_socket("nbd_run");
  const pid_t pid = spawn_cli({"nbd", "--driver=null", "--size=16", "--socket=" + sock, "--run",
                               "test -S \"$unixsocket\" && case \"$uri\" in nbd+unix:*) exit 7;; esac"});
  ASSERT_GT(pid, 0);
  EXPECT_EQ(wait_exit(pid), 7);
}

}  // namespace
}  // namespace blkmq::test
