// The memory-backed null device's data: a sparse store of 4 KiB pages with
// an optional write-back cache in front of it, each a radix tree keyed by
// page number (null_blk's xarrays).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/radix_index.h"
#include "blkmq/device.h"
#include "drivers/null/null_page_pool.h"

#include "blkmq/driver/request.h"
#include "blkmq/status.h"

namespace blkmq::nullb {

// Thread-safe. Pages are spread over shards by page index, each shard under
// its own mutex, so concurrent I/O to different pages rarely contends. Never
// written bytes read as zeros. When the cache is full, a write evicts
// (writes back) the shard's next cached page after the last one evicted, by
// page number, wrapping around (null_blk's cache_flush_pos). Calls may
// sleep (mutex, allocation): the device that uses a store runs with a
// blocking tag set.
class PageStore {
 public:
  static constexpr uint32_t kPageSize = 4096;
  static constexpr unsigned kDefaultShards = 64;

  // capacity_bytes: device size (I/O beyond it is refused with inval).
  // cache_bytes: write-back cache size, 0 for write-through (no cache).
  // nr_shards: rounded up to a power of two.
  PageStore(uint64_t capacity_bytes, uint64_t cache_bytes, unsigned nr_shards = kDefaultShards);
  ~PageStore();
  PageStore(const PageStore&) = delete;
  PageStore& operator=(const PageStore&) = delete;

  // Copies [off, off+len) into dst. inval if out of range.
  BlkStatus read(uint64_t off, void* dst, size_t len);
  // Stores src at off. With a cache the data lands in the cache unless fua
  // (then it is written through to the backing pages). nospc if a page
  // cannot be allocated; inval if out of range.
  BlkStatus write(uint64_t off, const void* src, size_t len, bool fua);
  // Reads or writes a read/write request's data segments at byte offset
  // `off` (FUA from the request's flags), the first `limit` bytes of them
  // (a zoned read stops at the write pointer). inval if a segment reaches
  // past the request's data_len or the store.
  BlkStatus transfer(Request* rq, uint64_t off, uint64_t limit = UINT64_MAX);
  // Drops the range: later reads return zeros; whole pages are freed.
  BlkStatus discard(uint64_t off, uint64_t len);
  // Writes every cached page back to the backing pages and empties the
  // cache. nospc if the backing index cannot grow (pages stay cached).
  BlkStatus flush();
  // A power cut: drops every cached page, as a disk losing power loses its
  // volatile cache. What a flush or a FUA write wrote back, and what
  // eviction wrote back when the cache was full, is durable and stays;
  // reads then see it (or zeros where nothing durable was written). The
  // loss is per 4 KiB page, the cache's unit, and a page is written and
  // dropped only under its shard lock, so no page is torn; a request in
  // flight across the cut may lose some of its pages and keep others, as
  // a disk may. Any thread, while I/O runs. Returns the pages dropped.
  // Without a cache: nothing to lose, 0. Cost: every shard lock once.
  uint64_t power_cut();

  // The allocation map of [off, off+len) in units of `granule` bytes (a
  // multiple of kPageSize: the device's block size when that is larger).
  // A unit none of whose pages is stored (never written, or discarded
  // whole) is a hole reading zeroes; any stored page makes its unit data.
  // At most max_extents extents (see Device::allocation); a range that
  // starts or ends inside a unit gets that unit's answer for its part.
  // inval if out of range.
  // Cost: one or two tree lookups per page under that page's shard lock.
  Result<std::vector<Extent>> allocation(uint64_t off, uint64_t len, uint32_t granule, size_t max_extents);

  uint64_t capacity() const { return capacity_; }
  bool has_cache() const { return cache_pages_per_shard_ > 0; }
  // Pages currently allocated, for tests and reports.
  uint64_t backing_pages() const;
  uint64_t cached_pages() const;

 private:
  struct Page {
    unsigned char data[kPageSize];
  };
  // Pages come from their shard's PagePool (zeroed) and go back to it.
  struct PageFree {
    PagePool* pool = nullptr;
    void operator()(Page* p) const { pool->put(p); }
  };
  // Keyed by the page's number within its shard (idx >> shard_bits_), so
  // each shard's keys are dense and its trees as shallow as they can be.
  using PageMap = base::RadixMap<Page, PageFree>;
  struct alignas(64) Shard {
    std::mutex mu;
    PagePool pool;  // before the maps: they free into it as they go
    PageMap backing;
    PageMap cache;
    uint64_t evict_from = 0;  // the key the next eviction searches from
  };
  // A zeroed page owned by nothing yet, or empty when memory ran out.
  static PageMap::Owned new_page(Shard& s) {
    return PageMap::Owned(static_cast<Page*>(s.pool.get()), PageFree{&s.pool});
  }

  Shard& shard_of(uint64_t idx) { return shards_[idx & shard_mask_]; }
  uint64_t key_of(uint64_t idx) const { return idx >> shard_bits_; }
  bool in_range(uint64_t off, uint64_t len) const {
    return off <= capacity_ && len <= capacity_ - off;
  }
  // Each helper handles the part of one page; the shard lock is held.
  // `key` is the page's key in shard s (key_of). The page a read sees:
  // the cached copy, else the backing one, else nullptr (zeros).
  static Page* find_page(Shard& s, uint64_t key);
  bool write_page(Shard& s, uint64_t key, uint32_t pos, const unsigned char* src, uint32_t n,
                  bool fua);
  bool write_cached(Shard& s, uint64_t key, uint32_t pos, const unsigned char* src, uint32_t n,
                    bool fua);
  static void discard_page(Shard& s, uint64_t key, uint32_t pos, uint32_t n);
  static bool evict_one(Shard& s);
  bool page_stored(uint64_t idx);

  uint64_t capacity_;
  size_t cache_pages_per_shard_;
  uint64_t shard_mask_;
  unsigned shard_bits_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace blkmq::nullb
