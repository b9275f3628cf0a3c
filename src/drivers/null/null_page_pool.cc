#include "drivers/null/null_page_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

namespace blkmq::nullb {

PagePool::~PagePool() {
  for (const Chunk& c : chunks_) munmap(c.base, c.bytes);
}

void PagePool::set_max_pages(size_t n) { chunk_pages_ = std::clamp<size_t>(n, 1, kMaxChunkPages); }

void* PagePool::get() {
  if (!kept_.empty()) {
    void* p = kept_.back();
    kept_.pop_back();
    std::memset(p, 0, kPageSize);
    return p;
  }
  if (!released_.empty()) {
    void* p = released_.back();
    released_.pop_back();
    return p;
  }
  if (next_ == end_) {
    const size_t bytes = chunk_pages_ * kPageSize;
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (base == MAP_FAILED) return nullptr;
    try {
      chunks_.push_back({base, bytes});
    } catch (...) {
      munmap(base, bytes);
      return nullptr;
    }
    next_ = static_cast<char*>(base);
    end_ = next_ + bytes;
  }
  void* p = next_;
  next_ += kPageSize;
  return p;
}

void PagePool::put(void* page) {
  try {
    kept_.push_back(page);
  } catch (...) {
    // No room to remember it: the page stays mapped, unused, until the
    // pool goes. Nothing is lost but its reuse.
  }
}

void PagePool::release() {
  if (kept_.empty()) return;
  std::sort(kept_.begin(), kept_.end());
  try {
    released_.reserve(released_.size() + kept_.size());
  } catch (...) {
    return;  // they stay kept, still reusable
  }
  for (size_t i = 0; i < kept_.size();) {
    size_t j = i + 1;
    while (j < kept_.size() && static_cast<char*>(kept_[j]) == static_cast<char*>(kept_[j - 1]) + kPageSize) j++;
    char* start = static_cast<char*>(kept_[i]);
    const size_t bytes = (j - i) * kPageSize;
    // Where the kernel will not drop them, zero them by hand: get() hands
    // released pages out as zeros.
    if (madvise(start, bytes, MADV_DONTNEED) != 0) std::memset(start, 0, bytes);
    released_.insert(released_.end(), kept_.begin() + static_cast<ptrdiff_t>(i), kept_.begin() + static_cast<ptrdiff_t>(j));
    i = j;
  }
  kept_.clear();
}

}  // namespace blkmq::nullb
