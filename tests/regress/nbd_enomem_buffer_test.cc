// Regression: a request whose buffer could not be had ended the process
// (aligned_alloc's failure became std::bad_alloc, uncaught on the reader),
// and with it every connection. It is now answered NBD_ENOMEM, a refused
// WRITE's payload is read and dropped, and the connection goes on.
//
// The address-space limit is lowered in a child process (a threadsafe
// death test re-executes this test alone), so the test binary keeps its
// own. Release tree only: a sanitizer's shadow memory does not fit under
// such a limit.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

uint64_t address_space_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t pages = 0;
  in >> pages;
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// Runs in the child; exits 0 when every check held, else 1 with why.
[[noreturn]] void out_of_memory_child() {
  // Large blocks always mapped afresh, and one arena: otherwise glibc
  // carves a 32 MiB buffer out of address space a thread's arena already
  // reserved, and the limit below never bites.
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  ::mallopt(M_ARENA_MAX, 1);  // no thread arena with reserved room to grow in
  auto dev = create_device("null", {{"size", "64"}});
  if (!dev.ok()) std::_Exit(2);
  Served s(std::move(*dev), ServerConfig{});
  const int fd = connect_unix(s.path());
  if (!go(fd)) std::_Exit(3);
  const std::string payload(32u << 20, '\x42');  // the client's own memory, had before the limit
  // Room for small buffers and thread stacks already mapped, not for a 32 MiB one.
  const rlimit rl{address_space_bytes() + (16u << 20), RLIM_INFINITY};
  if (::setrlimit(RLIMIT_AS, &rl) != 0) std::_Exit(4);
  bool ok = true;
  const auto check = [&](uint32_t got, uint32_t want, const char* what) {
    if (got == want) return;
    std::fprintf(stderr, "%s: error %u, expected %u\n", what, got, want);
    ok = false;
  };
  check(request(fd, kCmdRead, 0, 32u << 20), kErrNoMem, "a 32 MiB READ without memory");
  check(request(fd, kCmdRead, 0, 4096), 0, "a 4 KiB READ after it");
  // Header and payload sent apart: request() would copy the payload, and
  // this process has no room for a copy either.
  send_all(fd, encode_request(Request{0, kCmdWrite, 7, 0, 32u << 20}));
  send_all(fd, payload);
  const std::string h = read_n(fd, kSimpleReplySize);
  check(h.size() == kSimpleReplySize ? get32(h.data() + 4) : ~0u, kErrNoMem, "a 32 MiB WRITE without memory");
  check(request(fd, kCmdWrite, 4096, 512, std::string(512, 'x')), 0, "a WRITE after the dropped payload");
  ::close(fd);
  std::_Exit(ok ? 0 : 1);
}

TEST(NbdRegress, ABufferThatCannotBeHadIsEnomemAndTheConnectionGoesOn) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "an address-space limit: release tree only (sanitizers reserve terabytes of shadow)";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(out_of_memory_child(), testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace blkmq::nbd::regress
