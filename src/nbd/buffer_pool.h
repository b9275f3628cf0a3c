// Payload buffers for one NBD connection, with the large ones kept for
// reuse. A buffer above glibc's largest mmap threshold (32 MiB, which a
// 32 MiB payload with its alignment exceeds) is a fresh mapping each time,
// and the kernel zero-fills every page of it on first touch: for a stream
// of 32 MiB WRITEs that zeroing cost more than receiving the bytes. Kept
// buffers are handed out again instead.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

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

  BufferPool() = default;
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A kAlign-aligned buffer of at least n bytes, its capacity in *cap;
  // null when the memory is not there. Any thread.
  char* get(size_t n, size_t* cap);
  // Gives back a buffer from get() with its capacity. Any thread.
  void put(char* p, size_t cap);

 private:
  struct Kept {
    char* p;
    size_t cap;
  };
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
