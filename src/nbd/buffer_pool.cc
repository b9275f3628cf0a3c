#include "nbd/buffer_pool.h"

#include <bit>
#include <cstdlib>

namespace blkmq::nbd {

namespace {

void free_buffer(void* p) { std::free(p); }

// The class of a small buffer of `want` bytes (a multiple of kAlign).
unsigned small_class(size_t want) {
  return static_cast<unsigned>(std::bit_width((want - 1) / BufferPool::kAlign));
}

}  // namespace

BufferPool::BufferPool()
    : small_{Recycler(free_buffer), Recycler(free_buffer), Recycler(free_buffer),
             Recycler(free_buffer), Recycler(free_buffer), Recycler(free_buffer)} {}

BufferPool::~BufferPool() {
  for (const Kept& k : kept_) std::free(k.p);
}

char* BufferPool::get(size_t n, size_t* cap) {
  size_t want = (n + kAlign - 1) / kAlign * kAlign;
  if (want == 0) want = kAlign;
  if (want <= kSmallMax) {
    const unsigned c = small_class(want);
    *cap = kAlign << c;
    if (void* p = small_[c].take()) return static_cast<char*>(p);
    return static_cast<char*>(std::aligned_alloc(kAlign, *cap));
  }
  if (want >= kKeepFrom) {
    std::lock_guard g(mu_);
    // A kept buffer that fits without wasting more than half of it.
    for (size_t i = 0; i < kept_.size(); i++) {
      if (kept_[i].cap >= want && kept_[i].cap / 2 <= want) {
        const Kept k = kept_[i];
        kept_[i] = kept_.back();
        kept_.pop_back();
        kept_bytes_ -= k.cap;
        *cap = k.cap;
        return k.p;
      }
    }
  }
  *cap = want;
  return static_cast<char*>(std::aligned_alloc(kAlign, want));
}

void BufferPool::put(char* p, size_t cap) {
  if (p == nullptr) return;
  if (cap <= kSmallMax) {
    small_[small_class(cap)].give(p);
    return;
  }
  if (cap >= kKeepFrom) {
    std::lock_guard g(mu_);
    if (kept_bytes_ + cap <= kKeepMax) {
      kept_.push_back({p, cap});
      kept_bytes_ += cap;
      return;
    }
  }
  std::free(p);
}

}  // namespace blkmq::nbd
