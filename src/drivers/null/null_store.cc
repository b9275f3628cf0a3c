#include "drivers/null/null_store.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "drivers/extents.h"

namespace blkmq::nullb {
namespace {

// Visits the page pieces of [off, off+len): fn(page index, offset in page,
// length, offset into the caller's buffer). Stops early if fn returns false.
template <typename Fn>
bool for_each_page(uint64_t off, uint64_t len, Fn&& fn) {
  uint64_t done = 0;
  while (done < len) {
    uint64_t pos = off + done;
    uint64_t idx = pos / PageStore::kPageSize;
    auto in_page = static_cast<uint32_t>(pos % PageStore::kPageSize);
    auto n = static_cast<uint32_t>(std::min<uint64_t>(PageStore::kPageSize - in_page, len - done));
    if (!fn(idx, in_page, n, done)) return false;
    done += n;
  }
  return true;
}

}  // namespace

PageStore::PageStore(uint64_t capacity_bytes, uint64_t cache_bytes, unsigned nr_shards)
    : capacity_(capacity_bytes) {
  unsigned n = std::bit_ceil(std::max(1u, nr_shards));
  shard_mask_ = n - 1;
  shard_bits_ = static_cast<unsigned>(std::countr_zero(n));
  shards_ = std::make_unique<Shard[]>(n);
  // Every page of the device, the last one perhaps partial, has a key in
  // its shard below this.
  const uint64_t pages = capacity_bytes / kPageSize + (capacity_bytes % kPageSize != 0);
  const uint64_t keys = pages ? key_of(pages - 1) + 1 : 0;
  uint64_t cache_pages = cache_bytes / kPageSize;
  // Each shard evicts within itself, so give every shard its part of the
  // cache (at least one page when there is a cache at all).
  cache_pages_per_shard_ = cache_pages ? std::max<uint64_t>(1, cache_pages / n) : 0;
  for (unsigned i = 0; i < n; i++) {
    Shard& s = shards_[i];
    s.pool.set_max_pages(keys + std::min<uint64_t>(keys, cache_pages_per_shard_));
    s.backing = PageMap(keys, PageFree{&s.pool});
    s.cache = PageMap(keys, PageFree{&s.pool});
  }
}

PageStore::~PageStore() = default;

PageStore::Page* PageStore::find_page(Shard& s, uint64_t key) {
  // The cache holds the newest copy of a page when it has one.
  Page* page = s.cache.find(key);
  return page ? page : s.backing.find(key);
}

bool PageStore::evict_one(Shard& s) {
  uint64_t key = s.evict_from;
  if (!s.cache.next(&key)) {
    key = 0;
    if (!s.cache.next(&key)) return true;  // nothing cached
  }
  if (!s.cache.move_entry(key, s.backing)) return false;
  s.evict_from = key + 1;
  return true;
}

bool PageStore::write_page(Shard& s, uint64_t key, uint32_t pos, const unsigned char* src,
                           uint32_t n, bool fua) {
  if (cache_pages_per_shard_) return write_cached(s, key, pos, src, n, fua);
  Page* page = s.backing.find(key);
  if (!page) {
    PageMap::Owned fresh = new_page(s);  // zeroed: a partial write reads zeros around it
    if (!fresh) return false;
    page = fresh.get();
    if (!s.backing.put(key, fresh)) return false;  // fresh still owns the page
  }
  std::memcpy(page->data + pos, src, n);
  return true;
}

bool PageStore::write_cached(Shard& s, uint64_t key, uint32_t pos, const unsigned char* src,
                             uint32_t n, bool fua) {
  Page* page = s.cache.find(key);
  if (!page) {
    if (s.cache.size() >= cache_pages_per_shard_ && !evict_one(s)) return false;
    // A cache page starts as the backing copy, so a partial write keeps
    // the rest of the page.
    PageMap::Owned fresh = new_page(s);  // zeroed
    if (!fresh) return false;
    if (const Page* b = s.backing.find(key)) std::memcpy(fresh->data, b->data, kPageSize);
    page = fresh.get();
    if (!s.cache.put(key, fresh)) return false;
  }
  std::memcpy(page->data + pos, src, n);
  if (fua) return s.cache.move_entry(key, s.backing);
  return true;
}

void PageStore::discard_page(Shard& s, uint64_t key, uint32_t pos, uint32_t n) {
  if (n == kPageSize) {
    s.cache.take(key);
    s.backing.take(key);
    return;
  }
  // A partial discard keeps the page but must read back as zeros.
  for (PageMap* m : {&s.cache, &s.backing}) {
    if (Page* page = m->find(key)) std::memset(page->data + pos, 0, n);
  }
}

BlkStatus PageStore::read(uint64_t off, void* dst, size_t len) {
  if (!in_range(off, len)) return BlkStatus::inval;
  auto* out = static_cast<unsigned char*>(dst);
  for_each_page(off, len, [&](uint64_t idx, uint32_t pos, uint32_t n, uint64_t boff) {
    Shard& s = shard_of(idx);
    std::lock_guard lk(s.mu);
    // The copy stays here, where the compiler knows n <= kPageSize and may
    // inline it (a 4 KiB rep stos/movs rather than a libc call).
    if (const Page* page = find_page(s, key_of(idx))) {
      std::memcpy(out + boff, page->data + pos, n);
    } else {
      std::memset(out + boff, 0, n);
    }
    return true;
  });
  return BlkStatus::ok;
}

BlkStatus PageStore::write(uint64_t off, const void* src, size_t len, bool fua) {
  if (!in_range(off, len)) return BlkStatus::inval;
  const auto* in = static_cast<const unsigned char*>(src);
  bool ok = for_each_page(off, len, [&](uint64_t idx, uint32_t pos, uint32_t n, uint64_t boff) {
    Shard& s = shard_of(idx);
    std::lock_guard lk(s.mu);
    return write_page(s, key_of(idx), pos, in + boff, n, fua);
  });
  return ok ? BlkStatus::ok : BlkStatus::nospc;
}

BlkStatus PageStore::discard(uint64_t off, uint64_t len) {
  if (!in_range(off, len)) return BlkStatus::inval;
  for_each_page(off, len, [&](uint64_t idx, uint32_t pos, uint32_t n, uint64_t) {
    Shard& s = shard_of(idx);
    std::lock_guard lk(s.mu);
    discard_page(s, key_of(idx), pos, n);
    return true;
  });
  // The freed pages' memory goes back to the kernel, a shard's at once so
  // neighbouring pages go in one call. Consecutive pages sit in
  // consecutive shards: the first pages of the range name every shard it
  // touched.
  const uint64_t first = off / kPageSize;
  const uint64_t pages = len ? (off + len - 1) / kPageSize - first + 1 : 0;
  for (uint64_t i = 0; i < std::min(pages, shard_mask_ + 1); i++) {
    Shard& s = shard_of(first + i);
    std::lock_guard lk(s.mu);
    s.pool.release();
  }
  return BlkStatus::ok;
}

BlkStatus PageStore::flush() {
  if (cache_pages_per_shard_ == 0) return BlkStatus::ok;
  for (uint64_t i = 0; i <= shard_mask_; i++) {
    Shard& s = shards_[i];
    std::lock_guard lk(s.mu);
    // Each write-back removes the page found, so the search goes on from it.
    for (uint64_t key = 0; s.cache.next(&key);) {
      if (!s.cache.move_entry(key, s.backing)) return BlkStatus::nospc;
    }
  }
  return BlkStatus::ok;
}

uint64_t PageStore::power_cut() {
  uint64_t lost = 0;
  for (uint64_t i = 0; i <= shard_mask_; i++) {
    Shard& s = shards_[i];
    std::lock_guard lk(s.mu);
    lost += s.cache.size();
    s.cache.clear();
    s.pool.release();  // a power cut frees the cache's memory
  }
  return lost;
}

uint64_t PageStore::backing_pages() const {
  uint64_t n = 0;
  for (uint64_t i = 0; i <= shard_mask_; i++) {
    std::lock_guard lk(shards_[i].mu);
    n += shards_[i].backing.size();
  }
  return n;
}

uint64_t PageStore::cached_pages() const {
  uint64_t n = 0;
  for (uint64_t i = 0; i <= shard_mask_; i++) {
    std::lock_guard lk(shards_[i].mu);
    n += shards_[i].cache.size();
  }
  return n;
}

bool PageStore::page_stored(uint64_t idx) {
  Shard& s = shard_of(idx);
  std::lock_guard lk(s.mu);
  return find_page(s, key_of(idx)) != nullptr;
}

Result<std::vector<Extent>> PageStore::allocation(uint64_t off, uint64_t len, uint32_t granule,
                                                  size_t max_extents) {
  if (granule < kPageSize || granule % kPageSize) granule = kPageSize;
  if (!in_range(off, len)) return Status::invalid("null: allocation query past the end of the device");
  // A unit may start inside a page only when blocks are smaller than pages;
  // then its page answers for it.
  const uint64_t step = granule;
  ExtentBuilder map(max_extents);
  uint64_t pos = off;
  while (pos < off + len) {
    const uint64_t unit_end = std::min(off + len, (pos / step + 1) * step);
    bool stored = false;
    for (uint64_t idx = pos / kPageSize; idx * kPageSize < unit_end && !stored; idx++) stored = page_stored(idx);
    if (!map.add(unit_end - pos, stored ? 0 : kExtentHole | kExtentZero)) break;
    pos = unit_end;
  }
  return map.take();
}

BlkStatus PageStore::transfer(Request* rq, uint64_t off, uint64_t limit) {
  const bool is_write = rq->op != ReqOp::read;  // a write or an append
  const bool fua = rq->cmd_flags & kBioFua;
  const uint64_t len = rq->data_len;
  BlkStatus st = BlkStatus::ok;
  rq_for_each_segment(rq, [&](void* base, size_t n, uint64_t roff) {
    if (st != BlkStatus::ok || roff >= limit) return;
    // Segments past data_len would touch another request's range.
    if (roff >= len || n > len - roff) {
      st = BlkStatus::inval;
      return;
    }
    n = static_cast<size_t>(std::min<uint64_t>(n, limit - roff));
    st = is_write ? write(off + roff, base, n, fua) : read(off + roff, base, n);
  });
  return st;
}

}  // namespace blkmq::nullb
