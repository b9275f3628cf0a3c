// The socket path must not appear before the socket listens. The listener
// bound the path and only then called listen(), so a client that connected
// as soon as it saw the path (a script waiting for `blkmq nbd --socket S`
// to make S, or these tests once their wait woke on inotify) could get
// ECONNREFUSED from a server that was about to serve it. Found when the
// tests' wait for the path stopped polling every 10 ms (issue 27):
// NbdClients.ServerOutlivesMalformedClients failed under ASan on a loaded
// machine, every connect refused while the server sat between the two.
#include <gtest/gtest.h>
#include <dirent.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "nbd/unix_listener.h"
#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

// Names in `dir` that start with `prefix`.
int count_entries(const std::string& dir, const std::string& prefix) {
  int n = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return -1;
  while (dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) n++;
  ::closedir(d);
  return n;
}

// Whether a connect() to `path` is accepted (not refused).
bool connects(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// What the path was when the listener entered listen(): the listener runs
// in a child stopped by ptrace at each system call's entry, so the look
// happens with the child held exactly there, whatever the machine's load.
enum class AtListen { no_path, path_exists, no_listen_seen, no_ptrace };

AtListen path_at_listen(const std::string& path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) ::_exit(3);
    ::raise(SIGSTOP);
    Result<UnixListener> l = listen_unix_path(path, 4, 0600);
    if (l.ok()) close_unix_listener(&*l, path);
    ::_exit(l.ok() ? 0 : 2);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (!WIFSTOPPED(st)) return AtListen::no_ptrace;
  ::ptrace(PTRACE_SETOPTIONS, pid, nullptr, PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL);
  AtListen seen = AtListen::no_listen_seen;
  for (;;) {
    if (::ptrace(PTRACE_SYSCALL, pid, nullptr, nullptr) != 0) break;
    if (::waitpid(pid, &st, 0) != pid || WIFEXITED(st) || WIFSIGNALED(st)) break;
    if (!WIFSTOPPED(st) || WSTOPSIG(st) != (SIGTRAP | 0x80)) continue;
    __ptrace_syscall_info info{};
    if (::ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof info, &info) <= 0) continue;
    if (info.op == PTRACE_SYSCALL_INFO_ENTRY && info.entry.nr == SYS_listen && seen == AtListen::no_listen_seen)
      seen = ::access(path.c_str(), F_OK) == 0 ? AtListen::path_exists : AtListen::no_path;
  }
  if (!WIFEXITED(st)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
  }
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the listener failed in the child";
  return seen;
}

// Held at its listen(), the listener must not have made the path yet:
// before the fix it had bound it, so a client seeing the path then was
// refused.
TEST(NbdRegress, SocketPathAppearsOnlyOnceItListens) {
  const std::string path = temp_path("listen");
  const AtListen at = path_at_listen(path);
  if (at == AtListen::no_ptrace) GTEST_SKIP() << "ptrace is not permitted here";
  ASSERT_NE(at, AtListen::no_listen_seen) << "the listener never called listen()";
  EXPECT_EQ(at, AtListen::no_path) << "the path existed while the socket did not listen yet";
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the listener removes its path";
  EXPECT_EQ(count_entries(testing::TempDir(), ".blkmq-listen."), 0) << "a temporary name was left behind";
}

// The path, once there, has its mode and takes connections.
TEST(NbdRegress, SocketPathHasItsModeAndListensWhenItAppears) {
  const std::string path = temp_path("listen1");
  Result<UnixListener> l = listen_unix_path(path, 4, 0600);
  ASSERT_TRUE(l.ok()) << l.status().message();
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(connects(path));
  close_unix_listener(&*l, path);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

// The temporary name cannot take another server's path: a path made
// between the stale-socket probe and the link is refused as in use.
TEST(NbdRegress, SecondListenerOnALivePathIsRefused) {
  const std::string path = temp_path("listen2");
  Result<UnixListener> first = listen_unix_path(path, 4);
  ASSERT_TRUE(first.ok()) << first.status().message();
  Result<UnixListener> second = listen_unix_path(path, 4);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status().message();
  EXPECT_TRUE(connects(path)) << "the first server still answers";
  close_unix_listener(&*first, path);
}

}  // namespace
}  // namespace blkmq::nbd::regress
