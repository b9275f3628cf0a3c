// A bounded lock-free multi-producer, single-consumer ring of pointers: the
// hand-off from queue_rq (any dispatching thread) to a hw queue's server
// thread. Each slot carries a sequence number, so a producer claims a slot
// with one CAS and publishes it with one release store, and the consumer
// never waits for a producer that claimed an earlier slot but has not
// published yet: it sees the ring as empty until then.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace blkmq::ublkd {

template <typename T>
class MpscRing {
 public:
  // Capacity is rounded up to a power of two (at least 2).
  explicit MpscRing(uint32_t capacity) {
    uint32_t n = 2;
    while (n < capacity) n <<= 1;
    mask_ = n - 1;
    slots_ = std::make_unique<Slot[]>(n);
    for (uint32_t i = 0; i < n; i++) slots_[i].seq.store(i, std::memory_order_relaxed);
  }

  // Any thread. False when the ring is full.
  bool push(T* v) {
    uint64_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Slot& s = slots_[pos & mask_];
      const uint64_t seq = s.seq.load(std::memory_order_acquire);
      const int64_t diff = static_cast<int64_t>(seq - pos);
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          s.val = v;
          s.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // the consumer has not freed this slot yet: full
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  // The consumer thread only. nullptr when empty (or when the next slot is
  // claimed but not yet published; its producer then wakes the consumer).
  T* pop() {
    Slot& s = slots_[head_ & mask_];
    if (s.seq.load(std::memory_order_acquire) != head_ + 1) return nullptr;
    T* v = s.val;
    s.seq.store(head_ + mask_ + 1, std::memory_order_release);
    head_++;
    return v;
  }

  // Consumer only: whether a published entry is waiting.
  bool has_ready() const {
    return slots_[head_ & mask_].seq.load(std::memory_order_acquire) == head_ + 1;
  }

 private:
  struct Slot {
    std::atomic<uint64_t> seq{0};
    T* val = nullptr;
  };
  alignas(64) std::atomic<uint64_t> tail_{0};
  alignas(64) uint64_t head_ = 0;  // consumer-private
  uint64_t mask_ = 0;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace blkmq::ublkd
