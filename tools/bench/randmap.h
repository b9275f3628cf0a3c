// Random number generators for the I/O loop: a few arithmetic instructions
// per draw, header-only so the loop can inline them.
#pragma once

#include <cstdint>

namespace bench {

// SplitMix64: seeds the others and fills verify blocks.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t s_;
};

// xoshiro256**: the general-purpose generator (norandommap offsets, the
// read/write mix).
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    SplitMix64 sm(seed);
    for (uint64_t& w : s_) w = sm.next();
  }
  uint64_t next() {
    uint64_t r = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in [0, n) by multiply-shift: no division on the I/O path.
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// A random permutation of [0, n), visited one element per next() call: each
// block is hit exactly once per pass without a bitmap (fio's random map does
// the same job with one bit per block). A full-period LCG modulo the next
// power of two walks every value of [0, 2^k) once; a bijective scramble of
// those k bits hides the LCG's weak low bits; values >= n are skipped
// (cycle walking, fewer than 2 steps on average since 2^k < 2n).
class RandomMap {
 public:
  RandomMap(uint64_t n, uint64_t seed) : n_(n) {
    unsigned k = 0;
    while (k < 64 && (uint64_t{1} << k) < n) ++k;
    mask_ = k >= 64 ? ~uint64_t{0} : (uint64_t{1} << k) - 1;
    shift_ = k / 2 + 1;
    SplitMix64 sm(seed);
    a_ = (sm.next() << 2) | 1;  // a = 1 mod 4 and c odd: full period mod 2^k
    c_ = sm.next() | 1;
    mul_ = sm.next() | 1;
    x_ = sm.next() & mask_;
  }
  uint64_t next() {
    for (;;) {
      x_ = (a_ * x_ + c_) & mask_;
      uint64_t y = x_;
      y ^= y >> shift_;
      y = (y * mul_) & mask_;
      y ^= y >> shift_;
      if (y < n_) return y;
    }
  }
  uint64_t size() const { return n_; }

 private:
  uint64_t n_, mask_;
  unsigned shift_;
  uint64_t a_, c_, mul_, x_;
};

}  // namespace bench
