// Zeroed 4 KiB pages for one shard of the null device's page store, cut
// from mappings of many pages at once.
//
// Why not new/malloc: a page allocated on the submitting thread comes from
// glibc's arena for that thread, which grows its heap by mprotect in steps
// of about 128 KiB, and a freed page stays in the arena (the process keeps
// the memory). Filling an in-memory NBD export that way spent 17 % of the
// server's time in sysmalloc, 11 % of it in mprotect (docs/PERFORMANCE.md
// §12). A chunk here is one mmap, faulted in whole (MAP_POPULATE: one
// zeroing pass in the kernel instead of a fault per page); that measured no
// faster, since the kernel's zeroing is the cost, but discarded memory now
// goes back (below).
//
// A page given back is kept for reuse (zeroed by hand when handed out
// again) until release(), which gives its memory back to the kernel
// (MADV_DONTNEED), as null_blk frees a discarded page; a page so dropped
// reads as zeros when touched again. release() merges neighbouring pages
// into one call, so discarding a range written in order costs a call per
// chunk, not per page. (The lists of such pages live outside them: a link
// written into a dropped page would bring its memory back.) Chunks are
// unmapped when the pool goes.
#pragma once

#include <cstddef>
#include <vector>

namespace blkmq::nullb {

class PagePool {
 public:
  static constexpr size_t kPageSize = 4096;
  static constexpr size_t kMaxChunkPages = 64;  // 256 KiB a mapping

  PagePool() = default;
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // The most pages the pool will ever hold at once (its shard's share of
  // the device, twice over with a cache): a chunk is never larger, so a
  // small device maps no more than it can use. Before the first get().
  void set_max_pages(size_t n);
  // A page-aligned page of zeros, or nullptr when no memory can be mapped.
  // The caller's lock (the shard's). A page given back and not yet
  // released comes first (a 4 KiB memset), then a released one, then the
  // newest chunk; one mmap per chunk.
  void* get();
  // Takes back a page from get(); its memory stays until release(). O(1).
  void put(void* page);
  // Gives the memory of every page put since the last release back to the
  // kernel; the pages stay the pool's, for get(). One madvise per run of
  // neighbouring pages, after a sort of them.
  void release();

 private:
  size_t chunk_pages_ = kMaxChunkPages;
  char* next_ = nullptr;  // the rest of the newest chunk, never handed out
  char* end_ = nullptr;
  std::vector<void*> kept_;      // given back, memory still there (dirty)
  std::vector<void*> released_;  // given back and dropped: zeros when touched
  struct Chunk {
    void* base;
    size_t bytes;
  };
  std::vector<Chunk> chunks_;
};

}  // namespace blkmq::nullb
