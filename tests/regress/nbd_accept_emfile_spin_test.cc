// Regression: out of descriptors, the accept loop spun. accept() failed
// with EMFILE at once while the client stayed queued, poll reported the
// listener readable again at once, and serve() burnt a whole core until a
// descriptor freed. It now leaves the listener alone for accept_backoff_ms
// between tries and logs the episode once.
//
// The descriptor limit is lowered in a child process (a threadsafe death
// test re-executes this test alone), so the test binary keeps its own.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>
#include <vector>

#include "support/nbd_regress_util.h"
#include "support/wait.h"

namespace blkmq::nbd::regress {
namespace {

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Runs in the child; exits 0 when the loop backed off, else 1 with why.
[[noreturn]] void out_of_descriptors_child() {
  static const HandshakeConfig hs;
  static const std::vector<Export> none;
  std::atomic<int> logged{0};
  ServerConfig sc;
  sc.socket_path = temp_path("emfile");
  sc.accept_backoff_ms = 100;
  sc.log = [&](const std::string&) { logged++; };
  auto s = Server::listen(sc, hs, none);
  if (!s.ok()) std::_Exit(2);
  std::thread t([&] { (*s)->serve(); });
  const int client = ::socket(AF_UNIX, SOCK_STREAM, 0);
  // Use up every descriptor the lowered limit leaves.
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  // The limit bounds descriptor numbers: a few above the highest open one
  // (a sanitizer runtime may hold some high ones).
  int highest = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
    highest = std::max(highest, std::atoi(e.path().filename().c_str()));
  rl.rlim_cur = static_cast<rlim_t>(highest) + 8;
  setrlimit(RLIMIT_NOFILE, &rl);
  std::vector<int> filler;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, sc.socket_path.c_str(), sizeof a.sun_path - 1);
  if (::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) std::_Exit(3);
  // The server now fails accept() with EMFILE. Over a 600 ms window a
  // spinning loop uses most of a core; one that backs off, next to nothing.
  // The episode's first failure is logged when it happens.
  if (!blkmq::test::eventually([&] { return logged.load() >= 1; })) std::fprintf(stderr, "accept never failed\n");
  const double c0 = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the window measured, by time by design
  const double used = cpu_seconds() - c0;
  bool ok = true;
  if (used > 0.03) {  // backing off it uses well under 1 ms; spinning, 0.2 s or more on a loaded machine
    std::fprintf(stderr, "accept loop used %.3f s of CPU in 0.6 s while out of descriptors\n", used);
    ok = false;
  }
  if (logged.load() != 1) {
    std::fprintf(stderr, "the episode was logged %d times, not once\n", logged.load());
    ok = false;
  }
  // A freed descriptor lets the waiting client in: it gets the greeting.
  for (int fd : filler) ::close(fd);
  const timeval tv{5, 0};
  ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (read_n(client, 18).size() != 18) {
    std::fprintf(stderr, "the queued client was not served once descriptors freed\n");
    ok = false;
  }
  (*s)->stop();
  t.join();
  std::_Exit(ok ? 0 : 1);
}

TEST(NbdRegress, AcceptBacksOffWhenOutOfDescriptors) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(out_of_descriptors_child(), testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace blkmq::nbd::regress
