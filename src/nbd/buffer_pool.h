// Payload buffers for one NBD connection, kept for reuse.
// - Large ones: a buffer above glibc's largest mmap threshold (32 MiB,
//   which a 32 MiB payload with its alignment exceeds) is a fresh mapping
//   each time, and the kernel zero-fills every page of it on first touch:
//   for a stream of 32 MiB WRITEs that zeroing cost more than receiving
//   the bytes. Kept buffers are handed out again instead.
// - Small ones (up to 128 KiB, in power-of-two classes from 4 KiB): the
//   reader takes them and the sender frees them, which through glibc is a
//   cross-thread free under the arena's lock; each class is a Recycler.
#pragma once

#include <array>
#include <cstddef>
#include <mutex>
#include <vector>

#include "nbd/recycler.h"

namespace blkmq::nbd {

class BufferPool {
 public:
  // Buffers of at least this many bytes are kept when put back.
  static constexpr size_t kKeepFrom = 1u << 20;
  // At most this many bytes are kept, so an idle connection holds no more
  // than one largest payload.
  static constexpr size_t kKeepMax = 64u << 20;
  // Alignment of every buffer (what O_DIRECT drivers need; see connection.cc).
  static constexpr size_t kAlign = 4096;
  // Buffers up to this many bytes come in power-of-two classes from kAlign
  // and are recycled (a 12 KiB request gets 16 KiB).
  static constexpr size_t kSmallMax = 128u << 10;

  BufferPool();
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A kAlign-aligned buffer of at least n bytes, its capacity in *cap;
  // null when the memory is not there. One thread for the pool's life (the
  // connection's reader): small buffers are taken from its Recyclers.
  char* get(size_t n, size_t* cap);
  // Gives back a buffer from get() with its capacity. Any thread.
  void put(char* p, size_t cap);

 private:
  struct Kept {
    char* p;
    size_t cap;
  };
  static constexpr unsigned kClasses = 6;  // 4 KiB .. 128 KiB
  std::array<Recycler, kClasses> small_;
  std::mutex mu_;
  std::vector<Kept> kept_;
  size_t kept_bytes_ = 0;
};

// unique_ptr's deleter for a pooled buffer.
struct PooledBuf {
  BufferPool* pool = nullptr;
  size_t cap = 0;
  void operator()(char* p) const { pool->put(p, cap); }
};

}  // namespace blkmq::nbd
