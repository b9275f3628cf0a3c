// Big-endian integers on the NBD wire: appending to an output buffer and
// reading from a byte span. Every NBD integer is big-endian.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace blkmq::nbd {

inline void put_be(std::string* out, uint64_t v, unsigned bytes) {
  for (unsigned i = bytes; i-- > 0;) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void put16(std::string* out, uint16_t v) { put_be(out, v, 2); }
inline void put32(std::string* out, uint32_t v) { put_be(out, v, 4); }
inline void put64(std::string* out, uint64_t v) { put_be(out, v, 8); }

inline uint64_t get_be(const char* p, unsigned bytes) {
  uint64_t v = 0;
  for (unsigned i = 0; i < bytes; i++) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
inline uint16_t get16(const char* p) { return static_cast<uint16_t>(get_be(p, 2)); }
inline uint32_t get32(const char* p) { return static_cast<uint32_t>(get_be(p, 4)); }
inline uint64_t get64(const char* p) { return get_be(p, 8); }

// A cursor over received bytes that never reads past the end: a read that
// does not fit sets failed() and returns 0 or an empty string.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  uint16_t u16() { return fits(2) ? get16(take(2)) : 0; }
  uint32_t u32() { return fits(4) ? get32(take(4)) : 0; }
  uint64_t u64() { return fits(8) ? get64(take(8)) : 0; }
  std::string_view bytes(size_t n) { return fits(n) ? std::string_view(take(n), n) : std::string_view(); }
  size_t left() const { return s_.size() - pos_; }
  bool failed() const { return failed_; }

 private:
  bool fits(size_t n) {
    if (failed_ || n > left()) failed_ = true;
    return !failed_;
  }
  const char* take(size_t n) {
    const char* p = s_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::string_view s_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace blkmq::nbd
