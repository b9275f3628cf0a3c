// What the kernel charges for a first write of anonymous memory, per 4 KiB
// page: 1 GiB mapped the way the null store's page pool maps it (256 KiB
// mappings with MAP_POPULATE, src/drivers/null/null_page_pool.cc), or in
// 2 MiB transparent huge pages (MADV_HUGEPAGE, then MADV_POPULATE_WRITE).
// Nothing is unmapped until exit, as a filling store keeps its pages.
// Usage: gcc -O2 -o /tmp/first_touch bench/first_touch.c
//        /tmp/first_touch pool|huge
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int map_pool(size_t total) {
  const size_t chunk = 256u << 10;
  for (size_t off = 0; off < total; off += chunk) {
    void* p = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return -1;
  }
  return 0;
}

static int map_huge(size_t total) {
  const size_t huge = 2u << 20;
  for (size_t off = 0; off < total; off += huge) {
    // Twice the size, so that an aligned 2 MiB lies inside.
    char* p = mmap(NULL, 2 * huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    char* a = (char*)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
    if (madvise(a, huge, MADV_HUGEPAGE) != 0 || madvise(a, huge, MADV_POPULATE_WRITE) != 0) return -1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const size_t total = 1ul << 30;
  const int huge = argc > 1 && strcmp(argv[1], "huge") == 0;
  if (argc < 2 || (!huge && strcmp(argv[1], "pool") != 0)) {
    fprintf(stderr, "usage: %s pool|huge\n", argv[0]);
    return 2;
  }
  const double t0 = now_s();
  if ((huge ? map_huge : map_pool)(total) != 0) {
    perror("first_touch");
    return 1;
  }
  printf("%s: %.0f ns per 4 KiB page\n", argv[1], (now_s() - t0) * 1e9 / (double)(total / 4096));
  return 0;
}
