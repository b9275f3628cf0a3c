// The built `blkmq` command as a child process, and third-party clients run
// through a shell with a time limit: what the tests that need a whole
// process (signals, a crash, real NBD clients) share.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/wait.h"

extern char** environ;

namespace blkmq::test {

// Starts BLKMQ_CLI_PATH with `args`; -1 (and a test failure) if it cannot.
inline pid_t spawn_cli(std::vector<std::string> args) {
  args.insert(args.begin(), BLKMQ_CLI_PATH);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, BLKMQ_CLI_PATH, nullptr, nullptr, argv.data(), environ), 0);
  return pid;
}

// The exit status, or 128 + the signal that ended it (as a shell reports it).
inline int wait_exit(pid_t pid) {
  int st = 0;
  EXPECT_EQ(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// A unique socket path per test process and call: tests of one binary may
// run in parallel under ctest -j with other binaries using the same TempDir.
inline std::string temp_socket(const std::string& tag) {
  static int counter = 0;
  return testing::TempDir() + "blkmq_" + tag + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++) +
         ".sock";
}

// `blkmq nbd ARGS --socket=PATH` for the life of the object: the
// constructor returns once the server listens; the destructor stops it with
// SIGTERM (and SIGKILL if it hangs, which then fails the test).
class CliServer {
 public:
  explicit CliServer(std::vector<std::string> args, std::string sock = temp_socket("nbd")) : sock_(std::move(sock)) {
    args.insert(args.begin(), "nbd");
    args.push_back("--socket=" + sock_);
    pid_ = spawn_cli(std::move(args));
    if (pid_ > 0 && !wait_for_path(sock_)) ADD_FAILURE() << "blkmq nbd never listened on " << sock_;
  }
  ~CliServer() { stop(SIGTERM); }
  CliServer(const CliServer&) = delete;
  CliServer& operator=(const CliServer&) = delete;

  bool up() const { return pid_ > 0 && access(sock_.c_str(), F_OK) == 0; }
  const std::string& socket() const { return sock_; }
  // The libnbd/qemu URI of export `name` ("" = the default export).
  std::string uri(const std::string& name = "") const { return "nbd+unix:///" + name + "?socket=" + sock_; }
  // Sends `sig` and reaps the process; its exit status (-1 if none ran).
  int stop(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int st = 0;
    if (!wait_child(pid_, std::chrono::seconds(10), &st)) {
      ADD_FAILURE() << "blkmq nbd did not stop on signal " << sig;
      kill(pid_, SIGKILL);
      waitpid(pid_, &st, 0);
    }
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  std::string sock_;
  pid_t pid_ = -1;
};

struct Shell {
  int status = -1;  // exit status; 124 = the time limit killed it
  std::string output;  // stdout and stderr together
};

// Runs `cmd` with /bin/sh under coreutils' timeout, so a hung client fails
// one test instead of holding the whole binary until ctest's limit.
inline Shell sh(const std::string& cmd, int timeout_s = 60) {
  std::string quoted;  // cmd inside single quotes: each ' becomes '\''
  for (char c : cmd) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  const std::string full = "timeout -k 5 " + std::to_string(timeout_s) + " sh -c '" + quoted + "' 2>&1";
  Shell r;
  FILE* p = popen(full.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.output.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// From an iostat-style report: the first number of every line that starts
// with `dev` (iostat -x and blkmq stat put r/s there), sorted.
inline std::vector<double> first_column_of(const std::string& report, const std::string& dev) {
  std::vector<double> v;
  std::istringstream in(report);
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string name;
    double x = 0;
    if (f >> name >> x && name == dev) v.push_back(x);
  }
  std::sort(v.begin(), v.end());
  return v;
}

// Whether a program is on PATH (clients are optional packages).
inline bool have(const std::string& prog) { return sh("command -v " + prog + " >/dev/null", 10).status == 0; }

// nbdsh runs whatever python3 is first on PATH; the python3-libnbd module
// belongs to the distribution's, which a pyenv or venv python lacks.
inline bool nbdsh_works() { return sh("PATH=/usr/bin:$PATH nbdsh -c pass", 20).status == 0; }

// Whether this fio has its nbd engine (built with libnbd).
inline bool fio_has_nbd() {
  return have("fio") && sh("fio --enghelp=nbd", 10).output.find("uri") != std::string::npos;
}

}  // namespace blkmq::test
