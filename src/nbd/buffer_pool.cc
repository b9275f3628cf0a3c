#include "nbd/buffer_pool.h"

#include <cstdlib>

namespace blkmq::nbd {

BufferPool::~BufferPool() {
  for (const Kept& k : kept_) std::free(k.p);
}

char* BufferPool::get(size_t n, size_t* cap) {
  const size_t want = (n + kAlign - 1) / kAlign * kAlign;
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
