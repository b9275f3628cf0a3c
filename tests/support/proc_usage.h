// What the process holds right now, for tests that check a create/destroy
// loop leaves nothing behind (blktests block/033, /034) and that a removed
// device's threads are gone (block/002): its thread count and the bytes
// its allocator has handed out and not taken back.
#pragma once

#include <dirent.h>
#include <malloc.h>

#include <cstddef>
#include <fstream>
#include <string>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// The sanitizer runtimes export it; GCC ships no header that declares it.
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#define BLKMQ_TEST_SANITIZER_ALLOCATOR 1
#endif

namespace blkmq::test {

// Threads of this process (entries of /proc/self/task). Any thread; a
// directory read.
inline unsigned thread_count() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return 0;
  unsigned n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

// Threads of this process whose name (comm) is `name`. Any thread; reads
// one small file per thread.
inline unsigned threads_named(const std::string& name) {
  DIR* d = opendir("/proc/self/task");
  if (!d) return 0;
  unsigned n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string comm;
    if (std::getline(f, comm) && comm == name) n++;
  }
  closedir(d);
  return n;
}

// Bytes allocated and not freed, by the allocator's own count: glibc's
// mallinfo2 (every arena, small chunks and mmapped ones) in a plain build,
// the sanitizer allocator's under ASan and TSan (which replace malloc, and
// whose quarantine would make RSS meaningless). Unlike RSS it does not
// depend on whether freed memory went back to the kernel. Any thread;
// walks the arenas (microseconds).
inline size_t allocated_bytes() {
#ifdef BLKMQ_TEST_SANITIZER_ALLOCATOR
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

}  // namespace blkmq::test
