// `blkmq nbd` as a process: SIGTERM stops it cleanly (exit 0, socket
// removed), --run returns the command's status, and the TLS options that
// do not fit together are refused with a clear error.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

pid_t spawn(std::vector<std::string> args) {
  args.insert(args.begin(), BLKMQ_CLI_PATH);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, BLKMQ_CLI_PATH, nullptr, nullptr, argv.data(), environ), 0);
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  EXPECT_EQ(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Regression: SIGTERM was left open in the device's threads (started before
// the mask), so it killed the process (exit 143) and left the socket behind.
TEST(NbdCli, SigtermStopsCleanly) {
  const std::string sock = testing::TempDir() + "blkmq_nbd_cli_" + std::to_string(getpid()) + ".sock";
  const pid_t pid = spawn({"nbd", "--driver=null", "--memory_backed=1", "--size=16", "--socket=" + sock});
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 500 && access(sock.c_str(), F_OK) != 0; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(access(sock.c_str(), F_OK), 0) << "the server never listened";
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(pid), 0);
  EXPECT_NE(access(sock.c_str(), F_OK), 0) << "the socket was left behind";
}

TEST(NbdCli, RunReturnsTheCommandsStatus) {
  const std::string sock = testing::TempDir() + "blkmq_nbd_run_" + std::to_string(getpid()) + ".sock";
  const pid_t pid = spawn({"nbd", "--driver=null", "--size=16", "--socket=" + sock, "--run",
                           "test -S \"$unixsocket\" && case \"$uri\" in nbd+unix:*) exit 7;; esac"});
  ASSERT_GT(pid, 0);
  EXPECT_EQ(wait_exit(pid), 7);
}

// Runs the command with `args` (shell words) and returns its exit status;
// *err gets its stderr.
int run_cli(const std::string& args, std::string* err) {
  const std::string file = testing::TempDir() + "blkmq_nbd_cli_err_" + std::to_string(getpid());
  const int rc = std::system(("timeout 30 " + std::string(BLKMQ_CLI_PATH) + " nbd " + args + " 2> " + file).c_str());
  std::ifstream f(file);
  err->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  std::remove(file.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(NbdCli, BadTlsOptionsAreRefused) {
  const std::string sock = "--socket=" + testing::TempDir() + "blkmq_nbd_tls_" + std::to_string(getpid()) + ".sock ";
  const struct {
    std::string args, says;
  } cases[] = {
      {"--tls=maybe", "bad value 'maybe' for --tls"},
      {"--tls=require", "needs --tls-certificates=DIR or --tls-psk=FILE"},
      {"--tls=on --tls-certificates=/x --tls-psk=/y", "exclude each other"},
      {"--tls-certificates=/x", "need --tls=on or --tls=require"},
      {"--tls=require --tls-psk=/y --tls-verify-peer", "not --tls-psk"},
      {"--tls=require --tls-certificates=/nonexistent", "/nonexistent/server-cert.pem"},
  };
  for (const auto& c : cases) {
    std::string err;
    EXPECT_EQ(run_cli(sock + "--driver=null --size=16 " + c.args, &err), 1) << c.args;
    EXPECT_NE(err.find(c.says), std::string::npos) << c.args << ": " << err;
  }
}

TEST(NbdCli, PlaintextTcpOffLoopbackWarns) {
  std::string err;
  EXPECT_EQ(run_cli("--driver=null --size=16 --port=0 --bind=0.0.0.0 --run true", &err), 0);
  EXPECT_NE(err.find("warning: serving 0.0.0.0 without TLS"), std::string::npos) << err;
  EXPECT_EQ(run_cli("--driver=null --size=16 --port=0 --run true", &err), 0);  // loopback: no warning
  EXPECT_EQ(err.find("warning"), std::string::npos) << err;
}

}  // namespace
