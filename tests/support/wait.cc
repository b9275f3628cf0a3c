#include "support/wait.h"

#include <poll.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace blkmq::test {

namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point end) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

// The one-letter state of /proc/self/task/TID/stat: the field after the
// command name, which is in parentheses and may hold spaces or ')'.
char task_state(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return '?';
  const size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

}  // namespace

pid_t this_tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

bool asleep_in(pid_t tid, long nr) {
  if (task_state(tid) != 'S') return false;
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/syscall");
  std::string first;
  if (!(f >> first)) return true;  // not readable here: the state must do
  if (first == "running") return false;
  char* end = nullptr;
  const long seen = std::strtol(first.c_str(), &end, 10);
  return end && *end == '\0' && seen == nr && task_state(tid) == 'S';
}

bool asleep_in_core_wait(pid_t tid) {
  return asleep_in(tid, SYS_futex) || asleep_in(tid, SYS_clock_nanosleep) || asleep_in(tid, SYS_nanosleep);
}

bool wait_for_path(const std::string& path, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  const int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd < 0) return access(path.c_str(), F_OK) == 0;
  bool found = false;
  for (;;) {
    // Watch the deepest directory on the way that exists (the path's own
    // may be made later), before looking: what is made in between still
    // wakes the poll.
    std::string dir = path;
    do {
      const size_t slash = dir.rfind('/');
      dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
    } while (inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0 && dir != "." && dir != "/");
    found = access(path.c_str(), F_OK) == 0;
    if (found || Clock::now() >= end) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, ms_left(end)) > 0) {
      char buf[4096];
      while (read(fd, buf, sizeof buf) > 0) {
      }
    }
  }
  close(fd);
  return found;
}

bool wait_child(pid_t pid, std::chrono::milliseconds limit, int* status) {
  const auto end = Clock::now() + limit;
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    while (poll(&p, 1, ms_left(end)) < 0) {
    }
    close(fd);
    return waitpid(pid, status, WNOHANG) == pid;
  }
  // No pidfd (a kernel before 5.3): look every 10 ms, as there is no
  // other wake-up for a child's exit that a test thread can wait on.
  for (;;) {
    if (waitpid(pid, status, WNOHANG) == pid) return true;
    if (Clock::now() >= end) return false;
    poll(nullptr, 0, 10);
  }
}

}  // namespace blkmq::test
